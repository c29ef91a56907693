"""End-to-end tests (pytest -m e2e): a package, so that a module may share its name with a unit one."""
