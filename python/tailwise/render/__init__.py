"""The only code that prints or draws: terminal output, the live line, plots and HTML reports."""
