"""Python's cyclic garbage collector, paused while a dataset lists or reads many files.

Opening a thousand files makes tens of thousands of objects that live on. Each time their
number has grown by a quarter, CPython's collector walks every object alive; with the files'
bytes between them in memory, each object is a cache miss, and a 10,000-file listing spent
a third of its time there. What idv makes in between holds no reference cycle (the
collector has nothing to free that reference counts would not), so it is paused for the
duration and resumed after, as it was found. Only for many files: a long read of a few
large files makes few objects, and other threads' garbage would wait for it.

A process forked while another thread is inside such a block inherits the paused collector,
but not the thread that would resume it: the child starts again from no pause.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading

_lock = threading.Lock()
_depth = 0              # how many paused() blocks are running, in any thread
_resume = False         # whether the collector ran when the first of them began


@contextlib.contextmanager
def paused(many=True):
    """Run the block with the collector stopped; the last block to end starts it again if it
    was running when the first began (blocks nest and overlap across threads). `many`
    False: the block makes too few objects to matter, and runs as it is."""
    global _depth, _resume
    if not many:
        yield
        return
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


def _reset_in_child():
    """In a forked child: end the pauses of the parent's threads, which did not come along,
    restoring the collector as the first of them found it (and a lock none of them holds)."""
    global _lock, _depth
    if _depth and _resume:
        gc.enable()
    _depth = 0
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)


# files from which listing or reading a dataset pauses the collector
MANY_FILES = 100


def paused_for(files):
    """A method (or function) run with the collector paused when it lists or reads many
    files (`files(*args, **kwargs)` of them, given its arguments: MANY_FILES or more)."""
    def wrap(method):
        @functools.wraps(method)
        def run(*args, **kwargs):
            with paused(files(*args, **kwargs) >= MANY_FILES):
                return method(*args, **kwargs)
        return run
    return wrap
