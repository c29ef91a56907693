"""Unit tests (pytest -m unit): a package, so that a module may share its name with an e2e one."""
