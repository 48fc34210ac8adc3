"""The command line's exit codes, the error that ends a command with one of them, and the
remedy its memory refusals name."""

EXIT_OK, EXIT_BAD_FILE, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A failure reported as one line ``idv: error: ...``; carries the exit code."""

    def __init__(self, message, code=EXIT_BAD_FILE):
        super().__init__(message)
        self.code = code


def memory_refused(error):
    """The message of idv.MemoryLimitError `error` as the command line reports it: what was
    refused, with the remedy a shell user can apply, the option --memory-limit, in place of
    the Python calls a command cannot make."""
    change = "lower the limit so that reads are refused before they allocate" if error.lower \
        else "raise the limit"
    return (f"{error.refusal}; {change}: idv --memory-limit BYTES COMMAND ... (e.g. "
            f"--memory-limit 8GB)")
