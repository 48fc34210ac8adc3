#!/usr/bin/env python3
"""Read benchmark: idv against the DEFLATE libraries, memcpy, ML.NET and pyarrow, same run.

    python3 benchmarks/bench_read.py            # full: 2M x 11 numeric columns, 1M text rows
    python3 benchmarks/bench_read.py --quick    # small data, a few seconds once generated
    python3 benchmarks/bench_read.py --json     # machine-readable results on stdout
    python3 benchmarks/bench_read.py --only long --long-rows 1e6,1e7,1e8   # the long column

Every data file is written by ML.NET itself, through the oracle
(``$IDV_MLNET_ORACLE`` or ``../shared/oracle/mlnet_oracle.py``), and kept in
``benchmarks/_data/`` (git-ignored); delete that folder to regenerate. The Parquet files for
the pyarrow comparison hold the same values.

Throughput is MB/s (10^6 bytes) of *uncompressed payload* (rows x item size for numbers;
the decompressed block bytes for text), best of ``--repeat`` runs. Each idv run includes
``idv.open`` (header, table of contents, lookup tables). The baselines are measured in the same
process and run, right before the idv figures they are compared with.

Goals:
  numeric DEFLATE   idv >= 0.8 x "decompress every block, same library, 2 threads"
                    idv >= 3 x ML.NET's own read (oracle bench-read)
  short text        idv >= pyarrow reading the same strings from snappy Parquet to numpy
  no compression    numeric idv >= 0.5 x memcpy bandwidth (numpy copy of the same bytes)
  one column        reading one column touches only that column's blocks; peak memory is the
                    output array plus a few blocks per thread
  long column       one Single column of 1M, 10M and 100M rows (idv's default write; pyarrow's
                    default Parquet of the same values): idv >= 0.9 x decompress-only at each
                    size, and the ratio to pyarrow reading it into numpy
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import platform
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import idv  # noqa: E402
from idv import _compression, compression  # noqa: E402

DATA = os.path.join(HERE, "_data")
MB = 1e6

# ------------------------------------------------------------------------------------------
# data

_held = []      # the open lock file while this process holds the data lock (re-entrant)


@contextlib.contextmanager
def data_lock():
    """Held while data shared by several scripts is made in DATA, so that scripts run at once
    (the test suite's workers) wait for each other's files instead of reading them half
    made; re-entrant within a process. Without fcntl (Windows) it does nothing."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    if _held:
        yield
        return
    os.makedirs(DATA, exist_ok=True)
    with open(os.path.join(DATA, ".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held.append(fh)
        try:
            yield
        finally:
            _held.pop()
            fcntl.flock(fh, fcntl.LOCK_UN)


def oracle_path():
    env = os.environ.get("IDV_MLNET_ORACLE")
    if env:
        return env
    for cand in (os.path.join(ROOT, "..", "shared", "oracle", "mlnet_oracle.py"),
                 "/work/shared/oracle/mlnet_oracle.py"):
        if os.path.exists(cand):
            return os.path.abspath(cand)
    sys.exit("bench_read: cannot find the ML.NET oracle; set IDV_MLNET_ORACLE=.../mlnet_oracle.py")


def oracle(*args, capture=True):
    cmd = [sys.executable, oracle_path(), *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_read: oracle failed ({' '.join(cmd)}):\n{r.stderr[-3000:]}")
    return r.stdout


def numeric_columns(rows, seed=42):
    """11 numeric columns of mixed compressibility: 5 Int32, 4 Single, 1 Int64, 1 Double."""
    rng = np.random.default_rng(seed)
    return [
        ("Id", "Int32", np.arange(rows, dtype=np.int32)),
        ("Category", "Int32", rng.integers(0, 100, rows, dtype=np.int32)),
        ("Count", "Int32", rng.poisson(20, rows).astype(np.int32)),
        ("Score", "Int32", rng.integers(-10**6, 10**6, rows, dtype=np.int32)),
        ("Year", "Int32", rng.integers(1990, 2025, rows, dtype=np.int32)),
        ("Temp", "Single", np.round(rng.normal(20, 5, rows), 1).astype(np.float32)),
        ("Ratio", "Single", rng.random(rows, dtype=np.float32)),
        ("Weight", "Single", np.round(rng.gamma(2, 30, rows), 2).astype(np.float32)),
        ("Flag", "Single", (rng.random(rows) < 0.1).astype(np.float32)),
        ("Timestamp", "Int64",
         (1_600_000_000_000 + np.cumsum(rng.integers(0, 5000, rows))).astype(np.int64)),
        ("Price", "Double", np.round(rng.lognormal(3, 1, rows), 2)),
    ]


_ASCII = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789     -.,",
                       np.uint8)
_NON_ASCII = "éöüßçñøåæ€中文字日本語한국°±µ→😀"


def text_values(rows, seed=7):
    """Short strings, 5-30 characters; about 1 in 8 has a non-ASCII character."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 31, rows)
    chars = _ASCII[rng.integers(0, len(_ASCII), int(lengths.sum()))].tobytes().decode("ascii")
    ends = np.cumsum(lengths)
    starts = ends - lengths
    special = rng.random(rows) < 0.125
    pos = rng.integers(0, 1 << 30, rows)
    pick = rng.integers(0, len(_NON_ASCII), rows)
    out = []
    for i in range(rows):
        s = chars[starts[i]:ends[i]]
        if special[i]:
            k = int(pos[i] % len(s))
            s = s[:k] + _NON_ASCII[pick[i]] + s[k + 1:]
        out.append(s)
    return out


def _write_spec(spec, path, compression):
    tmp = path + ".spec.json"
    with open(tmp, "w") as f:
        json.dump(spec, f)
    try:
        oracle("write-spec", tmp, path, "--compression", compression)
    finally:
        os.remove(tmp)


def ensure_data(quick, log):
    """Generate (once) the ML.NET-written files and the Parquet twins; return their paths."""
    with data_lock():
        return _ensure_data(quick, log)


def _ensure_data(quick, log):
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(DATA, exist_ok=True)
    n_num, n_txt = (100_000, 50_000) if quick else (2_000_000, 1_000_000)
    tag = "quick" if quick else "full"
    p = {k: os.path.join(DATA, f"{k}_{tag}{ext}") for k, ext in (
        ("numeric_deflate", ".idv"), ("numeric_none", ".idv"), ("numeric", ".parquet"),
        ("text_deflate", ".idv"), ("text_none", ".idv"), ("text", ".parquet"))}
    if not os.path.exists(p["numeric_deflate"]) or not os.path.exists(p["numeric"]):
        log(f"generating {n_num} x 11 numeric rows with ML.NET (once) ...")
        cols = numeric_columns(n_num)
        spec = {"rows": n_num, "columns": [
            {"name": n, "type": t, "values": a.astype(float if a.dtype.kind == "f" else int)
             .tolist()} for n, t, a in cols]}
        _write_spec(spec, p["numeric_deflate"], "deflate")
        del spec
        pq.write_table(pa.table({n: a for n, _, a in cols}), p["numeric"], compression="snappy")
    if not os.path.exists(p["text_deflate"]) or not os.path.exists(p["text"]):
        log(f"generating {n_txt} short text rows with ML.NET (once) ...")
        vals = text_values(n_txt)
        _write_spec({"rows": n_txt, "columns": [{"name": "Text", "type": "Text",
                                                  "values": vals}]},
                    p["text_deflate"], "deflate")
        pq.write_table(pa.table({"Text": pa.array(vals, pa.string())}), p["text"],
                       compression="snappy")
    for kind in ("numeric", "text"):
        if not os.path.exists(p[kind + "_none"]):
            log(f"re-saving {kind} without compression with ML.NET (once) ...")
            oracle("resave", p[kind + "_deflate"], p[kind + "_none"], "--compression", "none")
    return p


LONG_ROWS = {True: (100_000,), False: (1_000_000, 10_000_000, 100_000_000)}   # --quick, full


def long_column(rows, log):
    """(.idv, .parquet): one Single column of `rows` rounded values (prices to the cent), in
    idv's default write and pyarrow's default Parquet write, made once."""
    os.makedirs(DATA, exist_ok=True)
    p = os.path.join(DATA, f"long_{rows}.idv")
    q = os.path.join(DATA, f"long_{rows}.parquet")
    with data_lock():
        if not (os.path.exists(p) and os.path.exists(q)):
            _write_long(p, q, rows, log)
    return p, q


def _write_long(p, q, rows, log):
    import pyarrow as pa
    import pyarrow.parquet as pq
    log(f"writing one column of {rows:,} rows (once) ...")
    rng = np.random.default_rng(17)
    values = np.round(rng.lognormal(3, 1, rows), 2).astype(np.float32)
    for path, write in ((p, lambda t: idv.write(t, {"Price": values})),
                        (q, lambda t: pq.write_table(pa.table({"Price": values}), t))):
        write(path + ".tmp")
        os.replace(path + ".tmp", path)


def long_figures(sizes, repeat, threads, log):
    """Per size: one long column read by idv, inflated only (the floor: libdeflate, `threads`
    threads, output thrown away; and inflated into one new array, the output a reader
    returns) and read by pyarrow into numpy, interleaved."""
    out = []
    for rows in sizes:
        p, q = long_column(rows, log)
        if not np.array_equal(idv.read(p)["Price"], pyarrow_read(q)()[0]):
            sys.exit(f"bench_read: {p} differs from {q}")
        log(f"long column, {rows:,} rows: racing idv, the floor and pyarrow ...")
        fns = {"idv": idv_read(p), "floor": baseline_decompress(p, "libdeflate", threads),
               "pyarrow": pyarrow_read(q)}
        if getattr(_DECOMPRESSORS["libdeflate"], "places", False):
            fns["floor_fresh"] = baseline_decompress(p, "libdeflate", threads, fresh=True)
        secs = race(fns, repeat)
        out.append({"rows": rows, "file_bytes": os.path.getsize(p), "seconds": secs,
                    "ns_per_row": 1e9 * secs["idv"] / rows,
                    "vs_floor": secs["floor"] / secs["idv"],
                    "vs_floor_fresh": secs.get("floor_fresh", np.nan) / secs["idv"],
                    "vs_pyarrow": secs["pyarrow"] / secs["idv"]})
    return out


def check_same_values(p):
    """Not timed: idv and pyarrow must see the same values, or the comparison is void."""
    import pyarrow.parquet as pq
    t = pq.read_table(p["numeric"])
    for key in ("numeric_deflate", "numeric_none"):
        got = idv.read(p[key])
        for name in t.column_names:
            if not np.array_equal(got[name], t.column(name).to_numpy()):
                sys.exit(f"bench_read: {key} column {name} differs from the Parquet twin")
    want = pq.read_table(p["text"]).column("Text").to_pylist()
    for key in ("text_deflate", "text_none"):
        if idv.read(p[key])["Text"].tolist() != want:
            sys.exit(f"bench_read: {key} differs from the Parquet twin")


# ------------------------------------------------------------------------------------------
# timing


def options(description, quick_help="small data (smoke run)"):
    """An argument parser with the options every benchmark takes: --quick, --json, --repeat,
    --crc32."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--json", action="store_true", help="print the results as JSON only")
    ap.add_argument("--repeat", type=int, default=None, help="runs per figure (best is kept)")
    crc32_option(ap)
    return ap


def crc32_option(ap):
    """--crc32: the CRC-32 kernel of idv's checks, for figures without the CPU's carry-less
    multiplication (applied by runs_and_log, or use_crc32)."""
    ap.add_argument("--crc32", choices=_compression.crc32_libraries(), default=None,
                    help="the CRC-32 kernel idv's checks use (default: the fastest installed; "
                         "'zlib' has no PCLMULQDQ/VPCLMULQDQ path: the figures a CPU without "
                         "them gets from libdeflate's and ISA-L's)")


def use_crc32(a):
    """The kernel --crc32 names made the one idv's checks use (nothing without it)."""
    if a.crc32 is not None:
        _compression.use_crc32_library(a.crc32)


def runs_and_log(a, full, quick=1):
    """(runs per figure: --repeat, else `quick` or `full`; the progress log: stderr under
    --json, which keeps stdout for the results). Applies --crc32."""
    use_crc32(a)
    log = (lambda *m: print(*m, file=sys.stderr)) if a.json else print
    return a.repeat or (quick if a.quick else full), log


def best(fn, repeat):
    return race({0: fn}, repeat)[0]


def race(fns, repeat, rotate=False):
    """Best time of each function, their runs interleaved (so that a burst of load from
    elsewhere hits all of them alike). `rotate`: as the shared checks time, the order turned
    by one each round and the garbage collector collected before and off during each run."""
    keys = list(fns)
    out = {k: float("inf") for k in keys}
    for r in range(repeat):
        s = r % len(keys) if rotate and keys else 0
        for k in keys[s:] + keys[:s]:
            if rotate:
                gc.collect()
                gc.disable()
            try:
                t0 = time.perf_counter()
                fns[k]()
                out[k] = min(out[k], time.perf_counter() - t0)
            finally:
                if rotate:
                    gc.enable()
    return out


def payload_bytes(path, columns=None):
    with idv.open(path) as f:
        cols = [f[c] for c in (columns or f.column_names)]
        return sum(c.nbytes for c in cols)


def idv_read(path, backend=None, threads=None, columns=None):
    def run():
        with idv.open(path, backend=backend, threads=threads) as f:
            f.read(columns)
    return run


def _libdeflate_ctypes():
    """libdeflate's C API through ctypes (which releases the GIL around each call); the
    `deflate` package's own function holds the GIL, so it cannot use a second core."""
    import ctypes
    import threading
    from deflate import _deflate
    so = ctypes.CDLL(_deflate.__file__)
    alloc = so.libdeflate_alloc_decompressor
    alloc.restype = ctypes.c_void_p
    alloc.argtypes = []
    inflate = so.libdeflate_deflate_decompress
    inflate.restype = ctypes.c_int
    inflate.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                        ctypes.c_size_t, ctypes.c_void_p]
    local = threading.local()

    def fn(addr, disk, raw, dst=None):
        """Inflate into `dst` (an address) or else a buffer this thread reuses."""
        if getattr(local, "dec", None) is None:
            local.dec = alloc()
        if dst is None and getattr(local, "size", -1) < raw:
            local.out = np.empty(max(raw, 1 << 16), np.uint8)
            local.size = len(local.out)
            local.ptr = local.out.ctypes.data
        if inflate(local.dec, addr, disk, local.ptr if dst is None else dst, raw, None) != 0:
            raise RuntimeError("libdeflate failed")
    return fn


def _decompressors():
    """name -> fn(src buffer, address of src, offset, disk, raw): decompress one block."""
    out = {"zlib": lambda buf, addr, o, d, n, dst=None: zlib.decompress(buf[o:o + d], -15, n)}
    if "libdeflate" in compression.installed():
        try:
            c = _libdeflate_ctypes()
            out["libdeflate"] = lambda buf, addr, o, d, n, dst=None: c(addr + o, d, n, dst)
            out["libdeflate"].places = True         # can inflate into a given address
        except (OSError, AttributeError):
            import deflate
            out["libdeflate"] = lambda buf, addr, o, d, n, dst=None: deflate.deflate_decompress(
                buf[o:o + d], n)
    if "isal" in compression.installed():
        from isal import isal_zlib
        out["isal"] = lambda buf, addr, o, d, n, dst=None: isal_zlib.decompress(buf[o:o + d],
                                                                                -15, n)
    return out


_DECOMPRESSORS = _decompressors()


def baseline_decompress(path, library, threads, fresh=False):
    """Read the lookup tables, then decompress every block with `library`, `threads` threads,
    in contiguous chunks of blocks; the output is thrown away (nothing is decoded or copied).
    libdeflate is called through its C API (ctypes); zlib and ISA-L through their Python
    modules, which release the GIL while they inflate. `fresh` (libdeflate only): each
    block inflated into its place in one new array, as a reader's output must be, instead of
    a buffer each thread reuses (which stays in cache)."""
    fn = _DECOMPRESSORS[library]
    if fresh and not getattr(fn, "places", False):
        raise ValueError(f"{library} cannot inflate into a given array here")

    def run():
        with idv.open(path) as f:
            buf = f._source.buffer
            addr = np.frombuffer(buf, np.uint8).ctypes.data
            blocks = np.concatenate([c.lookup for c in f.columns])
            offs, disk, raw = (blocks[k].tolist() for k in ("offset", "disk", "raw"))
            out = np.empty(sum(raw), np.uint8) if fresh else None
            dst = (out.ctypes.data + np.cumsum([0] + raw[:-1])).tolist() if fresh \
                else [None] * len(offs)

            def chunk(span):
                a, b = span
                for i in range(a, b):
                    fn(buf, addr, offs[i], disk[i], raw[i], dst[i])
            n = len(offs)
            parts = max(1, threads * 4)
            bounds = np.linspace(0, n, parts + 1).astype(int)
            spans = list(zip(bounds[:-1], bounds[1:]))
            if threads == 1:
                for s in spans:
                    chunk(s)
            else:
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(chunk, spans))
            del buf
    return run


def memcpy_runs(nbytes, path):
    """numpy copy of nbytes: into a fresh array (what a reader must do), into a warm one, and
    out of a fresh memory map of `path` (what reading a cached file costs at the least)."""
    import mmap
    src = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    dst[:] = 1

    def fresh():
        src.copy()

    def warm():
        np.copyto(dst, src)

    def mapped():
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        a = np.frombuffer(mm, np.uint8, nbytes)
        a.copy()
        del a
        mm.close()
    return fresh, warm, mapped


def pyarrow_read(path):
    import pyarrow.parquet as pq

    def run():
        t = pq.read_table(path)
        return [t.column(i).to_numpy() for i in range(t.num_columns)]
    return run


def pyarrow_text(path):
    import pyarrow.parquet as pq

    def run():
        return pq.read_table(path).column("Text").to_numpy()
    return run


def mlnet_read(path, repeat):
    out = oracle("bench-read", path, "--repeat", max(repeat, 3), "--json")
    return json.loads(out)["best_total_s"]


# ------------------------------------------------------------------------------------------
# one column of a wide file: bytes touched and peak memory


class CountingFile(io.RawIOBase):
    """A file object that counts the bytes read through it."""

    def __init__(self, path):
        self._f = open(path, "rb")
        self.bytes_read = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, pos, whence=0):
        return self._f.seek(pos, whence)

    def tell(self):
        return self._f.tell()

    def read(self, n=-1):
        data = self._f.read(n)
        self.bytes_read += len(data)
        return data

    def close(self):
        self._f.close()
        super().close()


def bytes_touched(path, columns):
    cf = CountingFile(path)
    with idv.open(cf) as f:
        f.read(columns)
    cf.close()
    return cf.bytes_read


def cold_read(path, columns, prefetch=True):
    """Evict `path` from the page cache, read `columns` through a path (memory map) in a fresh
    interpreter, and return how many bytes of the file the kernel then holds in its cache:
    what was actually read from storage. None where this cannot be measured (not Linux)."""
    code = r"""
import ctypes, json, mmap, os, sys
sys.path.insert(0, sys.argv[1])
import idv
from idv import _compression
path, cols, prefetch = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "1"
fd = os.open(path, os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
_compression.set_prefetch(prefetch)
with idv.open(path) as f:
    f.read(cols or None)
size = os.fstat(fd).st_size
mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
libc = ctypes.CDLL(None, use_errno=True)
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
page = mmap.PAGESIZE
vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
import numpy as np
addr = np.frombuffer(mm, np.uint8).ctypes.data
if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
    raise OSError(ctypes.get_errno(), "mincore")
print(sum(v & 1 for v in vec) * page)
"""
    if not sys.platform.startswith("linux"):
        return None
    r = subprocess.run([sys.executable, "-c", code, ROOT, path, json.dumps(columns or []),
                        "1" if prefetch else "0"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return int(r.stdout.split()[-1])


def memprobe(path, columns, threads):
    """In fresh interpreters: the traced (tracemalloc) peak while reading, the output's size
    and the largest block; then, untraced, how much resident memory the read added."""
    code = r"""
import json, sys, tracemalloc
sys.path.insert(0, sys.argv[1])
import idv
def status():
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) * 1024
    return out
path, cols, threads = sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
traced = sys.argv[5] == "1"     # tracemalloc's own bookkeeping would inflate the RSS figures
f = idv.open(path, threads=threads)
cols = cols or f.column_names
for c in cols:
    f[c].lookup
f[cols[0]][:1]          # start the thread pool and load the libraries before measuring
s0 = status()
if traced:
    tracemalloc.start()
out = f.read(cols)
peak = tracemalloc.get_traced_memory()[1] if traced else None
s1 = status()
def size(a):                # the array, plus its str objects for text
    n = a.nbytes
    if a.dtype == object:
        n += sum(sys.getsizeof(x) for x in a)
    return n
print(json.dumps({"peak": peak, "output": sum(size(a) for a in out.values()),
                  "max_block": max(int(f[c].lookup["raw"].max()) for c in cols),
                  "anon_growth": s1["RssAnon"] - s0["RssAnon"],
                  "file_growth": s1["RssFile"] - s0["RssFile"]}))
"""
    res = {}
    for traced in ("1", "0"):
        r = subprocess.run([sys.executable, "-c", code, ROOT, path, json.dumps(columns or []),
                            str(threads), traced], capture_output=True, text=True, check=True)
        got = json.loads(r.stdout)
        if traced == "1":
            res.update(peak=got["peak"], output=got["output"], max_block=got["max_block"])
        else:
            res.update(anon_growth=got["anon_growth"], file_growth=got["file_growth"])
    return res


# ------------------------------------------------------------------------------------------


def machine():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import pyarrow
    libs = {"numpy": np.__version__, "pyarrow": pyarrow.__version__,
            "zlib": zlib.ZLIB_RUNTIME_VERSION}
    try:
        import deflate
        libs["deflate (libdeflate)"] = deflate.__version__
    except ImportError:
        pass
    try:
        import isal
        libs["isal"] = isal.__version__
    except ImportError:
        pass
    return {"cpu": cpu, "cpu_flags": cpu_flags(),
            "cores": idv._resources.threads.default_threads(),
            "python": platform.python_version(), "os": platform.platform(), "libraries": libs,
            "crc32": _compression.CRC32_LIBRARY, "idv": idv.__version__}


# the CPU features the DEFLATE and CRC-32 libraries choose their kernels by
FLAGS = ("sse4_2", "pclmulqdq", "avx2", "bmi2", "vpclmulqdq", "avx512f", "avx512vl", "sha_ni")


def cpu_flags():
    """Which of FLAGS the CPU reports (Linux's /proc/cpuinfo; [] elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [x for x in FLAGS if x in have]
    except OSError:
        pass
    return []


def main(argv=None):
    ap = options(__doc__.split("\n")[0])
    ap.add_argument("--no-mlnet", action="store_true", help="skip ML.NET's own read")
    ap.add_argument("--only", choices=("long",), default=None,
                    help="long: only the long column at each size (--long-rows)")
    ap.add_argument("--long-rows", default=None,
                    help="sizes of the long column, e.g. 1e6,1e7 (default: 1M, 10M and 100M "
                         "rows; 100k with --quick)")
    a = ap.parse_args(argv)
    repeat, log = runs_and_log(a, 7, quick=3)
    sizes = LONG_ROWS[a.quick] if a.long_rows is None else \
        tuple(int(float(x)) for x in a.long_rows.split(","))
    if a.only == "long":
        return show_long(long_figures(sizes, repeat, idv._resources.threads.default_threads(), log),
                         a.json, repeat)
    p = ensure_data(a.quick, log)
    check_same_values(p)
    threads = idv._resources.threads.default_threads()
    backends = compression.installed()
    R = {"machine": machine(), "quick": a.quick, "repeat": repeat, "threads": threads,
         "default_backend": compression.default_backend(), "files": {}, "figures": {},
         "targets": [], "loadavg_start": os.getloadavg()}
    for k, v in p.items():
        R["files"][k] = {"path": os.path.relpath(v, ROOT), "bytes": os.path.getsize(v)}
    rows = []     # (label, MB/s)

    def fig(key, label, seconds, nbytes):
        R["figures"][key] = {"label": label, "seconds": seconds, "mbps": nbytes / seconds / MB}
        rows.append((label, nbytes / seconds / MB))
        return nbytes / seconds / MB

    def target(name, value, goal, what):
        R["targets"].append({"target": name, "ratio": value, "goal": goal, "met": value >= goal,
                             "vs": what})

    # --- numeric, DEFLATE
    path = p["numeric_deflate"]
    nb = payload_bytes(path)
    R["files"]["numeric_deflate"]["payload"] = nb
    log(f"numeric DEFLATE: {os.path.getsize(path) / MB:.1f} MB on disk, {nb / MB:.1f} MB payload")
    for lib in backends:
        fns = {}
        for t in sorted({1, threads}):
            fns[f"decompress_{lib}_{t}t"] = baseline_decompress(path, lib, t)
            fns[f"idv_numeric_deflate_{lib}_{t}t"] = idv_read(path, lib, t)
        for k, sec in race(fns, repeat).items():
            t = k.rsplit("_", 1)[1][:-1]
            what = "decompress only" if k.startswith("decompress") else "idv read"
            fig(k, f"numeric deflate: {what}, {lib}, {t} thr", sec, nb)
        target(f"numeric deflate, {lib}: idv / decompress-only ({threads} threads)",
               R["figures"][f"idv_numeric_deflate_{lib}_{threads}t"]["mbps"]
               / R["figures"][f"decompress_{lib}_{threads}t"]["mbps"], 0.8,
               f"decompress_{lib}_{threads}t")
    if not a.no_mlnet:
        fig("mlnet_numeric_deflate", "numeric deflate: ML.NET read (bench-read)",
            mlnet_read(path, repeat), nb)
        d = compression.default_backend()
        target(f"numeric deflate: idv ({d}) / ML.NET",
               R["figures"][f"idv_numeric_deflate_{d}_{threads}t"]["mbps"]
               / R["figures"]["mlnet_numeric_deflate"]["mbps"], 3.0, "mlnet_numeric_deflate")
    fig("pyarrow_numeric", "numeric: pyarrow snappy Parquet -> numpy",
        best(pyarrow_read(p["numeric"]), repeat), nb)

    # --- numeric, no compression
    path = p["numeric_none"]
    fresh, warm, mapped = memcpy_runs(nb, path)
    secs = race({"memcpy_fresh": fresh, "memcpy_warm": warm, "memcpy_mapped": mapped,
                 "idv_numeric_none": idv_read(path),
                 "idv_numeric_none_1t": idv_read(path, threads=1)}, repeat)
    del fresh, warm, mapped
    fig("memcpy_fresh", "memcpy (numpy copy, new array)", secs["memcpy_fresh"], nb)
    fig("memcpy_warm", "memcpy (np.copyto, warm array)", secs["memcpy_warm"], nb)
    fig("memcpy_mapped", "memcpy out of a new mmap of the file", secs["memcpy_mapped"], nb)
    fig("idv_numeric_none", "numeric none: idv read", secs["idv_numeric_none"], nb)
    fig("idv_numeric_none_1t", "numeric none: idv read, 1 thr", secs["idv_numeric_none_1t"], nb)
    if not a.no_mlnet:
        fig("mlnet_numeric_none", "numeric none: ML.NET read", mlnet_read(path, repeat), nb)
    target("numeric none: idv / memcpy (numpy copy)",
           R["figures"]["idv_numeric_none"]["mbps"] / R["figures"]["memcpy_fresh"]["mbps"], 0.5,
           "memcpy_fresh")
    for k in ("memcpy_warm", "memcpy_mapped"):
        R["figures"]["idv_numeric_none"]["vs_" + k] = (
            R["figures"]["idv_numeric_none"]["mbps"] / R["figures"][k]["mbps"])

    # --- text
    for key in ("text_deflate", "text_none"):
        path = p[key]
        tb = payload_bytes(path)
        R["files"][key]["payload"] = tb
        comp = key.split("_")[1]
        secs = race({"pa": pyarrow_text(p["text"]), "idv": idv_read(path),
                     "idv1": idv_read(path, threads=1)}, repeat)
        pa_fig = fig(f"pyarrow_text_{comp}", f"text ({comp} file): pyarrow Parquet -> numpy",
                     secs["pa"], tb)
        idv_fig = fig(f"idv_{key}", f"text {comp}: idv read", secs["idv"], tb)
        fig(f"idv_{key}_1t", f"text {comp}: idv read, 1 thr", secs["idv1"], tb)
        if not a.no_mlnet:
            fig(f"mlnet_{key}", f"text {comp}: ML.NET read", mlnet_read(path, repeat), tb)
        target(f"text {comp}: idv / pyarrow", idv_fig / pa_fig, 1.0, f"pyarrow_text_{comp}")

    # --- one column of the wide file
    path = p["numeric_deflate"]
    with idv.open(path) as f:
        one = "Price"
        col_disk = f[one].nbytes_disk
        all_disk = sum(c.nbytes_disk for c in f.columns)
    touched_one = bytes_touched(path, [one])
    touched_all = bytes_touched(path, None)
    t_one = best(idv_read(path, columns=[one]), repeat)
    t_all = best(idv_read(path), repeat)
    m_one = memprobe(path, [one], threads)
    m_all = memprobe(path, None, threads)
    m_txt = memprobe(p["text_deflate"], None, threads)
    R["one_column"] = {
        "column": one, "file_bytes": os.path.getsize(path), "column_disk_bytes": col_disk,
        "all_columns_disk_bytes": all_disk, "bytes_read_one": touched_one,
        "bytes_read_all": touched_all, "seconds_one": t_one, "seconds_all": t_all,
        "mem_one": m_one, "mem_all": m_all, "mem_text": m_txt,
        "cold_cache_one": cold_read(path, [one]),
        "cold_cache_one_without_prefetch": cold_read(path, [one], prefetch=False),
        "cold_cache_all": cold_read(path, None),
    }
    for m in (m_one, m_all, m_txt):
        m["overhead"] = m["peak"] - m["output"]
        m["overhead_blocks_per_thread"] = m["overhead"] / m["max_block"] / threads

    R["long"] = long_figures(sizes, repeat, threads, log)
    for r in R["long"]:
        target(f"long column, {r['rows']:,} rows: idv / decompress-only ({threads} threads)",
               r["vs_floor"], 0.9, "long floor")
    R["loadavg_end"] = os.getloadavg()
    if a.json:
        print(json.dumps(R, indent=1))
        return 0
    print()
    busy = max(R["loadavg_start"][0], R["loadavg_end"][0])
    if busy > 0.5:
        print(f"note: load average {R['loadavg_start'][0]:.1f} at the start, "
              f"{R['loadavg_end'][0]:.1f} at the end (other processes): figures are noisy")
    print(f"{R['machine']['cpu']}, {threads} cores, Python {R['machine']['python']}; "
          f"best of {repeat}; MB = 10^6 bytes of uncompressed payload")
    w = max(len(r[0]) for r in rows)
    for label, mbps in rows:
        print(f"  {label:<{w}}  {mbps:9.0f} MB/s")
    o = R["one_column"]
    print(f"\none column ({one!r}) of {len(numeric_columns(1))}: read {o['bytes_read_one']:,} "
          f"bytes through a file object (its blocks: {o['column_disk_bytes']:,}; all columns: "
          f"{o['bytes_read_all']:,}); {o['seconds_one'] * 1e3:.1f} ms vs "
          f"{o['seconds_all'] * 1e3:.1f} ms for all")
    if o["cold_cache_one"] is not None:
        print(f"  through a path (memory map), file evicted from the page cache first: reading "
              f"{one!r} left {o['cold_cache_one']:,} bytes of the file cached (all columns: "
              f"{o['cold_cache_all']:,}; {one!r} without idv's per-block WILLNEED advice: "
              f"{o['cold_cache_one_without_prefetch']:,}, the kernel reads around each fault)")
    for name, m in (("one column", m_one), ("all columns", m_all),
                    ("text file (output includes the str objects)", m_txt)):
        print(f"  peak traced memory, {name}: {m['peak'] / MB:.2f} MB = output "
              f"{m['output'] / MB:.2f} MB + {m['overhead'] / MB:.2f} MB "
              f"({m['overhead_blocks_per_thread']:.1f} blocks of {m['max_block']:,} B per thread);"
              f" resident: +{m['anon_growth'] / MB:.1f} MB anonymous, +{m['file_growth'] / MB:.1f}"
              f" MB of (already cached) file pages mapped")
    f_none = R["figures"]["idv_numeric_none"]
    vs_fresh = f_none["mbps"] / R["figures"]["memcpy_fresh"]["mbps"]
    print(f"\nnumeric none, idv vs memcpy: {vs_fresh:.2f}x"
          f" of a numpy copy to a new array, {f_none['vs_memcpy_warm']:.2f}x of one to a warm "
          f"array, {f_none['vs_memcpy_mapped']:.2f}x of a copy out of a new mmap of the file")
    show_long(R["long"], False, repeat)
    print("\ntargets" + (" (--quick: small files, per-call overheads dominate; the targets are "
                          "for the full-size data)" if a.quick else "") + ":")
    for t in R["targets"]:
        print(f"  {'ok  ' if t['met'] else 'MISS'} {t['target']}: {t['ratio']:.2f}x "
              f"(goal >= {t['goal']}x)")
    return 0


def show_long(results, as_json, repeat):
    if as_json:
        print(json.dumps({"long": results, "repeat": repeat, "loadavg": os.getloadavg()},
                         indent=1))
        return 0
    print(f"\none long Single column (best of {repeat}; ratio = the other's time / idv's; "
          f"load average {os.getloadavg()[0]:.1f}):")
    for r in results:
        s = r["seconds"]
        print(f"  {r['rows']:>12,} rows: idv {s['idv'] * 1e3:8.1f} ms ({r['ns_per_row']:.2f} "
              f"ns a row), floor {s['floor'] * 1e3:8.1f} ms ({r['vs_floor']:.2f}x, goal >= "
              f"0.9x), pyarrow {s['pyarrow'] * 1e3:8.1f} ms ({r['vs_pyarrow']:.2f}x)")
        if "floor_fresh" in s:
            print(f"  {'':>12}       the floor into one new array {s['floor_fresh'] * 1e3:8.1f} ms "
                  f"({r['vs_floor_fresh']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
