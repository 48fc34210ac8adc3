"""The command line's exit codes, and the error that ends a command with one of them."""

EXIT_OK, EXIT_BAD_FILE, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A failure reported as one line ``idv: error: ...``; carries the exit code."""

    def __init__(self, message, code=EXIT_BAD_FILE):
        super().__init__(message)
        self.code = code
