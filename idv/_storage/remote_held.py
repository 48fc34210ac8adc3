"""Bytes of a remote file kept in memory, which its reads take without a request: the header
and tail fetched at open (for the tables), a whole read's blocks (RemoteSource.prefetch), and
a scan window's blocks fetched ahead of its decoding (Ahead).

Several threads read and add at once: the pieces are a tuple replaced whole under a lock, so
a read goes on over the one it took while another thread adds or drops pieces.
"""
from __future__ import annotations

import os
import threading


class Held:
    """The (start, bytes) pieces of a file held in memory."""

    def __init__(self):
        self._lock = threading.Lock()
        self.pieces = ()

    def __bool__(self):
        return bool(self.pieces)

    def first(self):
        """The first piece's (start, bytes): the header fetched at open."""
        return self.pieces[0]

    def last_start(self):
        return self.pieces[-1][0]

    def find(self, start, size):
        """A memoryview of bytes [start, start + size), or None where no piece holds them."""
        for h0, data in self.pieces:
            if h0 <= start and start + size <= h0 + len(data):
                return memoryview(data)[start - h0:start - h0 + size]
        return None

    def replace(self, pieces):
        """Hold these (start, bytes) instead of what was held."""
        with self._lock:
            self.pieces = tuple(pieces)

    def add(self, pieces):
        """Hold these (start, bytes) too; they are let go by drop(pieces)."""
        with self._lock:
            self.pieces = self.pieces + tuple(pieces)

    def drop(self, pieces):
        """Let go of these pieces (those given to add), not of others with the same bytes."""
        gone = {id(p) for p in pieces}
        with self._lock:
            self.pieces = tuple(p for p in self.pieces if id(p) not in gone)


class Ahead:
    """Ranges of a remote file whose requests are on their way while a scan's pieces that read
    them wait their turn: the first wait() holds the bytes in `held` when they arrive, for the
    `users` pieces' reads; the last one's done(), or drop(), cancels what is still in flight
    and lets the bytes go. `finish()` waits for the requests and gives [(start, bytes)];
    `cancel()` ends them.

    A process forked since the requests were sent cannot wait for them (the event loop they
    are on is the parent's): there wait() does nothing and the reads fetch their own bytes."""

    def __init__(self, held, finish, cancel, users):
        self._held = held
        self._finish = finish
        self._cancel = cancel
        self._users = users
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._pieces = None
        self._error = None
        self._dropped = False

    def wait(self):
        """Once the bytes are held (the first caller waits for them; a failure is raised to
        every caller, as the read's own request would have raised it)."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            if self._dropped or self._pieces is not None:
                return
            if self._error is not None:
                raise self._error
            try:
                pieces = [tuple(p) for p in self._finish()]
            except Exception as exc:    # noqa: BLE001 - raised to each piece that waits
                self._error = exc
                raise
            self._held.add(pieces)
            self._pieces = pieces

    def expect(self, users):
        """The number of pieces that will read the bytes, known once its window is submitted
        (a window's blocks requested before: idv._scan.scan_windows.Windows.fetch_early)."""
        with self._lock:
            self._users = users
        if users <= 0:
            self.drop()

    def done(self):
        """One of the users has read its bytes: the last lets them go."""
        with self._lock:
            self._users -= 1
            last = self._users <= 0
        if last:
            self.drop()

    def drop(self):
        """Cancel the requests still in flight and let the bytes go (once)."""
        if os.getpid() != self._pid:
            return
        self._cancel()          # first: a thread waiting for the bytes holds the lock
        with self._lock:
            if self._dropped:
                return
            self._dropped = True
            pieces, self._pieces = self._pieces, None
        if pieces:
            self._held.drop(pieces)
