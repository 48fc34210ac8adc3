"""Decoded blocks kept for row access: ``col[i]`` and ``col[[i, j, ...]]`` decode a block once
and find it again while it stays in a cache bounded in bytes (least recently used out first).
Whole reads and slices stream past it: they decode their blocks once anyway. Threads share
it: its bookkeeping is under a lock, the decoding is not (two threads may decode one block at
once; the second finds the first's kept).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

DEFAULT_BYTES = 64 << 20     # per open file

_PYOBJECT_BYTES = 56         # what a short Python str costs beyond its pointer (text blocks)


def cost(value, raw_bytes=0):
    """The bytes a decoded block holds (at least `raw_bytes`, its decompressed size)."""
    arrays = [value] if isinstance(value, np.ndarray) else \
        [a for a in (getattr(value, "values", None), getattr(value, "offsets", None))
         if isinstance(a, np.ndarray)]
    n = sum(a.nbytes + (a.size * _PYOBJECT_BYTES if a.dtype == object else 0) for a in arrays)
    return max(n, int(raw_bytes), 1)


class BlockCache:
    """Blocks by key, within `max_bytes` (0: keep nothing)."""

    def __init__(self, max_bytes=DEFAULT_BYTES):
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)) \
                or max_bytes < 0:
            raise ValueError(f"cache_bytes must be a number of bytes >= 0, not {max_bytes!r}")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._items = OrderedDict()
        self._lock = threading.Lock()

    def within(self, memory_limit):
        """Hold at most half of `memory_limit` (the file's): what the cache keeps and a read
        beside it both fit the limit."""
        self.max_bytes = min(self.max_bytes, int(memory_limit) // 2)

    def get(self, key, load, raw_bytes=0):
        """The block under `key`, or `load()`'s, kept if it fits."""
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit[0]
        value = load()
        size = cost(value, raw_bytes)
        if size > self.max_bytes:
            return value
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:           # another thread kept it meanwhile
                return hit[0]
            self._items[key] = (value, size)
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                _, (_, gone) = self._items.popitem(last=False)
                self.nbytes -= gone
        return value

    def __contains__(self, key):
        return key in self._items

    def __len__(self):
        return len(self._items)

    def clear(self):
        with self._lock:
            self._items.clear()
            self.nbytes = 0
