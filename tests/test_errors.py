"""IdvFormatError carries where it happened: path, column, block, byte offset as attributes.

The files are written by idv.write into a temporary folder and damaged at the byte offsets
their lookup tables give, so these tests need no reference files.
"""
from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest

import idv

ROWS, RPB = 20, 4
BLOCKS = -(-ROWS // RPB)


@pytest.fixture
def good(tmp_path):
    """A small file: Id (Int32), Features (Vector<Single, 4>), Txt (Text, with metadata);
    test_verify.py uses it too. Without checksums, as ML.NET writes files: the damage must be
    found by the decoders themselves (tests/test_checksums.py has the checksummed files)."""
    path = tmp_path / "data.idv"
    idv.write(path, {"Id": np.arange(ROWS, dtype=np.int32),
                     "Features": np.arange(4 * ROWS, dtype=np.float32).reshape(ROWS, 4),
                     "Txt": [f"t{i}" for i in range(ROWS)]},
              rows_per_block=RPB, metadata={"Txt": {"Note": "hello world"}}, checksums=False)
    return path


def _damage_block(path, column, block):
    """Overwrite one block with bytes that are not DEFLATE; returns the block's offset."""
    with idv.open(path) as f:
        entry = f[column].lookup[block]
    offset, disk = int(entry["offset"]), int(entry["disk"])
    data = bytearray(path.read_bytes())
    data[offset:offset + disk] = b"\xff" * disk
    path.write_bytes(bytes(data))
    return offset


def test_a_damaged_block_names_path_column_block_and_offset(good):
    offset = _damage_block(good, "Features", 2)
    with idv.open(good) as f:
        assert len(f["Features"][:2 * RPB]) == 2 * RPB        # the blocks before it read
        with pytest.raises(idv.IdvFormatError) as ei:
            f["Features"].read()
    e = ei.value
    assert (e.path, e.column, e.column_index, e.block, e.offset) == \
        (str(good), "Features", 1, 2, offset)
    assert e.metadata_kind is None
    assert e.reason == "corrupt compressed data"
    assert str(e) == f"{good}: column 1 'Features' block 2 (byte {offset}): corrupt compressed data"
    assert e.location == f"column 1 'Features' block 2 (byte {offset})"


@pytest.mark.parametrize("kind", ["bytes", "named file", "BytesIO"])
def test_the_path_is_known_for_paths_and_named_file_objects(good, kind):
    offset = _damage_block(good, "Id", 1)
    data = good.read_bytes()
    source = {"bytes": lambda: data, "named file": lambda: open(good, "rb"),
              "BytesIO": lambda: __import__("io").BytesIO(data)}[kind]()
    with idv.open(source) as f, pytest.raises(idv.IdvFormatError) as ei:
        f["Id"].read()
    e = ei.value
    assert (e.column, e.column_index, e.block, e.offset) == ("Id", 0, 1, offset)
    if kind == "named file":
        source.close()
        assert e.path == str(good) and str(e).startswith(f"{good}: column 0 'Id' block 1 ")
    else:
        assert e.path is None and str(e).startswith("column 0 'Id' block 1 ")


def test_a_text_mode_file_object_is_refused_naming_binary_mode(good):
    with open(good, encoding="latin-1") as fo, \
            pytest.raises(TypeError, match=r"binary mode \('rb'\); .*data.idv is open in text"):
        idv.open(fo)
    with pytest.raises(TypeError, match="StringIO is open in text mode"):
        idv.open(__import__("io").StringIO("text"))


def test_errors_at_open_carry_the_header_field(good, tmp_path):
    data = good.read_bytes()
    bad = tmp_path / "bad.idv"
    bad.write_bytes(b"\x00" * 8 + data[8:])
    with pytest.raises(idv.IdvFormatError) as ei:
        idv.open(bad)
    e = ei.value
    assert (e.path, e.offset, e.column, e.block) == (str(bad), 0, None, None)
    assert str(e).startswith(f"{bad}: byte 0: not an .idv file: bad signature ")
    with pytest.raises(idv.IdvFormatError) as ei:
        idv.open(data[:-1])                   # the tail signature no longer fits
    assert ei.value.offset == 32 and ei.value.path is None
    assert str(ei.value).startswith("byte 32: tail offset ")


def test_a_toc_error_names_its_column(good):
    data = bytearray(good.read_bytes())
    toc = struct.unpack_from("<q", data, 24)[0]
    # the second entry's codec name, "VBuffer": make its parameter length run past the TOC
    at = data.index(b"\x07VBuffer", toc) + 8
    data[at] = 0x7F
    with pytest.raises(idv.IdvFormatError) as ei:
        idv.open(bytes(data))
    e = ei.value
    assert (e.column, e.column_index, e.offset) == ("Features", 1, at)
    assert str(e).startswith(f"column 1 'Features' (byte {at}): codec 'VBuffer' declares 127 ")


def test_a_metadata_error_names_the_kind(good):
    with idv.open(good) as f:
        m = f["Txt"].metadata_entries()[0]
    data = bytearray(good.read_bytes())
    data[m.offset:m.offset + m.size] = b"\x07" * m.size
    with idv.open(bytes(data)) as f, pytest.raises(idv.IdvFormatError) as ei:
        f["Txt"].metadata
    e = ei.value
    assert (e.column, e.column_index, e.metadata_kind, e.offset, e.block) == \
        ("Txt", 2, "Note", m.offset, None)
    assert str(e) == f"column 2 'Txt' metadata 'Note' (byte {m.offset}): {e.reason}"


def test_locate_fills_only_what_is_unknown():
    e = idv.IdvFormatError("bad", block=3)
    assert e.locate(column="A", column_index=0, block=7, offset=None) is e
    assert (e.column, e.column_index, e.block, e.offset, e.path) == ("A", 0, 3, None, None)
    assert str(e) == "column 0 'A' block 3: bad"
    assert str(idv.IdvFormatError("bad")) == "bad" and e.args == ("bad",)
    with pytest.raises(TypeError):
        e.locate(row=5)


@pytest.mark.parametrize("cls", [idv.IdvFormatError, idv.UnsupportedCodecError])
def test_a_pickled_error_keeps_its_location(cls):
    e = cls("corrupt compressed data", path="data.idv", column="F", column_index=3,
            metadata_kind="SlotNames", block=5, offset=81920)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and isinstance(back, idv.IdvFormatError)
    assert vars(back) == vars(e) and str(back) == str(e)
    assert str(e) == ("data.idv: column 3 'F' metadata 'SlotNames' block 5 (byte 81920): "
                      "corrupt compressed data")


def test_an_unknown_codec_names_the_column(good):
    data = bytearray(good.read_bytes())
    at = data.rindex(b"\x05Int32")
    data[at + 1:at + 6] = b"Int3X"
    with pytest.warns(idv.IdvWarning, match="column 0 'Id'"):
        f = idv.open(bytes(data))
    with f, pytest.raises(idv.UnsupportedCodecError) as ei:
        f["Id"].read()
    assert (ei.value.column, ei.value.column_index) == ("Id", 0)
    assert "unknown codec 'Int3X'" in ei.value.reason


def test_warnings_name_the_callers_line_from_every_entry_point(good, tmp_path):
    """An IdvWarning points at the line that called idv, however deep in idv it was found:
    a file skipped by a dataset, an unknown codec met by open, verify and read, a filter
    whose statistics are unusable."""
    data = bytearray(good.read_bytes())
    at = data.rindex(b"\x05Int32")
    data[at + 1:at + 6] = b"Int3X"
    unknown = tmp_path / "unknown.idv"
    unknown.write_bytes(bytes(data))
    bad = tmp_path / "bad.idv"
    bad.write_bytes(b"not an idv file")
    times = tmp_path / "times.idv"       # 100-ns ticks that microseconds cannot hold
    idv.write(times, {"t": np.array([100, 300], "datetime64[ns]")})
    calls = {"dataset": lambda: idv.dataset([good, bad], on_bad_file="skip"),
             "floored": lambda: idv.to_arrow(times, datetime="auto-us"),
             "never closed": lambda: idv.Writer(tmp_path / "w.idv", {"x": idv.Int32}).__del__(),
             "open": lambda: idv.open(unknown).close(),
             "verify": lambda: idv.verify(unknown),
             "read": lambda: idv.read(unknown),
             "to_arrow": lambda: idv.to_arrow(unknown)}
    for name, call in calls.items():
        with pytest.warns(idv.IdvWarning) as seen:
            call()
        assert {w.filename for w in seen} == {__file__}, (name, [w.filename for w in seen])


@pytest.mark.parametrize("source", ["path", "bytes", "file object", "dataset"])
@pytest.mark.parametrize("how", ["read", "filter", "to_arrow", "iter_batches"])
def test_a_close_racing_a_read_gives_the_closed_file_error(tmp_path, monkeypatch, source,
                                                           how):
    """A close() in another thread after a read checked that the file is open, before it
    fetched its blocks: the read gets the closed file's ValueError, not an internal error."""
    path = tmp_path / "big.idv"
    rng = np.random.default_rng(0)
    idv.write(path, {"i": np.arange(20_000), "f": rng.random(20_000)}, rows_per_block=1000)
    from idv._store.blocks import BlockStore
    block_bytes = BlockStore.block_bytes

    def closed_then_fetched(store, *args):   # IdvFile.close(): its store's, its source's
        if store._source is not None:
            store._source.close()
            store.close()
        return block_bytes(store, *args)
    monkeypatch.setattr(BlockStore, "block_bytes", closed_then_fetched)
    with open(path, "rb") as handle:
        opened = {"path": lambda: idv.open(path), "bytes": lambda: idv.open(path.read_bytes()),
                  "file object": lambda: idv.open(handle),
                  "dataset": lambda: idv.dataset([path, path])}[source]()
        read = {"read": lambda f: f.read(), "filter": lambda f: f.read(filter=[("f", ">", .5)]),
                "to_arrow": lambda f: f.to_arrow(),
                "iter_batches": lambda f: list(f.iter_batches(batch_size=5000))}[how]
        with pytest.raises(ValueError, match="I/O operation on a closed idv file"):
            read(opened)


@pytest.mark.parametrize("kind", ["bytes", "file object"])
def test_a_closed_source_gives_the_closed_file_error(good, kind):
    """A read that took the source before another thread closed it: the closed file's
    ValueError from the source's own accessors."""
    from idv._storage.source import open_source
    with open(good, "rb") as handle:
        src = open_source(good.read_bytes() if kind == "bytes" else handle)
        src.close()
        for read in (lambda: src.view(0, 8), lambda: src.read_ranges([0], [8])):
            with pytest.raises(ValueError, match="I/O operation on a closed idv file"):
                read()


def test_a_closed_file_keeps_what_opening_read_and_refuses_reads(good):
    """As docs/errors.md says: after close(), reads raise; the header's facts stay."""
    f = idv.open(good)
    f.close()
    assert (f.num_rows, len(f), f.column_names) == (ROWS, ROWS, ["Id", "Features", "Txt"])
    for read in (f.read, lambda: f["Id"].read(), lambda: f["Id"][0], lambda: f.schema,
                 lambda: f["Txt"].metadata, lambda: idv.to_arrow(f)):
        with pytest.raises(ValueError, match="I/O operation on a closed idv file"):
            read()


def test_repr_names_the_place_as_str_does():
    """Logs print repr (a Dask worker's does): it holds the file, column, block and byte."""
    import pickle
    e = idv.IdvFormatError("bad block", path="d.idv", column="x", column_index=2, block=3,
                           offset=99)
    assert repr(e) == "IdvFormatError(\"d.idv: column 2 'x' block 3 (byte 99): bad block\")"
    assert repr(pickle.loads(pickle.dumps(e))) == repr(e)
    assert repr(idv.errors.UnsupportedCodecError("no codec")) == \
        "UnsupportedCodecError('no codec')"
