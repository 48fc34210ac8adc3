"""Thread pools shared by the reader, the writer and the converters.

Each purpose gets its own pool, so work running in one pool never waits on work queued behind
it in the same pool (a writer task that reads, a converter task that writes).
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor

_POOLS = {}
_LOCK = threading.Lock()


def pool(purpose, threads):
    """The pool for `purpose` ("read", "write", ...), with at least `threads` workers."""
    with _LOCK:
        p = _POOLS.get(purpose)
        if p is None or p._max_workers < threads:
            p = _POOLS[purpose] = ThreadPoolExecutor(threads, thread_name_prefix=f"idv-{purpose}")
        return p


def default_threads():
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1
