"""Thread pools shared by the reader, the writer and the converters.

Each purpose gets its own pool, so work running in one pool never waits on work queued behind
it in the same pool (a writer task that reads, a converter task that writes).

At exit the interpreter joins the pools' threads, each woken by a last item in its pool's
queue; a thread whose start a Ctrl-C interrupted is running but was never given to the exit's
list (concurrent.futures registers a thread after its start returns), and would keep the exit
waiting forever. So every pool is shut down first, which wakes all its threads.

A process forked from one that used the pools (a PyTorch DataLoader worker, a
``multiprocessing`` pool on Linux) inherits the pool objects but none of their threads: work
queued there would wait forever. The child therefore forgets the pools (and the lock, which
another thread may have held at the fork) and makes its own on first use.
"""
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

_POOLS = {}
_LOCK = threading.Lock()
_MADE = weakref.WeakSet()      # every pool made, those replaced by larger ones too (at exit)


def pool(purpose, threads):
    """The pool for `purpose` ("read", "write", ...), with at least `threads` workers."""
    with _LOCK:
        p = _POOLS.get(purpose)
        if p is None or p._max_workers < threads:
            p = _POOLS[purpose] = ThreadPoolExecutor(threads, thread_name_prefix=f"idv-{purpose}")
            _MADE.add(p)
        return p


def default_threads():
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _forget_pools():
    """In a forked child: drop the parent's pools, whose threads did not come along."""
    global _POOLS, _LOCK, _MADE
    _POOLS = {}
    _LOCK = threading.Lock()
    _MADE = weakref.WeakSet()       # (their locks too may have been held at the fork)


def _wake_at_exit():
    """Shut every pool down (the work queued there still runs): see the module's docstring."""
    for p in list(_MADE):
        p.shutdown(wait=False)


# threading's exit hooks run last registered first: this one before concurrent.futures' own,
# which joins the pools' threads (registered when ThreadPoolExecutor was imported, above)
try:
    threading._register_atexit(_wake_at_exit)
except (AttributeError, RuntimeError):      # no such hook, or exiting already
    pass

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)
