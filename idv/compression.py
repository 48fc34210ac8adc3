"""DEFLATE backends for reading and writing, and the meaning of ``compression=``, ``level=``
and ``backend=``.

`BACKENDS` is the one table of libraries, fastest first: libdeflate (the `deflate` package),
ISA-L (`isal`) and zlib (built in). Each entry says whether it is installed, how to install it,
how it decompresses a run of blocks and how it compresses one, its levels, and what does the
work (`runs`; `backends()` lists them): zlib is zlib's C API, or Python's zlib module in a build
made without zlib's headers (the same bytes either way). Reading (idv.open) and writing
(idv.write, idv.Writer, idv.convert) take the same names and the same default,
`default_backend()`, but for idv.convert's library and level (`convert_deflate`: the fastest
compressor). Only zlib writes bytes identical to ML.NET's (same data either way). The C
mechanics are in idv._compression.
"""
from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Callable, Optional

from idv import _compression
from idv.errors import MissingDependencyError

NONE = _compression.NONE
DEFLATE = _compression.DEFLATE

try:
    import deflate as _deflate
except ImportError:
    _deflate = None
try:
    from isal import isal_zlib as _isal
except ImportError:
    _isal = None


# ---------------------------------------------------------------------------------------------
# each library's entry points
# ---------------------------------------------------------------------------------------------

def _zlib_compressor(level):
    return lambda raw: _compression.deflate_raw(raw, level)


_DEFLATERS = threading.local()      # per thread: level -> _compression.Deflater (not thread-safe)


def _libdeflate_compressor(level):
    """libdeflate's C API (the GIL released, so blocks compress in parallel threads), one
    compressor per thread and level; its Python function (holding the GIL) when the C API was
    not found."""
    if not _compression.LIBDEFLATE_COMPRESS:
        return lambda raw: bytes(_deflate.deflate_compress(raw, level))

    def deflater():
        cache = getattr(_DEFLATERS, "by_level", None)
        if cache is None:
            cache = _DEFLATERS.by_level = {}
        d = cache.get(level)
        if d is None:
            d = cache[level] = _compression.Deflater(level)
        return d

    def compress(raw, trial=True, limit=0):
        return deflater().compress(raw, trial, limit)
    # the adaptive rule's verdict on a block (Deflater.trial) and the noise rule's
    # (Deflater.noise), for a writer that takes one column's verdicts from its first block
    compress.trial = lambda raw: deflater().trial(raw)
    compress.noise = lambda raw: deflater().noise(raw)
    return compress


def _libdeflate_inflate(data, n):
    return _deflate.deflate_decompress(data, n)


def _isal_compressor(level):
    return lambda raw: _isal.compress(raw, level, wbits=-15)


def _isal_inflate(data, n):
    return _isal.decompress(data, -15, n)


# ---------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Backend:
    """One DEFLATE library.

    ``native``: the C decompressor idv._compression.inflate_blocks runs (GIL released), or None
    to call ``inflate(data, raw_len) -> bytes`` per block. ``compressor(level)`` gives
    ``fn(raw bytes-like) -> raw DEFLATE bytes``; ``levels`` are the valid levels,
    ``default_level`` the one used when none is given (idv.convert's: `convert_deflate`).
    ``runs``: what does the work, for people choosing a backend.
    """

    name: str
    installed: bool
    install: str
    levels: range
    default_level: int
    native: Optional[int]
    inflate: Optional[Callable]
    compressor: Callable
    stream: Optional[Callable] = None
    runs: str = ""

    def decompress_blocks(self, kind, src, offsets, disk, raw, dst, dst_offsets, crcs=None,
                          dst_of=None, need=None):
        """inflate_blocks with this library: (-1, None), or (failing block, message). `crcs`:
        each block's expected CRC-32 (idv._storage.checksums.Checksums.expected), checked first.
        With `dst_of` (a native library only), `dst` is a list of buffers, block i going
        into dst[dst_of[i]]. `need` (a native library only): the bytes wanted from each
        block's start (inflate_blocks')."""
        if dst_of is not None:
            return _compression.inflate_blocks_across(kind, [src], None, offsets, disk, raw,
                                                      dst, dst_of, dst_offsets, self.native,
                                                      crcs, need)
        if self.native is not None:
            return _compression.inflate_blocks(kind, src, offsets, disk, raw, dst, dst_offsets,
                                               self.native, crcs, need)
        return _compression.inflate_blocks_with(self.inflate, kind, src, offsets, disk, raw,
                                                dst, dst_offsets, crcs)

    def compress(self, level=None):
        """fn(raw) -> raw DEFLATE bytes at `level` (None: the default level), checked."""
        lvl = self.default_level if level is None else int(level)
        if lvl not in self.levels:
            raise ValueError(f"{self.name} DEFLATE levels are {self.levels.start} to "
                             f"{self.levels.stop - 1}, not {level}")
        return self.compressor(lvl)


# fastest first: the order default_backend() picks in
BACKENDS = {b.name: b for b in (
    Backend("libdeflate", _deflate is not None, "the deflate package: pip install 'idv[fast]'",
            range(0, 13), 6,
            _compression.NATIVE_LIBDEFLATE if _compression.LIBDEFLATE_INFLATE else None,
            _libdeflate_inflate, _libdeflate_compressor,
            runs="libdeflate's C API, the GIL released" if _compression.LIBDEFLATE_INFLATE
            else "the deflate package's Python functions"),
    Backend("isal", _isal is not None, "the isal package: pip install 'idv[isal]'",
            range(0, 4), 2,
            None, _isal_inflate, _isal_compressor,
            lambda: (_isal.decompressobj(-15), _isal.crc32),
            runs="the isal package's Python functions"),
    # zlib's levels include -1 (its own default, 6); 6 is also ML.NET's
    Backend("zlib", True, "", range(-1, 10), 6,
            _compression.NATIVE_ZLIB, None, _zlib_compressor,
            lambda: (zlib.decompressobj(-15), zlib.crc32),
            runs="zlib's C API, the GIL released" if _compression.ZLIB_C
            else "Python's zlib module (idv was built without zlib's headers)"),
)}


def backends():
    """{name: what does its work} of the installed backends, fastest first."""
    return {name: b.runs for name, b in BACKENDS.items() if b.installed}


def installed():
    """The names of the installed backends, fastest first."""
    return [name for name, b in BACKENDS.items() if b.installed]


def default_backend():
    """The fastest installed DEFLATE library: 'libdeflate', else 'isal', else 'zlib'."""
    return installed()[0]


# idv.convert's default DEFLATE: the first installed library of these, each at the fastest
# level that keeps the scale benchmark's Parquet data (rounded floats, small ints, repeated
# short text) within 1.2x ML.NET's size (zlib level 6): ISA-L's level 1 (1.15x; level 0:
# 1.47x), about as fast as pyarrow's own Parquet copy; libdeflate's level 1 (1.09x) and
# zlib's (1.04x) where ISA-L is not installed. Evenly spaced numbers and short varied text
# can come out up to 1.7x (ISA-L) and 1.5x (libdeflate) larger; libdeflate's level 2 keeps
# them within 1.07x, at about a third of ISA-L's speed (docs/benchmarks.md, "Converting").
# ISA-L's bytes, compressed in the writer's threads, can differ by a byte in a few blocks from
# run to run (the same values); libdeflate's and zlib's repeat exactly.
_CONVERT_LEVELS = {"isal": 1, "libdeflate": 1, "zlib": 1}


def convert_deflate(level=None, backend_name=None):
    """(backend name, level) of idv.convert's default DEFLATE. A level given is taken as
    idv.write takes it (with the given or default library); without one, the given library's
    convert level, or the first installed of ISA-L, libdeflate and zlib at its convert level.
    An unknown or missing library raises, as in `backend`."""
    if level is not None:
        return backend_name, level
    if backend_name is None:
        backend_name = next(n for n in _CONVERT_LEVELS if BACKENDS[n].installed)
    b = backend(backend_name)
    return b.name, _CONVERT_LEVELS[b.name]


def stream_inflater():
    """(raw DEFLATE decompressobj, crc32) of the fastest installed library that streams
    (ISA-L, else zlib): for streams inflated in parts (a zip entry larger than memory)."""
    return next(b.stream for b in BACKENDS.values() if b.installed and b.stream)()


def backend(name=None):
    """The Backend of a name (None: the default); an unknown or missing one raises."""
    if name is None:
        name = default_backend()
    b = BACKENDS.get(name)
    if b is None:
        raise ValueError(f"unknown DEFLATE backend {name!r}; known: {', '.join(BACKENDS)}")
    if not b.installed:
        raise MissingDependencyError(f"DEFLATE backend {name!r} needs {b.install}")
    return b


# ---------------------------------------------------------------------------------------------
# compression= and level=
# ---------------------------------------------------------------------------------------------

_WORDS = {NONE: (None, False, 0, "none", "None"),
          DEFLATE: (True, 1, "deflate", "Deflate", "default")}


def kind(compression, strict=True):
    """NONE or DEFLATE for a ``compression=`` value ('deflate' or 'none' and their aliases).
    Anything else raises, or with ``strict=False`` gives None (another format's codec name)."""
    for k, words in _WORDS.items():
        if compression in words:
            return k
    if not strict:
        return None
    raise ValueError(f"compression must be 'deflate' or 'none' (ML.NET reads no other), not "
                     f"{compression!r}")


def compressor(compression="deflate", level=None, backend_name=None):
    """fn(raw bytes-like) -> compressed bytes for the writer, or None for no compression.
    libdeflate's C compressor also has ``fn(raw, trial=False, limit=0)`` (no adaptive trial;
    the noise rule's limit), ``fn.trial(raw)`` and ``fn.noise(raw)`` (the verdicts:
    idv._compression.Deflater.trial and .noise)."""
    if kind(compression) == NONE:
        return None
    return backend(backend_name).compress(level)
