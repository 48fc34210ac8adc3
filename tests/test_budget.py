"""The memory budget of reads: a read that would allocate more than the limit
is refused with idv.MemoryLimitError before anything is allocated; the limit names itself and
how to raise it, per file (idv.open(memory_limit=)) and globally (idv.set_memory_limit).

The crafted files are built here with tests/craft.py; no binary is committed.
"""
from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

import idv
from craft import Col, Model, build, vbuf_params, vbuf_payload

N_HUGE = 2**31 - 1        # rows of one Boolean block: 268 MB of zero bits, 260 KB deflated


@pytest.fixture(scope="module")
def huge_bool(tmp_path_factory):
    """The issue's file: a Boolean column of 2^31-1 rows in one block, a few hundred KB."""
    payload = bytes((N_HUGE + 7) // 8)
    col = Col("B", "Boolean", comp=1, rpb=N_HUGE, blocks=[payload])
    data, _ = build(Model(N_HUGE, [col]))
    path = tmp_path_factory.mktemp("budget") / "huge_bool.idv"
    path.write_bytes(data)
    return path


def test_a_one_row_read_of_a_huge_block_is_refused_by_default(huge_bool):
    assert huge_bool.stat().st_size < 1 << 20
    with idv.open(huge_bool) as f:
        assert f.memory_limit == 1 << 30                  # 1 GiB: more than 1,024 x the file
        col = f["B"]
        with pytest.raises(idv.MemoryLimitError) as e:
            col[0]
        assert col.blocks_decoded == 0
    msg = str(e.value)
    assert "huge_bool.idv: reading column 0 'B' rows 0-2147483646 needs 2.4 GB" in msg
    assert "memory limit of 1.1 GB" in msg and "memory_limit=N" in msg
    assert isinstance(e.value, MemoryError)


def refused_in_a_child(call, path, room):
    """What `call` (code of idv with the file in sys.argv[1]) refuses in a child whose address
    space is capped at `room` bytes over what it starts with: the MemoryLimitError's message,
    or None."""
    code = (
        "import resource, sys, idv\n"
        "base = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        f"resource.setrlimit(resource.RLIMIT_AS, (base + {room},) * 2)\n"
        "try:\n"
        f"    {call}\n"
        "except idv.MemoryLimitError as e:\n"
        "    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout[len("refused: "):] if r.stdout.startswith("refused: ") else None


def test_the_refusal_allocates_nothing(huge_bool):
    """In a child whose address space is capped at 512 MB over what it starts with: the error,
    not a MemoryError or a kill."""
    assert refused_in_a_child("idv.read(sys.argv[1])", huge_bool, 512 << 20) is not None


def test_limits_per_file_and_global(tmp_path):
    path = tmp_path / "b.idv"
    idv.write(path, {"x": np.arange(100_000, dtype=np.float64),
                     "v": np.ones((100_000, 8), np.float32)})
    with idv.open(path, memory_limit=100_000) as f:            # 100 KB
        with pytest.raises(idv.MemoryLimitError, match=r"column 0 'x' rows 0-99999 needs 800\.0 KB"):
            f["x"].read()
        assert f["x"][:1000].tolist() == list(range(1000))       # fewer rows fit
        with pytest.raises(idv.MemoryLimitError, match="column 1 'v'"):
            f["v"].read()
    try:
        idv.set_memory_limit(500_000)
        with idv.open(path) as f:
            assert f.memory_limit == 500_000
            with pytest.raises(idv.MemoryLimitError):
                f.read()
        with idv.open(path, memory_limit=10 << 20) as f:          # the call wins
            assert f.read()["x"].sum() == sum(range(100_000))
    finally:
        idv.set_memory_limit(None)
    with idv.open(path) as f:
        assert f.memory_limit >= 1 << 30
    for bad, error in ((0, ValueError), (-5, ValueError), (1.5, TypeError), (True, TypeError),
                       ("1 gigabyte", ValueError)):
        with pytest.raises(error, match="memory limit"):
            idv.open(path, memory_limit=bad)


def test_a_sparse_vector_of_2_31_items_is_refused_dense_and_read_sparse():
    """One row holding a sparse Vector<Boolean, 2^31-1> with 2 stored items: densified it
    would be 2 GB of implicit zeros from 21 bytes, refused as over the default memory limit
    (the type fixes that size); as CSR it is 2 items, and read(sparse=True) allocates for
    those (it asked for 16 GiB)."""
    pytest.importorskip("scipy")
    size = N_HUGE
    values = bytes([0b11])                                    # two true bits
    payload = vbuf_payload(1, size, [2], [5, 2**31 - 2], values)
    col = Col("V", "VBuffer", vbuf_params("Boolean", (size,)), comp=1, rpb=1, blocks=[payload])
    data, _ = build(Model(1, [col]))
    with idv.open(data) as f:
        with pytest.raises(idv.MemoryLimitError, match="needs 2.1 GB"):
            f["V"].read()
    code = (
        "import resource, sys, idv\n"
        "base = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
        "import scipy.sparse\n"
        "resource.setrlimit(resource.RLIMIT_AS, (base + (512 << 20),) * 2)\n"
        "m = idv.open(sys.stdin.buffer.read())['V'].read(sparse=True)\n"
        "print(m.shape[1], m.nnz, *m.indices.tolist())\n")
    r = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                       timeout=120)
    assert r.stdout.decode().split() == [str(size), "2", "5", str(2**31 - 2)], r.stderr[-2000:]


def test_cli_names_the_limit(huge_bool):
    from cli_run import assert_one_line_error, run
    rc, out, err = run("head", huge_bool, "-n", "1")
    assert rc == 1
    assert_one_line_error(err, "needs 2.4 GB", "memory limit")


def test_each_refusal_gives_its_remedy_in_python_and_on_the_command_line(huge_bool):
    """Over the limit: raise it; refused by the system within it: lower it (so that reads are
    refused before they allocate). The command line names --memory-limit instead of calls."""
    from idv._resources import budget
    from idv.cli.errors import memory_refused

    @budget.reads
    def read(path):
        raise MemoryError()

    with pytest.raises(idv.MemoryLimitError) as over:
        with idv.open(huge_bool) as f:
            f["B"][0]
    with pytest.raises(idv.MemoryLimitError) as within:
        read("x.idv")
    assert (over.value.lower, within.value.lower) == (False, True)
    assert "raise the limit: idv.open(path, memory_limit=N)" in str(over.value)
    assert "lower the limit so that reads are refused" in str(within.value)
    for e, change in ((over.value, "raise the limit"), (within.value, "lower the limit")):
        said = memory_refused(e)
        assert said.startswith(e.refusal) and f"; {change}" in said
        assert "idv --memory-limit BYTES" in said and "set_memory_limit" not in said


def test_the_system_limits_are_read_once_a_second(monkeypatch):
    """Opening a thousand small files reads /proc and the cgroup files about once a second,
    not at every open; a new RLIMIT_AS, or the time passing, reads them anew."""
    from idv._resources import budget
    reads = []
    monkeypatch.setattr(budget, "available_memory", lambda: reads.append(1) or 1 << 30)
    monkeypatch.setattr(budget, "REFRESH_SECONDS", 3600.0)
    monkeypatch.setattr(budget, "_system", (None, None, None))
    for _ in range(50):
        limit = budget.default_limit(1000)
    assert len(reads) == 1
    assert limit <= 1 << 29 and "memory available" in limit.source
    monkeypatch.setattr(budget, "REFRESH_SECONDS", 0.0)
    monkeypatch.setattr(budget, "available_memory", lambda: reads.append(1) or 1 << 24)
    limit = budget.default_limit(1000)
    assert len(reads) == 2 and limit == 1 << 23


def _zeros_file(tmp_path, rows):
    """`rows` zeros (float64) in blocks of 2**20 rows: megabytes on disk, 8 bytes a row read."""
    path = tmp_path / "zeros.idv"
    idv.write(path, {"x": np.zeros(rows)}, rows_per_block=1 << 20)
    return path


def test_a_filtered_read_is_charged_as_its_rows_are_found(tmp_path):
    path = _zeros_file(tmp_path, 8_000_000)                  # 64 MB read, all matching
    with idv.open(path, memory_limit=32 << 20) as f:
        with pytest.raises(idv.MemoryLimitError, match="rows matching the filter"):
            f.read(filter="x == 0")
        with pytest.raises(idv.MemoryLimitError, match="rows matching the filter"):
            idv.read_pandas(f, filter="x == 0")
        assert len(f.read(filter="x == 1")["x"]) == 0        # none held: within any limit
    assert len(idv.read(path, filter="x == 0", memory_limit=1 << 30)["x"]) == 8_000_000


def test_a_take_is_charged_before_it_allocates_repeats_included(tmp_path):
    path = _zeros_file(tmp_path, 1000)
    with idv.open(path, memory_limit=64 << 20) as f:
        repeated = np.zeros(10_000_000, np.int64)            # 80 MB of rows, one block
        with pytest.raises(idv.MemoryLimitError, match="taking 10000000 rows"):
            f.take(repeated)
        assert f["x"].blocks_decoded == 0                    # refused before any decode
        assert len(f.take(repeated[:1000])["x"]) == 1000


def test_no_address_space_left_to_map_a_file_is_a_memory_limit_error(tmp_path):
    """Opening a file idv maps when the process has no address space left for the map
    (RLIMIT_AS nearly used up: an engine's reservations took it) is a MemoryLimitError naming
    the file, not mmap's OSError."""
    path = tmp_path / "big.idv"
    idv.write(str(path), {"x": np.random.default_rng(0).random(4_000_000)},
              compression="none")
    message = refused_in_a_child("idv.open(sys.argv[1])", path, 8 << 20)
    assert message is not None and \
        "big.idv: mapping the file's 32.0 MB needs address space" in message


def test_a_row_list_is_charged_for_its_blocks_and_the_rows_it_returns(tmp_path):
    n = 100_000
    path = tmp_path / "rows.idv"
    idv.write(path, {"x": np.arange(n, dtype=np.float64), "y": np.zeros(n)},
              rows_per_block=8192)
    every = np.arange(n)
    with idv.open(path, memory_limit=200_000) as f:     # a block: 65.5 KB; a column: 800 KB
        col = f["x"]
        for rows in (every, list(range(n)), np.ones(n, bool)):
            with pytest.raises(idv.MemoryLimitError, match="reading 100000 rows of column 0"):
                col[rows]
        with pytest.raises(idv.MemoryLimitError, match="reading 1000000 rows of column 0"):
            col[np.zeros(1_000_000, np.int64)]           # one block, 8 MB of rows
        with pytest.raises(idv.MemoryLimitError):
            f.read(["x"], rows=every)
        assert col.blocks_decoded == 0                   # refused before any decode
        assert col[[n - 1, 0]].tolist() == [n - 1, 0]    # two blocks and two rows
    rows = np.arange(20_000)             # each column's 3 blocks fit, the two columns' rows not
    with idv.open(path, memory_limit=700_000) as f:
        assert f["x"][rows].tolist() == rows.tolist()
        with pytest.raises(idv.MemoryLimitError, match="20000 rows of 2 columns"):
            f.read(["x", "y"], rows=rows)
        assert len(f.read(["x", "y"], rows=every < 10)["x"]) == 10   # a mask: the rows kept


def test_a_map_style_dataset_is_charged_for_the_rows_it_returns(tmp_path):
    pytest.importorskip("torch", reason="the map-style dataset needs torch")
    import idv.torch
    n = 100_000
    path = tmp_path / "text.idv"
    idv.write(path, {"t": np.array(["abcdefghij"] * n, object)}, rows_per_block=8192)
    ds = idv.torch.IdvMapDataset(path, ["t"], memory_limit=2_000_000)   # a block's str fit
    assert list(ds[np.arange(1000)]["t"]) == ["abcdefghij"] * 1000
    with pytest.raises(idv.MemoryLimitError):              # 100,000 str: 6.8 MB
        ds[np.arange(n)]


def test_a_filtered_table_is_charged_as_a_whole(tmp_path):
    """to_arrow(filter=) gathers every batch into one table: the whole of the matching rows
    is charged to the memory limit (each window alone fits), for a file and a dataset."""
    path = str(tmp_path / "m.idv")
    idv.write(path, {"x": np.arange(100_000, dtype=np.float64)}, rows_per_block=8192)
    with pytest.raises(idv.MemoryLimitError, match="the rows matching the filter"):
        idv.to_arrow(path, filter="x >= 0", memory_limit=300_000)
    assert idv.to_arrow(path, filter="x >= 99000", memory_limit=300_000).num_rows == 1000
    with idv.dataset([path, path], memory_limit=300_000) as ds:
        with pytest.raises(idv.MemoryLimitError, match="the rows matching the filter"):
            ds.to_arrow(filter="x >= 0")


def test_wide_sparse_rows_are_a_memory_question_and_a_length_beyond_the_file_is_corrupt(
        tmp_path):
    """Sparse rows of a fixed-size type densify to the size the type gives (100 rows of
    Vector<Single, 1000000>: 400 MB from a few KB): a dense read over the memory limit is a
    MemoryLimitError, while one row densifies alone (4 MB), and idv.verify checks the rows as
    stored, without densifying them. Only lengths a block gives (variable-size vectors) can be
    corrupt: 2^31-1 slots from 21 bytes."""
    sp = pytest.importorskip("scipy.sparse", reason="the sparse column is written from CSR")
    n, m = 100, 1_000_000
    X = sp.csr_matrix((np.ones(2 * n, np.float32),
                       (np.repeat(np.arange(n), 2), np.tile([3, m - 1], n))), shape=(n, m))
    path = tmp_path / "wide.idv"
    idv.write(path, {"s": X})
    with idv.open(path, memory_limit=50_000_000) as f:
        with pytest.raises(idv.MemoryLimitError, match=r"column 0 's' rows 0-99 .*needs 400\.0 MB"):
            f["s"].read()
        row = f["s"][7]
        assert row.shape == (m,) and np.flatnonzero(row).tolist() == [3, m - 1]
        assert f["s"].read(sparse=True).nnz == 2 * n
    report = idv.verify(path)
    assert report.ok and report.checked["blocks"] == 1, report
    payload = vbuf_payload(1, 0, [1], [5], struct.pack("<f", 1.0), lengths=[N_HUGE])
    col = Col("V", "VBuffer", vbuf_params("Single", (0,)), comp=1, rpb=1, blocks=[payload])
    data, _ = build(Model(1, [col]))
    with idv.open(data, memory_limit=1 << 40) as f:
        with pytest.raises(idv.IdvFormatError, match="a vector length is corrupt"):
            f["V"].read()
        assert f["V"].read(sparse=True).shape == (1, N_HUGE)
    assert [p.block for p in idv.verify(data).problems] == [0]


def test_a_numpy_integer_is_a_limit_as_a_python_one_is(tmp_path):
    """A limit computed with numpy (np.int64) is taken wherever a Python int is, as idv's
    other sizes are; a bool, a float or a string is still refused."""
    path = tmp_path / "a.idv"
    idv.write(path, {"x": np.arange(1000.0)})
    with idv.open(path, memory_limit=np.int64(4000)) as f:
        assert f.memory_limit == 4000
        with pytest.raises(idv.MemoryLimitError):
            f["x"].read()
    assert idv.read(path, memory_limit=np.uint32(8000))["x"].sum() == sum(range(1000))
    try:
        idv.set_memory_limit(np.int64(4000))
        with idv.open(path) as f:
            assert f.memory_limit == 4000
    finally:
        idv.set_memory_limit(None)
    for bad, error in ((np.bool_(True), TypeError), (np.float64(4000.0), TypeError),
                       (np.int64(0), ValueError)):
        with pytest.raises(error, match="memory limit"):
            idv.open(path, memory_limit=bad)


def test_a_limit_given_as_text_is_read_as_the_command_line_reads_it(tmp_path):
    """"8GB" (powers of 1000) and "1.5GiB" (of 1024) are limits in Python as on the command
    line (one reading of a size for both, and for Spark's option): it was refused as no
    number of bytes."""
    path = tmp_path / "a.idv"
    idv.write(path, {"x": np.arange(1000.0)})
    with idv.open(path, memory_limit="4KB") as f:
        assert f.memory_limit == 4000
        with pytest.raises(idv.MemoryLimitError):
            f["x"].read()
    assert idv.read(path, memory_limit=" 8 KiB ")["x"].sum() == 499500
    try:
        idv.set_memory_limit("1.5GiB")
        with idv.open(path) as f:
            assert f.memory_limit == 3 << 29
    finally:
        idv.set_memory_limit(None)
    for bad in ("1.5", "8XB", "-3", "0", "0.0001KB"):
        with pytest.raises(ValueError, match="memory limit"):
            idv.open(path, memory_limit=bad)


def test_every_reader_of_a_path_takes_the_open_options(tmp_path):
    """idv.open's options given to a reader that opens the file (memory_limit= here) mean
    what they mean to idv.open, on every one (to_pandas refused them as unknown)."""
    path = str(tmp_path / "m.idv")
    idv.write(path, {"x": np.arange(100_000, dtype=np.float64)})
    readers = {"read": lambda **kw: idv.read(path, **kw)["x"],
               "to_arrow": lambda **kw: idv.to_arrow(path, **kw)["x"],
               "to_pandas": lambda **kw: idv.to_pandas(path, **kw)["x"],
               "read_pandas": lambda **kw: idv.read_pandas(path, **kw)["x"]}
    for name, read in readers.items():
        if name != "read":
            pytest.importorskip("pandas" if "pandas" in name else "pyarrow")
        with pytest.raises(idv.MemoryLimitError):
            read(memory_limit=300_000)
        assert len(read(memory_limit=10_000_000, threads=1)) == 100_000, name
