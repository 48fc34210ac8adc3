"""What a Column reads through, without holding its file: the file's parts and a count of
blocks decoded that several threads add to."""
from __future__ import annotations

import threading
from typing import NamedTuple

_COUNTING = threading.Lock()      # pieces of one column decode in several threads


class Counter:
    """A count several decoding threads add to (a column's blocks_decoded): held by the
    column's ColumnBlocks, it ties them to no Column, so no reference cycle."""

    def __init__(self):
        self.count = 0

    def add(self, n):
        with _COUNTING:
            self.count += n


class FileParts(NamedTuple):
    """What a column reads through: its file's block store, tables (idv._storage.layout.Tables),
    header and name. Not the IdvFile itself, so that a file and its columns form no reference
    cycle: a file dropped (a dataset's, closed) is freed at once, not by the garbage
    collector, whose passes over thousands of such files cost a third of opening them."""
    store: object
    tables: object
    header: object
    path: object

    @property
    def num_rows(self):
        return self.header.row_count

    def check_open(self):
        """ValueError once the file is closed."""
        self.store.check_open()
