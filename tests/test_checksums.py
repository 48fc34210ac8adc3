"""Checksums that ML.NET ignores: files idv writes carry a CRC-32 of every
part; the reader checks them, idv verify reports a mismatch with its column and block, and
ML.NET loads such files and reads the same values.

ML.NET's loading of checksummed files of every write case (libdeflate and ISA-L, which keep
checksums on) is in tests/test_writer.py::test_mlnet_reads_other_backends; here one more
with zlib, byte for byte what ML.NET writes but for the checksum table and its pointer.
"""
from __future__ import annotations

import io
import zlib

import numpy as np
import pytest

import idv
from idv._storage import checksums

ROWS = 3000


def _data():
    rng = np.random.default_rng(7)
    return {"Id": np.arange(ROWS, dtype=np.int64),
            "Score": rng.random(ROWS, np.float32),
            "Flag": rng.random(ROWS) < 0.3,
            "Name": [f"name {i} é" for i in range(ROWS)],
            "Vec": rng.random((ROWS, 4), np.float32)}


def _written(**options):
    buf = io.BytesIO()
    idv.write(buf, _data(), rows_per_block=500, metadata={"Vec": {"SlotNames": list("abcd")}},
              **options)
    return buf.getvalue()


def _flipped(data, column, block, at=5, bit=0x10):
    """`data` with one bit flipped in the stored bytes of `column`'s `block`, and where."""
    with idv.open(data, checksums=False) as f:
        entry = f[column].lookup[block]
    off = int(entry["offset"])
    assert 0 <= at < int(entry["disk"])
    bad = bytearray(data)
    bad[off + at] ^= bit
    return bytes(bad), off


def _backends():
    return [pytest.param(b, marks=pytest.mark.skipif(not idv.compression.BACKENDS[b].installed,
                                                     reason=f"{b} is not installed"))
            for b in ("libdeflate", "isal", "zlib")]


def test_written_by_default_checked_by_default():
    data = _written()
    assert data[52:60] == checksums.MAGIC
    with idv.open(data) as f:
        assert f.has_checksums
        got = f.read()
    assert got["Id"].tolist() == list(range(ROWS))
    plain = _written(checksums=False, statistics=False)
    assert plain[52:256] == bytes(204)                   # ML.NET's header: zeros after 52
    with idv.open(plain, checksums=True) as f:
        assert not f.has_checksums
        np.testing.assert_array_equal(f.read()["Vec"], got["Vec"])


def test_a_damaged_block_is_named_with_its_column_and_block():
    data = bytearray(_written())
    with idv.open(bytes(data)) as f:
        off = int(f["Score"].lookup[2]["offset"])
    data[off + 5] ^= 0x10
    with idv.open(bytes(data), checksums=True) as f:
        f["Id"].read()                                   # the other columns still read
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            f["Score"].read()
        assert (e.value.column, e.value.block, e.value.offset) == ("Score", 2, off)
    with idv.open(bytes(data), checksums=False) as f:    # skipped: the decoder's own checks
        try:
            f["Score"].read()
        except idv.IdvFormatError as err:
            assert "checksum" not in str(err)
    report = idv.verify(io.BytesIO(bytes(data)))
    assert not report.ok and report.checksums
    [p] = report.problems
    assert (p.column, p.block) == ("Score", 2) and "checksum mismatch" in p.message


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("column, block", [("Score", 2), ("Name", 3), ("Vec", 5), ("Flag", 0)])
def test_a_default_read_checks_each_block(backend, column, block):
    """Fixed-width, text, vector and Boolean columns (each a different decoding path), with
    every DEFLATE library: a flipped bit in a block is a checksum mismatch naming the column,
    the block and its offset, on a default idv.open; the other columns still read."""
    data, off = _flipped(_written(), column, block)
    with idv.open(data, backend=backend) as f:
        assert f.has_checksums
        assert f["Id"].read().tolist() == list(range(ROWS))
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch in the block") as e:
            f[column].read()
        assert (e.value.column, e.value.block, e.value.offset) == (column, block, off)
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            f[column][block * 500 + 7]                   # row access, through the block cache
        assert (e.value.column, e.value.block) == (column, block)
        first = f[column].read_blocks(0, block)          # the blocks before it are sound
        assert len(first) == block * 500


@pytest.mark.parametrize("source", ["bytes", "path", "file object"])
def test_uncompressed_damage_is_caught_by_default_and_skipped_on_request(tmp_path, source):
    """Without compression nothing but the checksum can see a changed number: a default read
    refuses it, checksums=False returns the changed value, and a file without checksums reads
    as before (no check, no error)."""
    data = _written(compression="none")
    good = idv.read(data)["Id"]
    bad, off = _flipped(data, "Id", 3, at=8, bit=0x01)      # row 1501's low byte: 1501 -> 1500
    path = tmp_path / "bad.idv"
    path.write_bytes(bad)

    def opened(**options):
        if source == "bytes":
            return idv.open(bad, **options)
        if source == "path":
            return idv.open(path, **options)
        return idv.open(path.open("rb"), **options)
    with opened() as f:
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            f["Id"].read()
        assert (e.value.column, e.value.block, e.value.offset) == ("Id", 3, off)
    with opened(checksums=False) as f:
        assert not f.has_checksums
        got = f["Id"].read()
    assert (got != good).sum() == 1 and got[1501] == 1500
    plain, _ = _flipped(_written(compression="none", checksums=False), "Id", 3, at=8, bit=0x01)
    with idv.open(plain) as f:
        assert not f.has_checksums
        assert f["Id"].read()[1501] == 1500


@pytest.mark.parametrize("column", ["Id", "Score"])
def test_a_zero_copy_read_checks_its_columns_together_and_names_the_damaged_one(tmp_path,
                                                                                column):
    """to_arrow of a mapped file checks the blocks of all its mapped columns in one call,
    and a stream those of each window: a flipped bit in any block of any of them is named
    with its column, block and offset, whichever order the columns are asked in; the
    undamaged file reads as its bytes do."""
    pa = pytest.importorskip("pyarrow", reason="to_arrow and its stream need pyarrow")
    buf = io.BytesIO()
    idv.write(buf, {k: v for k, v in _data().items() if k in ("Id", "Score")},
              compression="none", rows_per_block=500)
    data = buf.getvalue()
    path = tmp_path / "good.idv"
    path.write_bytes(data)
    with idv.open(path) as f:
        assert f.has_checksums and f["Id"].mappable and f["Score"].mappable
    assert idv.to_arrow(str(path)).equals(idv.to_arrow(data))
    with idv.open(path) as f:
        assert pa.Table.from_batches(list(idv.record_batch_reader(f))).equals(
            idv.to_arrow(data).combine_chunks())
    bad, off = _flipped(data, column, 4, at=2)
    path = tmp_path / "bad.idv"
    path.write_bytes(bad)
    for columns in (["Id", "Score"], ["Score", "Id"]):
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            idv.to_arrow(str(path), columns=columns)
        assert (e.value.column, e.value.block, e.value.offset) == (column, 4, off)
        assert e.value.path == str(path)
        with idv.open(path) as f, pytest.raises(idv.IdvFormatError, match="mismatch") as e:
            list(idv.record_batch_reader(f, columns))
        assert (e.value.column, e.value.block, e.value.offset) == (column, 4, off)
    other = "Score" if column == "Id" else "Id"
    assert idv.to_arrow(str(path), columns=[other]).equals(idv.to_arrow(data, columns=[other]))


def test_a_checksum_over_another_length_is_a_mismatch():
    """An entry whose length differs from the block's stored length cannot match (the table's
    own CRC re-made, as a careless tool might)."""
    data = bytearray(_written())
    with idv.open(bytes(data)) as f:
        off = int(f["Score"].lookup[1]["offset"])
    table_at = int.from_bytes(data[60:68], "little")
    length = int.from_bytes(data[68:76], "little")
    table = np.frombuffer(bytes(data[table_at:table_at + length]), checksums.ENTRY).copy()
    [k] = np.flatnonzero(table["offset"] == off)
    table["length"][k] += 1
    raw = table.tobytes()
    data[table_at:table_at + length] = raw
    data[76:80] = zlib.crc32(raw).to_bytes(4, "little")
    with idv.open(bytes(data)) as f:
        f["Score"].read_blocks(0, 1)
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            f["Score"].read()
        assert (e.value.column, e.value.block, e.value.offset) == ("Score", 1, off)


def test_parallel_reads_name_the_damaged_block():
    """A column large enough to be decompressed in parallel chunks: the error still names
    its block (counted across chunks), whichever thread found it."""
    rows, rpb = 400_000, 4096
    buf = io.BytesIO()
    idv.write(buf, {"X": np.arange(rows, dtype=np.float64) / 3}, rows_per_block=rpb)
    block = 61
    data, off = _flipped(buf.getvalue(), "X", block, at=100)
    with idv.open(data, threads=2) as f:
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            f["X"].read()
        assert (e.value.column, e.value.block, e.value.offset) == ("X", block, off)
        assert len(f["X"].read_blocks(0, block)) == block * rpb


def _deflated(raw):
    """Raw DEFLATE by Python's zlib module."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(raw) + c.flush()


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("kind", [idv.compression.DEFLATE, idv.compression.NONE])
def test_each_decompression_loop_checks_the_crcs_it_is_given(backend, kind):
    """The GIL-free loops themselves (zlib's and libdeflate's C paths, ISA-L's per-block
    one, the uncompressed copy): sound blocks whose expected CRC-32 is wrong fail at that
    block, before it is written; NO_CRC skips a block, BAD_CRC always fails it."""
    from idv import _compression
    b = idv.compression.backend(backend)
    rng = np.random.default_rng(5)
    raws = [rng.integers(0, 9, n, np.uint8).tobytes() for n in (5000, 7000, 3000)]
    stored = [_deflated(r) for r in raws] if kind == idv.compression.DEFLATE else raws
    src = b"".join(stored)
    disk = np.array([len(x) for x in stored], np.int32)
    raw = np.array([len(x) for x in raws], np.int32)
    offsets = np.concatenate([[0], np.cumsum(disk[:-1])]).astype(np.int64)
    dst_offsets = np.concatenate([[0], np.cumsum(raw[:-1])]).astype(np.int64)
    good = np.array([zlib.crc32(x) for x in stored], np.int64)

    def run(crcs):
        dst = np.zeros(int(raw.sum()), np.uint8)
        return b.decompress_blocks(kind, src, offsets, disk, raw, dst, dst_offsets, crcs), dst
    assert run(good)[0] == (-1, None)
    assert run(good)[1].tobytes() == b"".join(raws)
    wrong = good.copy()
    wrong[1] ^= 1
    (i, message), dst = run(wrong)
    assert (i, message) == (1, "checksum mismatch")
    assert dst[dst_offsets[1]:].tobytes() == bytes(int(raw[1:].sum()))    # not written
    skipped = wrong.copy()
    skipped[1] = _compression.NO_CRC
    assert run(skipped)[0] == (-1, None)
    other = good.copy()
    other[2] = _compression.BAD_CRC
    assert run(other)[0] == (2, "checksum mismatch")


@pytest.mark.parametrize("backend", ["libdeflate", "zlib"])
def test_a_block_is_inflated_in_part_only_behind_its_crc(backend):
    """`need` (the bytes wanted from a block's start: a take's rows) stops the inflate there
    only for a block whose CRC-32 is recorded and checked: a stream cut short, whose CRC
    matches its bytes, gives its first bytes (the rest of its room zeroed), while without a
    CRC, or asked for more than two thirds of it, it is inflated whole and found short."""
    be = idv.compression.BACKENDS[backend]
    if not be.installed or be.native is None:
        pytest.skip(f"{backend}'s C API is not bound here")
    b = idv.compression.backend(backend)
    raw = np.random.default_rng(8).random(4096).tobytes()         # 32 KiB of random doubles
    whole = _deflated(raw)
    cut = whole[:len(whole) // 2]                                  # about its first half
    disk, n = np.array([len(cut)], np.int32), np.array([len(raw)], np.int32)
    at = np.array([0], np.int64)

    def run(crcs, need):
        dst = np.full(len(raw), 7, np.uint8)
        got = b.decompress_blocks(idv.compression.DEFLATE, cut, at, disk, n, dst, at, crcs,
                                  None, None if need is None else np.array([need], np.int64))
        return got, dst
    crc = np.array([zlib.crc32(cut)], np.int64)
    got, dst = run(crc, 8000)
    assert got == (-1, None)
    assert dst[:8000].tobytes() == raw[:8000] and not dst[8000:].any()
    assert run(crc, None)[0][0] == 0                                     # whole: too short
    assert run(None, 8000)[0][0] == 0                                    # no CRC: whole
    assert run(crc, 30000)[0][0] == 0                                    # most of it: whole


def test_recorded_checksums_are_zlibs_crc32_of_the_stored_bytes():
    """Each entry of the table is zlib's CRC-32 (Python's zlib module, an independent
    implementation) of the bytes it names, whatever library computed it; and idv's CRC-32
    agrees with zlib's on any length."""
    data = _written()
    at = int.from_bytes(data[60:68], "little")
    length = int.from_bytes(data[68:76], "little")
    table = np.frombuffer(data[at:at + length], checksums.ENTRY)
    with idv.open(data) as f:
        blocks = {int(o) for c in f.columns for o in c.lookup["offset"]}
    assert blocks <= {int(o) for o in table["offset"]}
    for e in table:
        o, n = int(e["offset"]), int(e["length"])
        assert int(e["crc"]) == zlib.crc32(data[o:o + n])
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 63, 64, 65, 1000, 4096, 100_003):
        b = rng.integers(0, 256, n, np.uint8).tobytes()
        assert checksums.crc(b) == zlib.crc32(b)


@pytest.mark.parametrize("library", ["libdeflate", "isal", "zlib"])
def test_every_crc32_kernel_is_zlibs_crc32(library):
    """Each kernel the checks may run (whichever is installed first) gives zlib's CRC-32."""
    from idv import _compression
    if library not in _compression.crc32_libraries():
        pytest.skip(f"{library}'s CRC-32 was not found (its package is not installed)")
    assert _compression.CRC32_LIBRARY == _compression.crc32_libraries()[0]
    rng = np.random.default_rng(11)
    for n in (0, 1, 3, 15, 16, 17, 255, 256, 257, 4095, 65_537, 1 << 20):
        b = rng.integers(0, 256, n, np.uint8).tobytes()
        assert _compression.crc32_of(b, library) == zlib.crc32(b), n
        assert _compression.crc32_of(memoryview(b)[1:], library) == zlib.crc32(b[1:]), n
    with pytest.raises(ValueError, match="not available"):
        _compression.crc32_of(b"", "crc32c")


@pytest.mark.parametrize("library", ["libdeflate", "isal", "zlib"])
def test_the_kernel_a_benchmark_chooses_checks_every_block(library, tmp_path):
    """use_crc32_library (a benchmark's --crc32) makes one kernel every check's: reads of
    compressed and of uncompressed blocks still give the rows, and still find a flipped bit,
    through it; the kernel used before is back afterwards."""
    from idv import _compression
    if library not in _compression.crc32_libraries():
        pytest.skip(f"{library}'s CRC-32 was not found (its package is not installed)")
    before = _compression.CRC32_LIBRARY
    try:
        assert _compression.use_crc32_library(library) == before
        assert _compression.CRC32_LIBRARY == library == _compression.crc32_libraries()[0]
        for compression in ("deflate", "none"):
            data = _written(compression=compression)
            path = tmp_path / f"{compression}.idv"
            path.write_bytes(_flipped(data, "Id", 2)[0])
            with idv.open(data) as f:
                assert np.array_equal(f["Id"].read(), _data()["Id"])
            with pytest.raises(idv.IdvFormatError, match="checksum mismatch"):
                idv.to_arrow(str(path), columns=["Id"])
    finally:
        _compression.use_crc32_library(before)
    assert _compression.CRC32_LIBRARY == before
    with pytest.raises(ValueError, match="not available"):
        _compression.use_crc32_library("crc32c")


def test_the_header_and_the_checksum_table_are_covered():
    data = _written()
    head = bytearray(data)
    head[40] ^= 1                                       # the row count
    with pytest.raises(idv.IdvFormatError, match="checksum mismatch in the header"):
        idv.open(bytes(head), checksums=True)
    table_at = int.from_bytes(data[60:68], "little")
    table = bytearray(data)
    table[table_at + 3] ^= 4
    with pytest.raises(idv.IdvFormatError, match="checksum table itself"):
        idv.open(bytes(table), checksums=True)


def _flip_rate(data, flips, seed):
    """The share of single-bit flips past the header that idv.verify reports."""
    rng = np.random.default_rng(seed)
    caught = 0
    for pos in rng.integers(256, len(data), flips):
        bad = bytearray(data)
        bad[int(pos)] ^= 1 << int(rng.integers(8))
        if not idv.verify(io.BytesIO(bytes(bad))).ok:
            caught += 1
    return caught / flips


def test_verify_checks_a_file_larger_than_the_memory_limit(tmp_path):
    """verify decodes within the memory limit, a group of blocks at a time: a file whose
    column is over the limit is checked whole; a block that is over it alone is a warning
    (not checked), never an error that stops the check."""
    path = tmp_path / "big.idv"
    idv.write(path, {"x": np.arange(400_000, dtype=np.int64)}, rows_per_block=10_000)
    report = idv.verify(path, memory_limit=300_000)         # the column: 3.2 MB
    assert report.ok and not report.warnings and report.checked["blocks"] == 40
    from cli_run import run
    rc, out, err = run("--memory-limit", "300KB", "verify", path)
    assert rc == 0 and "OK" in out, err
    report = idv.verify(path, memory_limit=50_000)          # a block: 80 KB
    assert report.ok and report.checked["blocks"] == 0 and len(report.warnings) == 40
    assert all(w.what == "block" and "not checked:" in w.message and "memory limit" in
               w.message for w in report.warnings)
    rc, out, err = run("--memory-limit", "50KB", "verify", path, "--strict")
    assert rc == 1


def test_verify_catches_single_bit_flips_past_the_header():
    """>= 99% with checksums (the issue measured 21% without, on files idv wrote)."""
    with_sums = _flip_rate(_written(), 400, 1)
    without = _flip_rate(_written(checksums=False), 400, 1)
    print(f"single-bit flips caught: {with_sums:.1%} with checksums, {without:.1%} without")
    assert with_sums >= 0.99
    assert without < with_sums


def test_mlnet_loads_a_checksummed_file_with_the_same_values(tmp_path, oracle):
    ours = tmp_path / "sums.idv"
    plain = tmp_path / "plain.idv"
    for path, sums in ((ours, True), (plain, False)):
        idv.write(path, _data(), rows_per_block=500, backend="zlib", checksums=sums,
                  metadata={"Vec": {"SlotNames": list("abcd")}})
    a, b = ours.read_bytes(), plain.read_bytes()
    assert a[:24] == b[:24]                  # the same signature and versions
    dumps = oracle.dump_many([ours, plain])
    d, ref = dumps[str(ours)], dumps[str(plain)]
    assert "error" not in d, d.get("error")
    assert d["columns"] == ref["columns"] and d["rows"] == ref["rows"]
    assert d["row_count"] == ROWS


def _with_table(data, keep):
    """`data` with its checksum table cut to the entries `keep(table)` selects (the table's
    own CRC re-made, as a tool hiding a change would)."""
    data = bytearray(data)
    table_at = int.from_bytes(data[60:68], "little")
    length = int.from_bytes(data[68:76], "little")
    table = np.frombuffer(bytes(data[table_at:table_at + length]), checksums.ENTRY)
    raw = table[keep(table)].tobytes()
    data[table_at:table_at + len(raw)] = raw
    data[68:76] = len(raw).to_bytes(8, "little")
    data[76:80] = zlib.crc32(raw).to_bytes(4, "little")
    return bytes(data)


def test_a_table_that_misses_parts_is_refused_and_verify_lists_them():
    """idv records every part it writes: an empty table, or one with a block's entry dropped
    (that block then rewritten), would let changed bytes read unchecked."""
    data = _written(compression="none")
    with idv.open(data) as f:
        blk = f["Score"].lookup[1]
        off, n = int(blk["offset"]), int(blk["disk"])
        parts = len(f.tables.regions)
    changed = bytearray(_with_table(data, lambda t: t["offset"] != off))
    changed[off:off + 8] = b"\x00\x00\x80\x7f" * 2             # other values, same length
    with pytest.raises(idv.IdvFormatError, match=r"checksum table does not cover 1 part of "
                                                 r"the file.*column \d+ 'Score' block 1 "
                                                 rf"\(bytes {off}-{off + n - 1}\)") as e:
        idv.open(bytes(changed))
    assert e.value.offset == off
    report = idv.verify(bytes(changed))
    assert not report.ok and "'Score' block 1" in str(report)
    with idv.open(bytes(changed), checksums=False) as f:     # the way to read it anyway
        assert len(f["Score"].read()) == f.num_rows
    empty = _with_table(data, lambda t: t["offset"] < 0)
    with pytest.raises(idv.IdvFormatError, match=r"does not cover (\d+) parts.*and \d+ more"):
        idv.open(empty)
    assert parts > 10


def test_a_damaged_lookup_or_metadata_table_is_named_when_the_open_fails(tmp_path):
    """With checksums, lookup and metadata tables are checked at open: the error names the
    column's table, as the layout knows it, not 'a lookup table or metadata'."""
    path = tmp_path / "k.idv"
    idv.write(path, {"x": np.arange(50), "k": np.array([1, 2] * 25, np.uint32)},
              types={"k": idv.Key(idv.UInt32, 2)}, metadata={"k": {"KeyValues": ["a", "b"]}},
              rows_per_block=10)
    data = path.read_bytes()
    with idv.open(path) as f:
        lookup, labels = f["k"].lookup_offset, f["k"].metadata_entries()[0].offset
    for at, named in ((lookup, "column 1 'k' lookup table"),
                      (labels, "column 1 'k' metadata 'KeyValues' block")):
        bad = bytearray(data)
        bad[at + 3] ^= 0x40
        with pytest.raises(idv.IdvFormatError, match=f"checksum mismatch in {named} "
                                                     r"\(bytes \d+-\d+\)"):
            idv.open(bytes(bad))
