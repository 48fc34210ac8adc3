"""Every read path against the memory limit: each gives its result when it fits, or
idv.MemoryLimitError naming the file, never numpy's MemoryError, an engine's own error or a
process killed by a signal.

Two files, built here (no binary is committed): ``big``, 4M rows of numbers, text and a
Vector<Single, 64> (1.4 GB decoded, 10 MB stored, in blocks of 64K rows), and ``bomb``, a
valid 1 MB file of one Boolean block of 2^31-1 rows (2 GB decoded into numpy, a byte a row;
268 MB in Arrow, a bit a row). Three limits: a small ``memory_limit=`` (the big file), the
default (the bomb: refused as bytes, read as bits), and the default under a 2 GiB address-space limit (RLIMIT_AS) in a child process,
one per engine (each reserves its own address space: pyarrow's allocator a gigabyte at its
first allocation, dask's imports 1.5 GB), where what the file's limit allowed at open may
no longer be there.
"""
from __future__ import annotations

import os
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

import craft
import idv
from craft import Col, Model, build, leb, vbuf_params, vbuf_payload
from limited import run_limited

ROWS_PER_BLOCK, BLOCKS, SLOTS = 1 << 16, 64, 64
SMALL = 64_000_000
AS_LIMIT = 2 << 30
# polars' own thread pool and allocator take about 1.8 GB of address space before it reads
# anything, and with less than about a gigabyte besides it now and then ends the process or
# prints from its own threads, whatever it reads (seen without pandas loaded: docs/errors.md)
ENGINE_AS_LIMITS = {"polars": 3 << 30}
MANY = "np.broadcast_to(np.int64(3), (100_000_000,))"     # 100M repeated rows, no memory

# name -> (code giving the value read; `path`, `L` (open keywords), `idv`, `np`, the first
# column's name FIRST and a value ZERO every row of it holds in scope,
# the modules it needs, the rows it gives when the big file's read fits SMALL (None: it does
# not), whether a refusal names a column)
PATHS = {
    "read": ("idv.read(path, **L)", (), None, True),
    "read_rows": ("idv.read(path, rows=slice(0, 1000), **L)", (), 1000, True),
    "read_filter": ("idv.read(path, filter=[(FIRST, '==', ZERO)], **L)", (), None, False),
    "take": ("idv.open(path, **L).take([0, 5, 999])", (), 3, True),
    "take_repeated": (f"idv.open(path, **L).take({MANY})", (), None, False),
    "slice": ("idv.open(path, **L)[0][:1000]", (), 1000, True),
    "slice_whole": ("[c[:] for c in idv.open(path, **L).columns]", (), None, True),
    "to_arrow": ("idv.open(path, **L).to_arrow()", ("pyarrow",), None, True),
    "batches": ("next(idv.open(path, **L).iter_batches())", ("pyarrow",),
                ROWS_PER_BLOCK, True),
    "to_pandas": ("idv.to_pandas(idv.open(path, **L))", ("pandas", "pyarrow"), None, True),
    "dataset_read": ("idv.dataset(path, **L).read()", (), None, False),
    "dataset_rows": ("idv.dataset(path, **L).read(rows=slice(0, 1000))", (), 1000, True),
    "dataset_take": (f"idv.dataset(path, **L).take({MANY})", (), None, False),
    "dataset_to_arrow": ("idv.dataset(path, **L).to_arrow()", ("pyarrow",), None, False),
    "dataset_to_pandas": ("idv.dataset(path, **L).to_pandas()", ("pandas", "pyarrow"),
                          None, False),
    "arrow_dataset": ("idv.arrow_dataset(path, **L).to_table()", ("pyarrow",), None, False),
    "duckdb": ("duckdb.sql(f'select count(*), sum({FIRST}::int) from ds').fetchall() "
               "if (ds := idv.arrow_dataset(path, **L)) else None", ("duckdb", "pyarrow"),
               BLOCKS * ROWS_PER_BLOCK, False),
    # partitions are cut to fit the limit, each one's read within it (every partition read,
    # its rows counted: the frame itself is Dask's collection of them, not a read of idv's;
    # len alone reads none, the partitions' rows being known)
    "dask": ("[(int(idv.dask.read_idv(str(path), **L).map_partitions(len).compute().sum()), 0)]",
             ("dask.dataframe", "pyarrow"), BLOCKS * ROWS_PER_BLOCK, False),
    "polars": ("idv.polars.scan_idv(str(path), **L).collect()", ("polars", "pyarrow"),
               None, False),
    "polars_head": ("idv.polars.scan_idv(str(path), **L).head(10).collect()",
                    ("polars", "pyarrow"), 10, False),
    "polars_filter": ("idv.polars.scan_idv(str(path), **L).select(FIRST)"
                      ".filter(polars.col(FIRST) != ZERO).collect()", ("polars", "pyarrow"),
                      0, False),
}
# the paths that read the bomb into Arrow (its bits, within the default limit): the rows each
# gives
BOMB_ROWS = 2**31 - 1
AS_BITS = {"to_arrow": BOMB_ROWS, "batches": BOMB_ROWS, "dataset_to_arrow": BOMB_ROWS,
           "arrow_dataset": BOMB_ROWS, "duckdb": BOMB_ROWS, "polars": BOMB_ROWS,
           "polars_head": 10, "polars_filter": 0}
ENGINES = {"duckdb": ["duckdb"], "dask": ["dask"],
           "polars": ["polars", "polars_head", "polars_filter"]}
ENGINES["core"] = [p for p in PATHS if not any(p in v for v in ENGINES.values())]


def outcome(path, name, limit=None):
    """(outcome, message) of path `name` reading `path`: "ok", "refused" (MemoryLimitError,
    or an engine's error carrying its message: DuckDB wraps what a stream raises) or the
    name of whatever else was raised."""
    code = PATHS[name][0]
    scope = {"idv": idv, "np": np, "path": Path(path),
             "L": {} if limit is None else {"memory_limit": limit},
             "FIRST": "B" if Path(path).name == "bomb.idv" else "n"}
    scope["ZERO"] = False if scope["FIRST"] == "B" else 0       # every row matches
    for module in PATHS[name][1]:
        top = __import__(module)
        scope[module.split(".")[0]] = top
    if name.startswith(("dask", "polars")):
        __import__(f"idv.{name.split('_')[0]}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", _rows(eval(code, scope))
    except MemoryError as e:
        return ("refused" if isinstance(e, idv.MemoryLimitError) else type(e).__name__), str(e)
    except Exception as e:        # an engine's own error around idv's
        return ("refused" if "over idv's memory limit" in str(e) else type(e).__name__), str(e)


def _rows(value):
    """The rows of what a path read: a dict of columns, an array, a table or frame, or
    [(count, ...)] (DuckDB's count and sum, Dask's count)."""
    if isinstance(value, dict):
        value = next(iter(value.values()))
    if isinstance(value, list):
        return value[0][0]
    return getattr(value, "num_rows", None) or len(value)


def _deflate(payload):
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    return c.compress(payload) + c.flush()


def repeated_blocks(model):
    """build(model), each distinct block payload deflated once (its blocks repeat one)."""
    seen = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(craft, "compress", lambda _kind, p: seen.setdefault(id(p), _deflate(p)))
        return build(model)[0]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    rpb = ROWS_PER_BLOCK
    text = (np.array([rpb], "<i4").tobytes() + (np.arange(1, rpb + 1, dtype="<i4") * 2).tobytes()
            + leb(2 * rpb) + b"ab" * rpb)
    vector = vbuf_payload(rpb, SLOTS, [-1] * rpb, [], bytes(4 * SLOTS * rpb))
    cols = [Col(name, codec, params, comp=1, rpb=rpb, blocks=[payload] * BLOCKS)
            for name, codec, params, payload in (
                ("n", "Double", b"", bytes(8 * rpb)), ("t", "TextSpan", b"", text),
                ("v", "VBuffer", vbuf_params("Single", (SLOTS,)), vector))]
    path = tmp_path_factory.mktemp("matrix") / "big.idv"
    path.write_bytes(repeated_blocks(Model(BLOCKS * rpb, cols)))
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    n = BOMB_ROWS
    path = tmp_path_factory.mktemp("matrix") / "bomb.idv"
    path.write_bytes(repeated_blocks(Model(n, [Col("B", "Boolean", comp=1, rpb=n,
                                                   blocks=[bytes((n + 7) // 8)])])))
    return path


def _needs(name):
    for module in PATHS[name][1]:
        pytest.importorskip(module, reason="an optional dependency")


def _check(path, name, got, fits):
    kind, message = got
    if fits:
        assert got == ("ok", PATHS[name][2]), (name, got)
        return
    assert kind == "refused", (name, got)
    assert path.name in message, (name, message)
    if PATHS[name][3]:
        assert "column" in message, (name, message)


def test_the_files(big, bomb):
    with idv.open(big) as f:
        assert f.num_rows == BLOCKS * ROWS_PER_BLOCK and f.column_names == ["n", "t", "v"]
        assert f["t"][-2:].tolist() == ["ab", "ab"] and f["v"][5].shape == (SLOTS,)
        assert sum(c.decoded_bytes(slice(0, f.num_rows)) for c in f.columns) > 1 << 30
    assert big.stat().st_size < 16 << 20 and bomb.stat().st_size < 2 << 20


@pytest.mark.parametrize("name", ENGINES["core"])
def test_a_small_limit(big, name):
    """memory_limit=64 MB over a 1.4 GB file: what fits is read, the rest refused."""
    _needs(name)
    _check(big, name, outcome(big, name, SMALL), PATHS[name][2] is not None)


@pytest.mark.parametrize("name", [n for n in PATHS if n not in ENGINES["core"]])
def test_a_small_limit_through_an_engine(big, name):
    test_a_small_limit(big, name)


@pytest.mark.parametrize("name", PATHS)
def test_the_default_limit_of_a_bomb(bomb, name):
    """The default limit refuses the bomb's block on every path that would make a byte of
    each of its rows (2 GB), and lets through those that keep Arrow's bit a row (268 MB)."""
    _needs(name)
    got = outcome(bomb, name)
    if name in AS_BITS:
        assert got == ("ok", AS_BITS[name]), (name, got)
    else:
        _check(bomb, name, got, False)


@pytest.mark.parametrize("engine", ENGINES)
def test_under_an_address_space_limit(big, bomb, engine):
    """In a child limited to 2 GiB of address space (polars 3), each engine's paths over both
    files: a result or the refusal, never a MemoryError, a signal or a message on stderr (an
    abort's or a Rust panic's)."""
    names = [n for n in ENGINES[engine] if all(_importable(m) for m in PATHS[n][1])]
    if not names:
        pytest.skip(f"{engine} is not installed")
    tests = str(Path(__file__).parent)
    got = run_limited(f"""
        import os, sys, tempfile
        sys.path.insert(0, {tests!r})
        from test_memory_matrix import outcome
        err = tempfile.TemporaryFile()
        os.dup2(err.fileno(), 2)
        for name in {names!r}:
            for file in path.split(os.pathsep):
                result[name + " " + os.path.basename(file)] = outcome(file, name)
        err.seek(0)
        result["stderr"] = err.read().decode(errors="replace")[-3000:]
    """, os.pathsep.join(map(str, (big, bomb))), memory=ENGINE_AS_LIMITS.get(engine, AS_LIMIT),
        stack=8 << 20, timeout=120)
    assert got["outcome"] == "ok", got
    assert got["stderr"] == "", got["stderr"]
    for name in names:
        for path in (big, bomb):
            kind, message = got[f"{name} {path.name}"]
            # what fits a 64 MB limit may not fit the room an engine leaves
            if kind == "ok" and path == big and PATHS[name][2] is not None:
                assert message == PATHS[name][2], (name, message)
                continue
            if kind == "ok" and path == bomb and name in AS_BITS:
                assert message == AS_BITS[name], (name, message)
                continue
            # DuckDB's own allocator may run out of that room before idv is asked: its own
            # error, raised cleanly in the same process (stderr stays empty, checked above)
            if engine == "duckdb" and kind == "OutOfMemoryException":
                continue
            _check(path, name, (kind, message), False)


def _importable(module):
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_a_take_of_repeated_rows_allocates_nothing_first(big):
    """100M repeated row numbers (a broadcast view, 8 bytes): refused from their count, in
    milliseconds, before any array of them (800 MB each) is made."""
    with idv.open(big, memory_limit=SMALL) as f:
        many = np.broadcast_to(np.int64(3), (100_000_000,))
        with pytest.raises(idv.MemoryLimitError, match="taking 100000000 rows of 3 columns"):
            f.take(many)
        assert f["n"].blocks_decoded == 0
    ds = idv.dataset(big, memory_limit=SMALL)
    with pytest.raises(idv.MemoryLimitError, match="taking 100000000 rows .* of the dataset"):
        ds.take(many)


def test_a_memory_error_within_the_limit_names_the_read(big, monkeypatch):
    """An allocation the limit allowed that the system refuses all the same (other
    allocations took the room) is a MemoryLimitError naming the file, on every path through
    idv._resources.budget.reads."""
    from idv._scan import scan
    from idv._reader import take

    def refused(*args, **kwargs):
        raise MemoryError("Unable to allocate 16.0 MiB")
        yield
    monkeypatch.setattr(take, "scan", refused)
    monkeypatch.setattr(scan, "scan", refused)
    with idv.open(big) as f:
        for read in (lambda: f.take([1, 2], ["t"]),
                     lambda: next(f.iter_batches(["n"]))):
            with pytest.raises(idv.MemoryLimitError, match=r"big\.idv: the system refused") as e:
                read()
            assert "Unable to allocate 16.0 MiB" in str(e.value)
            assert isinstance(e.value.__cause__, MemoryError)
