"""The typer commands: options parsed, domain code called, exit codes."""
