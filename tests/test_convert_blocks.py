""".idv -> .idv keeps the blocks it need not compress again: idv.convert copies a file's
blocks stored as its output stores them (Writer.copy_blocks), decoding them only for their
statistics and checks.

Ground truth: the ML.NET sidecars of the sample fixtures (what ML.NET reads from each file),
ML.NET's own reading (oracle dump) of the copies, and the statistics of the same conversion
compressing every block again (the writer's own path, tested against ML.NET elsewhere).
"""
from __future__ import annotations

import io
import os

import numpy as np
import pytest

import idv
from dumpcheck import check_idv_against_dump
from expected import visible_columns
from reference import fixture, sample_params, sidecar

pytest.importorskip("pyarrow")

WITH_COLUMNS = sample_params(lambda n: n != "no_columns")


def _stored(f, name):
    col = f[name]
    return [bytes(b) for b in col.stored_blocks(0, col.num_blocks)]


def _stats(f):
    s = f.statistics
    return None if s is None else {
        i: (c.present.tolist(), c.missing.tolist(), list(c.low), list(c.high),
            None if c.flags is None else c.flags.tolist())
        for i, c in s.columns.items()}


@pytest.mark.parametrize("name", WITH_COLUMNS)
def test_default_copies_the_blocks(name, tmp_path):
    """Each DEFLATE column of an ML.NET file keeps ML.NET's block bytes and block size; the
    output gains checksums and the statistics that compressing again gives."""
    out, again = tmp_path / "kept.idv", tmp_path / "again.idv"
    idv.convert(fixture(name), out)
    with idv.open(out) as f:            # the same block grid, every block compressed again
        rpb = f.columns[0].rows_per_block
    idv.convert(fixture(name), again, level=6, rows_per_block=rpb)
    check_idv_against_dump(out, sidecar(name))
    with idv.open(fixture(name)) as src, idv.open(out) as f, idv.open(again) as g:
        assert f.has_checksums
        assert _stats(f) == _stats(g)
        for col in src.columns:
            if col.compression != "Deflate":
                continue
            assert f[col.name].rows_per_block == col.rows_per_block
            assert _stored(f, col.name) == _stored(src, col.name), col.name


def test_mlnet_reads_every_fixture_copied(tmp_path, oracle):
    """ML.NET reads the copy of each sample fixture stored with DEFLATE (ML.NET's blocks
    under idv's tables, checksums and statistics) as it read the fixture: the same values,
    sparse vectors still sparse."""
    outs = {}
    for p in WITH_COLUMNS:
        name = p.values[0]
        if not isinstance(name, str):
            pytest.skip("sample fixtures missing")
        with idv.open(fixture(name)) as f:
            if any(c.compression != "Deflate" for c in f.columns):
                continue
        outs[name] = tmp_path / f"{name}.idv"
        idv.convert(fixture(name), outs[name])
    dumps = oracle.dump_many(list(outs.values()))
    for name, out in outs.items():
        got = dumps[str(out)]
        assert "error" not in got, (name, got.get("error"))
        want = sidecar(name)
        shown = [c["index"] for c in visible_columns(want)]
        assert got["rows"] == [[row[i] for i in shown] for row in want["rows"]], name
    assert len(outs) > 20


def test_copies_differ_from_compressing_again(tmp_path):
    """What the test above checks is not what compressing again gives anyway: libdeflate's
    blocks differ from ML.NET's zlib ones."""
    different = 0
    for p in WITH_COLUMNS:
        name = p.values[0]
        if not isinstance(name, str):
            pytest.skip("sample fixtures missing")
        again = tmp_path / f"{name}.idv"
        idv.convert(fixture(name), again, level=6)
        with idv.open(fixture(name)) as src, idv.open(again) as g:
            different += sum(_stored(g, c.name) != _stored(src, c.name) for c in src.columns
                             if c.compression == "Deflate")
    assert different > 20


def test_mlnet_reads_the_copies(tmp_path, oracle, shared):
    """ML.NET's own 1.1.1.5 file: its current codecs are copied, its legacy ones (DvBool,
    DvDateTime, DvDateTimeZone) written again as today's; ML.NET reads the output as it reads
    the source."""
    src = shared / "mlnet-files" / "datatypes.idv"
    out = tmp_path / "datatypes.idv"
    idv.convert(src, out)
    with idv.open(src) as s, idv.open(out) as f:
        legacy = [c.name for c in s.columns if c.codec_name.startswith("Dv")]
        assert legacy == ["bl", "dto", "dt"]
        for c in s.columns:
            if c.name in legacy:
                assert f[c.name].codec_name != c.codec_name
            else:
                assert _stored(f, c.name) == _stored(s, c.name)
    want, got = oracle.dump(src), oracle.dump(out)
    assert "error" not in got, got.get("error")
    assert got["rows"] == want["rows"]


@pytest.mark.parametrize("how", [{"level": 6}, {"backend": "zlib"}, {"rows_per_block": 7},
                                 {"compression": "none"}])
def test_blocks_are_made_again_when_asked(how, tmp_path, monkeypatch):
    """A level, a library, another block size or no compression: no block is copied (the
    same small blocks may compress to the same bytes, so the writer is watched instead)."""
    name = "pipeline_multiclass_scored"

    def refuse(self, blocks):
        raise AssertionError("blocks copied")
    monkeypatch.setattr(idv.Writer, "copy_blocks", refuse)
    with pytest.raises(AssertionError, match="blocks copied"):
        idv.convert(fixture(name), tmp_path / "default.idv")
    out = tmp_path / "out.idv"
    idv.convert(fixture(name), out, **how)
    check_idv_against_dump(out, sidecar(name))
    if "compression" in how:
        with idv.open(out) as f:
            assert {c.compression for c in f.columns} == {"None"}


def test_columns_chosen_are_copied(tmp_path):
    name = "pipeline_multiclass_scored"
    out = tmp_path / "two.idv"
    idv.convert(fixture(name), out, columns=["PredictedLabel", "Score"])
    check_idv_against_dump(out, sidecar(name), columns=["PredictedLabel", "Score"])
    with idv.open(fixture(name)) as src, idv.open(out) as f:
        assert f.column_names == ["PredictedLabel", "Score"]
        for c in f.columns:
            assert _stored(f, c.name) == _stored(src, c.name)


def test_a_remote_file_is_fetched_once(tmp_path):
    """Over HTTP the blocks are not copied (they would be fetched a second time): they are
    compressed again, each fetched once."""
    pytest.importorskip("fsspec")
    from http_server import RangeServer
    src = tmp_path / "src.idv"
    x = np.random.default_rng(0).random((300_000, 4))
    idv.write(src, {"x": x}, backend="zlib")
    data = src.read_bytes()
    with idv.open(src) as f:
        blocks = f["x"].nbytes_disk
    out = tmp_path / "out.idv"
    with RangeServer({"/src.idv": data}) as srv:
        idv.convert(srv.url("/src.idv"), out)
        served = srv.bytes_served
    assert blocks < served < blocks * 1.2
    with idv.open(out) as f:
        np.testing.assert_array_equal(f["x"].read(), x)


def test_a_dataset_is_compressed_again(tmp_path):
    """A dataset's files end to end do not share one block grid: its blocks are made again."""
    for i in range(2):
        idv.write(tmp_path / f"part{i}.idv", {"x": np.arange(10_000, dtype=np.int64) + i})
    out = tmp_path / "all.idv"
    idv.convert(idv.dataset(sorted(tmp_path.glob("part*.idv"))), out)
    with idv.open(out) as f:
        assert f.num_rows == 20_000 and f["x"].num_blocks == 3
        np.testing.assert_array_equal(f["x"].read()[10_000:], np.arange(10_000) + 1)


def _damaged():
    """An idv file with checksums, block 1 of column x flipped; and that block's offset."""
    buf = io.BytesIO()
    idv.write(buf, {"x": np.arange(3000, dtype=np.int32), "t": [str(i) for i in range(3000)]},
              rows_per_block=1000)
    data = bytearray(buf.getvalue())
    with idv.open(bytes(data)) as f:
        off = int(f["x"].lookup[1]["offset"])
    data[off + 3] ^= 0x40
    return bytes(data), off


@pytest.mark.parametrize("source", ["bytes", "file object"])
def test_stored_blocks_are_checked(source):
    """Stored blocks are handed out checked against their CRC-32s: a damaged one raises,
    naming its column, block and offset in the file, from memory or a file object alike."""
    data, off = _damaged()
    with idv.open(data if source == "bytes" else io.BytesIO(data)) as f:
        assert len(f["t"].stored_blocks(0, 3)) == 3
        assert bytes(f["x"].stored_blocks(0, 1)[0]) == data[
            int(f["x"].lookup[0]["offset"]):][:int(f["x"].lookup[0]["disk"])]
        with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
            f["x"].stored_blocks(0, 3)
    assert (e.value.column, e.value.block, e.value.offset) == ("x", 1, off)


def test_ctrl_c_while_copying_leaves_nothing(tmp_path):
    """Interrupted half-way (a KeyboardInterrupt from the progress callback, as Ctrl-C), the
    copy leaves no file, and an existing destination as it was."""
    src = tmp_path / "src.idv"
    idv.write(src, {"x": np.arange(100_000, dtype=np.int64)}, rows_per_block=1000)
    out = tmp_path / "out.idv"
    out.write_bytes(b"kept")
    calls = []

    def progress(done, total):
        calls.append(done)
        if done >= 50_000:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        idv.convert(src, out, progress=progress)
    assert 0 < len(calls) < 100
    assert sorted(os.listdir(tmp_path)) == ["out.idv", "src.idv"]
    assert out.read_bytes() == b"kept"


def test_a_damaged_source_writes_nothing(tmp_path):
    data, off = _damaged()
    src = tmp_path / "bad.idv"
    src.write_bytes(data)
    out = tmp_path / "out.idv"
    with pytest.raises(idv.IdvFormatError, match="checksum mismatch") as e:
        idv.convert(src, out)
    assert (e.value.column, e.value.block) == ("x", 1)
    assert sorted(os.listdir(tmp_path)) == ["bad.idv"]


# ---------------------------------------------------------------------------------------------
# Writer.copy_blocks
# ---------------------------------------------------------------------------------------------

def _blocks(f, rows, names=("x",)):
    """copy_blocks' (rows, stored) per block of file `f`'s blocks, for the rows `rows` (a dict
    of whole columns) cut at its block size, the columns `names` copied."""
    rpb = f.columns[0].rows_per_block
    n = len(next(iter(rows.values())))
    b0, b1 = 0, -(-n // rpb)
    stored = {name: list(zip(f[name].stored_blocks(b0, b1), f[name].lookup["raw"][b0:b1]))
              for name in names}
    return [({k: v[b * rpb:(b + 1) * rpb] for k, v in rows.items()},
             {name: s[b] for name, s in stored.items()}) for b in range(b0, b1)]


def test_copy_blocks_with_blocks_encoded_beside(tmp_path):
    """Copied and encoded columns side by side, over several calls and a short last block."""
    src = tmp_path / "src.idv"
    x = np.arange(2500, dtype=np.float32)
    t = np.array([f"v{i}" for i in range(2500)], dtype=object)
    idv.write(src, {"x": x, "t": t}, rows_per_block=1000)
    out = tmp_path / "out.idv"
    with idv.open(src) as f:
        blocks = _blocks(f, {"x": x, "t": t})
        with idv.Writer(out, f.schema, rows_per_block=1000, max_bytes_per_block=None) as w:
            w.copy_blocks(blocks[:2])
            w.copy_blocks(blocks[2:])
        with idv.open(out) as g:
            assert _stored(g, "x") == _stored(f, "x")
            np.testing.assert_array_equal(g["x"].read(), x)
            assert g["t"].read().tolist() == t.tolist()
            assert _stats(g) == _stats(f)


def test_copy_blocks_refuses_what_would_misplace_blocks(tmp_path):
    src = tmp_path / "src.idv"
    x = np.arange(2500, dtype=np.int64)
    idv.write(src, {"x": x}, rows_per_block=1000)
    with idv.open(src) as f:
        blocks = _blocks(f, {"x": x})

        def writer(**how):
            return idv.Writer(io.BytesIO(), f.schema, rows_per_block=1000, **how)
        w = writer()
        with pytest.raises(ValueError, match="fixed block size"):
            w.copy_blocks(blocks[:1])
        w.abort()
        for bad, why in [(({"x": x[:1001]}, blocks[0][1]), "1 to 1000 rows, not 1001"),
                         (({"x": x[:0]}, blocks[0][1]), "1 to 1000 rows, not 0")]:
            w = writer(max_bytes_per_block=None)
            with pytest.raises(ValueError, match=why):
                w.copy_blocks([bad])
            assert w.closed            # aborted: nothing kept
        w = writer(max_bytes_per_block=None)
        with pytest.raises(KeyError, match="'y'"):
            w.copy_blocks([({"x": x[:1000]}, {"y": blocks[0][1]["x"]})])
        w = writer(max_bytes_per_block=None)
        w.write_batch({"x": x[:10]})
        with pytest.raises(ValueError, match="10 rows of one are pending"):
            w.copy_blocks(blocks[:1])
        w.abort()
        w = writer(max_bytes_per_block=None)
        w.copy_blocks(blocks[2:])                  # a short block: the last
        with pytest.raises(ValueError, match="cannot follow a short block"):
            w.write_batch({"x": x[:10]})
        with pytest.raises(ValueError, match="cannot follow a short block"):
            w.copy_blocks(blocks[:1])
        w.abort()
