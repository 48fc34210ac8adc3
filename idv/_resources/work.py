"""Work started in idv's thread pools for one caller, ended together.

A caller that waits for its tasks (the blocks of a read, the windows of a scan, the files of
a dataset opened ahead) may stop waiting before they finish: a Ctrl-C while it waits, a
task's error, a consumer that abandons a stream of batches. Its tasks not yet begun are then
dropped, and those running end their remote requests at once (idv._storage.remote_process
asks ``current()`` which work a request is for). Otherwise they would hold the pool's
threads until the storage answered or their deadline passed (a minute by default), and the
next read, even of another file, would wait behind them.

Work that a task starts in turn (a window's blocks fetched in the read pool) is part of the
task's work: ending the outer work ends it all.
"""
from __future__ import annotations

import contextvars
import threading
from concurrent import futures

from idv._resources import threads as _threads

_current = contextvars.ContextVar("idv_work", default=None)


def current():
    """The Work the task running in this thread belongs to, else None."""
    return _current.get()


class Work:
    """Tasks submitted for one caller, and what ends each (see the module's docstring)."""

    def __init__(self, parent=None):
        self._lock = threading.Lock()
        self._ends = {}
        self._count = 0
        self.ended = False
        self._unlink = None if parent is None else parent.on_end(self.end)

    def on_end(self, fn):
        """Call fn() when this work ends (at once if it has): returns what forgets fn."""
        with self._lock:
            if not self.ended:
                key = self._count = self._count + 1
                self._ends[key] = fn
                return lambda: self._forget(key)
        fn()
        return lambda: None

    def _forget(self, key):
        with self._lock:
            self._ends.pop(key, None)

    def end(self):
        """Drop the tasks not begun, end the remote requests of those running."""
        with self._lock:
            if self.ended:
                return
            self.ended = True
            ends, self._ends = list(self._ends.values()), {}
        for fn in ends:
            fn()

    def release(self):
        """Its tasks are all finished: the work it is part of forgets it."""
        if self._unlink is not None:
            self._unlink()

    def submit(self, pool, fn, *args):
        """A Future of fn(*args) run in `pool` as part of this work."""
        done = pool.submit(self._run, fn, args)
        forget = self.on_end(done.cancel)
        done.add_done_callback(lambda _: forget())
        return done

    def _run(self, fn, args):
        token = _current.set(self)
        try:
            return fn(*args)
        finally:
            _current.reset(token)

    def wait(self, pending):
        """Wait until every Future of `pending` is done; if the wait is interrupted, this
        work ended first (its running tasks then finish at once)."""
        try:
            futures.wait(pending)
        except BaseException:
            self.end()
            futures.wait(pending)
            raise


def map_all(purpose, threads, fn, items):
    """[fn(item) for item in items], run in the pool for `purpose` with `threads` workers;
    if the caller stops waiting (a task's error, an interrupt), the others are ended."""
    work = Work(current())
    pool = _threads.pool(purpose, threads)
    try:
        return [done.result() for done in [work.submit(pool, fn, item) for item in items]]
    except BaseException:
        work.end()
        raise
    finally:
        work.release()
