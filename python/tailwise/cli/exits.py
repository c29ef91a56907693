"""The exit statuses of every command (README's "Exit status")."""

EXIT_OK, EXIT_NOT_MEASURABLE, EXIT_ERROR, EXIT_THRESHOLD, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
