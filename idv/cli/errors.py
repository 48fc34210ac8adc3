"""The command line's exit codes, the error that ends a command with one of them, and the
remedy its memory refusals name."""

EXIT_OK, EXIT_BAD_FILE, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A failure reported as one line ``idv: error: ...``; carries the exit code."""

    def __init__(self, message, code=EXIT_BAD_FILE):
        super().__init__(message)
        self.code = code


def memory_refused(error):
    """The message of idv.MemoryLimitError `error` as the command line reports it: with the
    remedy a shell user can apply, the global option --memory-limit (its Python remedies
    name calls a command cannot make)."""
    return (f"{error}; on the command line: idv --memory-limit BYTES COMMAND ... (e.g. "
            f"--memory-limit 8GB)")
