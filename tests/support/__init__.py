"""What the tests share: the pytest plugin (fixtures), real servers, the CLI run as users run it,
a run read as it goes, the machine's noise. Imported as ``support.*`` (tests/ is on sys.path)."""
