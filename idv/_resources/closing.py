"""Objects that hold open files and close them at the end of a ``with`` block: the one
definition of that protocol for a file, a dataset and the Arrow dataset over one."""
from __future__ import annotations


class ClosedOnExit:
    """A context manager whose ``__exit__`` calls ``close()`` (what the subclass defines);
    ``__enter__`` returns the object itself, as open() does in Python."""

    def close(self):
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
