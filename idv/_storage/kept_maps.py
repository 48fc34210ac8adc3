"""Memory maps of closed files, kept a moment for the next open of the same file.

Closing a mapped file unmaps it, which tears down a page-table entry for every page that was
read (4 ms for a 55 MB file read whole), and the next open of it maps the file afresh and
faults every page in again. A loop that opens a file each round (a notebook cell run again,
a query engine opening it per query, an epoch of training) pays both each time. So a closed
file's map is kept for ``KEEP_SECONDS``, at most ``MAX_MAPS`` of them, and an open of the same
file (same device, inode, size and modification time) takes it back. Its bytes are the
file's as they are now: a map shows the page cache, so even a file written in place within
the same tick of its clock reads the same through it as through a new map; a file put in its
place (a new inode), of another size or written since is mapped anew. Not
under an address-space limit (RLIMIT_AS), where a kept map would take room from the next, nor
where a map holds the file against deletion (Windows). A thread drops the expired maps, so
that a deleted file's space is freed within ``KEEP_SECONDS`` even if idv is not called again.
"""
from __future__ import annotations

import collections
import os
import threading
import time

from idv._resources import budget

KEEP_SECONDS = 2.0
MAX_MAPS = 8

_LOCK = threading.Lock()
_KEPT = collections.OrderedDict()      # (device, inode, size, mtime) -> (map, when kept)
_WAKE = threading.Condition(_LOCK)
_REAPER = [None]                       # the thread dropping expired maps, while it runs


def enabled():
    """Whether closed files' maps are kept: POSIX, no address-space limit, KEEP_SECONDS > 0."""
    return os.name == "posix" and KEEP_SECONDS > 0 and budget.address_space_room() is None


def take(key):
    """The kept map of the file `key` ((device, inode, size, modification time in ns)), or
    None; it is the caller's now."""
    with _LOCK:
        kept = _KEPT.pop(key, None)
    return None if kept is None else kept[0]       # (maps are closed only once dropped)


def retried(call, errnos):
    """call(), and once more after closing the kept maps when it fails with an OSError of
    one of `errnos` (no descriptor or address space left: what kept maps hold)."""
    try:
        return call()
    except OSError as e:
        if e.errno not in errnos:
            raise
    drop_all()
    return call()


def keep(key, mm):
    """Keep the map `mm` of the closed file `key`, or close it when maps are not kept."""
    if not enabled():
        _close(mm)
        return
    dropped = []
    with _LOCK:
        old = _KEPT.pop(key, None)
        if old is not None:
            dropped.append(old[0])
        _KEPT[key] = (mm, time.monotonic())
        while len(_KEPT) > MAX_MAPS:
            dropped.append(_KEPT.popitem(last=False)[1][0])
        if _REAPER[0] is None:
            _start_reaper()
        else:
            _WAKE.notify()
    for m in dropped:
        _close(m)


def drop_all():
    """Close every kept map (before a retry that needs the descriptors or address space)."""
    with _LOCK:
        maps = [m for m, _ in _KEPT.values()]
        _KEPT.clear()
    for m in maps:
        _close(m)


def _reap():
    """Drop the maps kept longer than KEEP_SECONDS, as they expire; end when none is left."""
    while True:
        with _LOCK:
            now = time.monotonic()
            expired = []
            while _KEPT:
                key, (mm, at) = next(iter(_KEPT.items()))
                if now - at < KEEP_SECONDS:
                    break
                del _KEPT[key]
                expired.append(mm)
            if not _KEPT and not expired:
                _REAPER[0] = None
                return
            if not expired:
                _WAKE.wait(KEEP_SECONDS - (now - next(iter(_KEPT.values()))[1]))
        for mm in expired:
            _close(mm)


def _start_reaper():
    """Start the thread that drops expired maps (under _LOCK, or alone in a forked child)."""
    _REAPER[0] = threading.Thread(target=_reap, name="idv-kept-maps", daemon=True)
    _REAPER[0].start()


def _close(mm):
    try:
        mm.close()
    except BufferError:
        pass       # arrays still view it: it is unmapped when they are gone


def _forget_in_child():
    """In a forked child: the parent's reaper did not come along; the maps did, as copies."""
    global _LOCK, _WAKE
    _LOCK = threading.Lock()
    _WAKE = threading.Condition(_LOCK)
    _REAPER[0] = None
    if _KEPT:
        _start_reaper()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
