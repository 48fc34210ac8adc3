"""A remote source's requests across the life of the process.

fsspec's asynchronous filesystems (HTTP, S3, GCS, Azure) serve only the process that made
them (in a forked child their event loop is the parent's, and fsspec refuses it: "not
fork-safe"), so a source used in another process takes a copy of its filesystem made there,
as idv._engines.reopen does for the loaders' filesystems.

A forked child also inherits the parent's filesystems, with their sessions and pooled
connections: were the child to finalize them (fsspec drops its cache of filesystems in a
child, so its next garbage collection or its exit does), their sockets would be taken out of
the event loop's epoll set, which the child shares with the parent, and the parent's next
request on such a connection would wait for an answer it can no longer see, until its
deadline. So a child keeps the filesystems its parent read with, untouched, for its life.

A request ends when the read it is for ends (idv._resources.work: a Ctrl-C while the read
waits, an error, a stream abandoned), and the requests in flight when the interpreter exits
are cancelled: the interpreter's exit joins idv's reading threads, which would otherwise wait
for their requests' deadline (a minute by default) against storage that stopped answering.
"""
from __future__ import annotations

import importlib
import os
import pickle
import threading
import weakref
from concurrent import futures

from idv._resources import work as _work
from idv.errors import RemoteError

_flight = set()           # the asyncio tasks of requests running now (on fsspec's loop)
_lock = threading.Lock()
_exiting = False
_hooked = False
_used = weakref.WeakSet()     # the asynchronous filesystems this process reads with
_at_fork = []                 # those of the parent while it forks
_inherited = []               # in a forked child: its parent's, never finalized here


def track(fs):
    """Remember `fs`, an fsspec filesystem idv reads with, for the children this process
    forks (see the module's docstring)."""
    if getattr(fs, "async_impl", False):
        try:
            _used.add(fs)
        except TypeError:           # no weak references: nothing to keep from finalizing
            pass


def own(fs, url):
    """`fs`, or in another process than the one that made it, its copy made here."""
    made_in = getattr(fs, "_pid", None)       # an fsspec AsyncFileSystem's process
    if made_in is None or made_in == os.getpid():
        return fs
    try:
        copy = pickle.loads(pickle.dumps(fs))
    except Exception as exc:            # noqa: BLE001 - told with its cause
        raise RemoteError(f"{url}: the filesystem was made in another process (this is a "
                          f"forked child) and cannot be copied here: {type(exc).__name__}: "
                          f"{exc}; open the file in this process", url=url) from exc
    track(copy)
    return copy


def run(fs, request, *args):
    """await request(*args) on the event loop of `fs` (made in this process), from a thread
    that waits for it; cancelled when the wait is interrupted, when the work it is for ends
    (idv._resources.work) and when the interpreter exits."""
    return wait(start(fs, _work.current(), request, *args))


def start(fs, work, request, *args):
    """A Future of await request(*args) on the event loop of `fs` (made in this process),
    begun now and waited for later (wait): cancelled when `work` (a Work, or None) ends and
    when the interpreter exits."""
    import asyncio
    _hook()
    if fs.loop is None or fs.loop.is_closed():
        raise RemoteError("the filesystem's event loop is not running")
    done = asyncio.run_coroutine_threadsafe(_tracked(request, args), fs.loop)
    if work is not None:
        forget = work.on_end(done.cancel)
        done.add_done_callback(lambda _: forget())
    return done


def wait(done):
    """The result of `done` (a Future of start); an interrupt while waiting cancels it."""
    try:
        return done.result()
    except futures.CancelledError:
        raise RemoteError("the request was cancelled: the read it was for has ended "
                          "(interrupted, failed or abandoned)") from None
    except BaseException:           # an interrupt while waiting: the request ends too
        done.cancel()
        raise


async def _tracked(request, args):
    import asyncio
    if _exiting:
        raise RemoteError("the interpreter is exiting: no more requests")
    task = asyncio.current_task()
    with _lock:
        _flight.add(task)
    try:
        return await request(*args)
    except asyncio.CancelledError:
        if _exiting:            # an exception, not a cancellation: fsspec's sync returns it
            raise RemoteError("the request was cancelled: the interpreter is exiting") \
                from None
        raise
    finally:
        with _lock:
            _flight.discard(task)


def _cancel_all():
    global _exiting
    _exiting = True
    with _lock:
        tasks = list(_flight)
    for task in tasks:
        try:
            task.get_loop().call_soon_threadsafe(task.cancel)
        except RuntimeError:        # its loop is closed: nothing runs there
            pass


def _hook():
    """Cancel the requests in flight at exit, before the reading threads are joined: by one
    of threading's exit hooks, which run last registered first, so registered after
    concurrent.futures' own (which joins its workers' threads) it runs before it."""
    global _hooked
    if _hooked:
        return
    importlib.import_module("concurrent.futures.thread")    # registers its hook first
    try:
        threading._register_atexit(_cancel_all)
    except (AttributeError, RuntimeError):      # no such hook, or exiting already
        pass
    _hooked = True


def _before_fork():
    _at_fork[:] = list(_used)


def _after_fork_in_parent():
    _at_fork.clear()


def _after_fork_in_child():
    """The parent's filesystems kept here for good, their finalizers (which would close the
    parent's connections) detached."""
    for fs in _at_fork:
        _inherited.append(fs)
        for ref in weakref.getweakrefs(fs):
            finalizer = getattr(ref, "__callback__", None)
            if isinstance(finalizer, weakref.finalize):
                finalizer.detach()
    _at_fork.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
