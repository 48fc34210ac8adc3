"""idv.open("model.zip:Entry/Schema.idv"): .idv files inside ML.NET model zips, with either
path separator, and clear errors for a zip, Parquet, gzip or Arrow file given as an .idv.

The entries' values are checked against ML.NET's dumps in test_api.py; here: that the zip
path reaches the same bytes as zipfile does.
"""
from __future__ import annotations

import gzip
import zipfile

import pytest

import idv
from readback import read_quiet, same
from reference import MODEL_ZIPS_DIR, model_zip_entries

ENTRIES = [pytest.param(z, e, id=f"{z}:{e}") for z, e in model_zip_entries()] or \
    [pytest.param(None, None, marks=pytest.mark.skip(
        reason=f"model zips missing under {MODEL_ZIPS_DIR} (set IDV_SHARED)"), id="missing")]


@pytest.mark.parametrize("archive, entry", ENTRIES)
def test_zip_entries_open_by_path_with_either_separator(archive, entry):
    path = MODEL_ZIPS_DIR / archive
    with zipfile.ZipFile(path) as z:
        expected = read_quiet(z.read(entry))
    for spec in (entry.replace("\\", "/"), entry.replace("/", "\\")):
        assert same(read_quiet(f"{path}:{spec}"), expected), spec


def test_missing_entry_and_zip_without_entry_say_what_is_there(tmp_path):
    p = tmp_path / "m.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("DataLoaderModel\\Schema.idv", open(idv.sample_path(), "rb").read())
        z.writestr("readme.txt", "x")
    with idv.open(f"{p}:DataLoaderModel/Schema.idv") as f:
        assert f.num_rows == 240
    with pytest.raises(FileNotFoundError, match=r"no entry 'Nope\.idv'.*DataLoaderModel/Schema\.idv"):
        idv.open(f"{p}:Nope.idv")
    with pytest.raises(idv.IdvFormatError,
                       match=r"this is a zip archive; name an \.idv inside it as .*m\.zip:ENTRY "
                             r"\(\.idv entries: DataLoaderModel/Schema\.idv\)") as e:
        idv.open(p)
    assert e.value.path == str(p) and e.value.offset == 0


@pytest.mark.parametrize("magic, what", [
    (b"PAR1", r"a Parquet file; convert it: idv convert FILE OUT.idv --from parquet "
              r"\(idv.convert\(FILE, OUT, source_format='parquet'\)\)"),
    (None, r"a gzip file; decompress it first \(gunzip\), or pass its bytes"),
    (b"ARROW1\x00\x00", "an Arrow IPC")])
def test_other_formats_say_what_they_are(tmp_path, magic, what):
    p = tmp_path / "data.idv"
    p.write_bytes(gzip.compress(b"x" * 300) if magic is None else magic + bytes(300))
    with pytest.raises(idv.IdvFormatError, match=f"not an .idv file: this is {what}"):
        idv.open(p)
    if magic is None:       # the remedy the message gives works
        sample = tmp_path / "sample.idv.gz"
        sample.write_bytes(gzip.compress(open(idv.sample_path(), "rb").read()))
        with idv.open(gzip.open(sample).read()) as f, idv.open(idv.sample_path()) as g:
            assert f.num_rows == g.num_rows and f.schema == g.schema


@pytest.mark.parametrize("fmt", ["parquet", "feather", "csv"])
def test_the_conversion_a_message_gives_works_whatever_the_file_is_named(tmp_path, fmt):
    """A Parquet, Feather or CSV file named .idv: the message says how to convert it, and
    that conversion works although the name says .idv."""
    pa = pytest.importorskip("pyarrow", reason="Parquet, Feather and CSV are read by pyarrow")
    p = tmp_path / "data.idv"
    table = pa.table({"a": [1, 2, 3]})
    if fmt == "parquet":
        import pyarrow.parquet as pq
        pq.write_table(table, p)
    elif fmt == "feather":
        import pyarrow.feather as pf
        pf.write_feather(table, p)
    else:
        p.write_text("a\n1\n2\n3\n")
    with pytest.raises(idv.IdvFormatError) as e:
        idv.open(p)
    assert f"source_format={fmt!r}" in str(e.value) and f"--from {fmt}" in str(e.value)
    assert idv.convert(p, tmp_path / "out.idv", source_format=fmt) == 3
    assert idv.read(tmp_path / "out.idv")["a"].tolist() == [1, 2, 3]


def _model_zip(tmp_path):
    """A zip as ML.NET models hold IDV streams: one named .idv, one named otherwise, one behind
    an int32 length prefix, a damaged one, and members that are not IDV at all."""
    sample = open(idv.sample_path(), "rb").read()
    p = tmp_path / "model.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("DataLoaderModel\\Loader\\Schema.idv", sample)
        z.writestr("TransformerChain\\Transform_0\\Model.key", sample)
        z.writestr("DataLoaderModel\\Transform_2\\Schema.idv",
                   (len(sample)).to_bytes(4, "little") + sample)
        z.writestr("Broken.idv", sample[:200])                # signature, then nothing
        z.writestr("Version.txt", "1.0.0.0")
        z.writestr("Prefix.bin", (99).to_bytes(4, "little") + sample[:20])  # wrong length
    return p


def test_zip_entries_finds_every_stream_by_signature(tmp_path):
    p = _model_zip(tmp_path)
    got = {e.name: e for e in idv.zip_entries(p)}
    assert sorted(got) == ["Broken.idv", "DataLoaderModel\\Loader\\Schema.idv",
                           "DataLoaderModel\\Transform_2\\Schema.idv",
                           "TransformerChain\\Transform_0\\Model.key"]
    with idv.open(idv.sample_path()) as f:
        schema = f.schema
    for name in ("DataLoaderModel\\Loader\\Schema.idv", "TransformerChain\\Transform_0\\Model.key",
                 "DataLoaderModel\\Transform_2\\Schema.idv"):
        e = got[name]
        assert e.schema == schema and e.num_rows == 240 and e.error is None
        assert e.prefixed == ("Transform_2" in name)
        with idv.open(e.spec) as f:          # the spec opens it
            assert f.num_rows == 240
    assert got["Broken.idv"].schema is None and "truncated" in got["Broken.idv"].error


@pytest.mark.parametrize("archive", ["ep_model1.zip", "termlookup_with_key.zip"])
def test_zip_entries_of_real_model_zips(archive):
    path = MODEL_ZIPS_DIR / archive
    if not path.exists():
        pytest.skip(f"{path} missing (set IDV_SHARED)")
    entries = idv.zip_entries(path)
    with zipfile.ZipFile(path) as z:
        named = sorted(n for n in z.namelist() if n.lower().endswith(".idv"))
    assert sorted(e.name for e in entries) == named
    assert all(e.error is None for e in entries)
    if archive == "ep_model1.zip":       # Transform_002's schema is stored behind a length
        assert [e.prefixed for e in entries] == [False, True]
        assert [len(e.schema) for e in entries] == [9, 1]


def test_cli_ls(tmp_path):
    from cli_run import assert_one_line_error, run
    p = _model_zip(tmp_path)
    rc, out, err = run("ls", p, check_rc=0)
    lines = out.splitlines()
    assert lines[0] == f"{p}: 4 IDV streams"
    assert "DataLoaderModel/Transform_2/Schema.idv: 240 rows, 9 columns" in out
    assert "length-prefixed" in out and "Broken.idv: unreadable" in out
    assert "  Features: Vector<Single, 4>" in lines
    rc, out, err = run("ls", p, "--json", check_rc=0)
    import json
    entries = {e["entry"]: e for e in json.loads(out)["entries"]}
    assert entries["TransformerChain/Transform_0/Model.key"]["num_rows"] == 240
    assert entries["Broken.idv"]["columns"] is None and "error" in entries["Broken.idv"]
    rc, out, err = run("ls", idv.sample_path())
    assert rc == 2
    assert_one_line_error(err, "is not a zip archive")


def test_zip_entries_read_the_archive_directory_once(tmp_path, monkeypatch):
    """idv ls of a zip of many entries opens it once (reopening it per entry made 16,000
    entries never finish)."""
    sample = open(idv.sample_path(), "rb").read()
    p = tmp_path / "many.zip"
    with zipfile.ZipFile(p, "w") as z:
        for i in range(300):
            z.writestr(f"Part{i}/Schema.idv", sample)
    reads = []
    real = zipfile.ZipFile._RealGetContents
    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents",
                        lambda self: (reads.append(1), real(self))[1])
    entries = idv.zip_entries(p)
    assert len(entries) == 300 and all(e.num_rows == 240 for e in entries)
    assert len(reads) == 1


@pytest.mark.parametrize("entry", ["run::1.idv", "data/http://x.idv", "s3://b/k.idv"])
def test_entry_names_that_look_like_urls_are_entries(tmp_path, entry):
    from cli_run import run
    p = tmp_path / "m.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr(entry, open(idv.sample_path(), "rb").read())
    (spec,) = [e.spec for e in idv.zip_entries(p)]
    assert spec == f"{p}:{entry}"
    with idv.open(spec) as f:
        assert f.num_rows == 240
    rc, out, err = run("schema", spec, check_rc=0)
    assert "240 rows" in out or "Features" in out


@pytest.mark.parametrize("archive, entry", ENTRIES)
def test_any_zip_is_recognised_whatever_its_extension(tmp_path, archive, entry):
    """Model Builder saves MLModel.mlnet: a zip under another name, named as
    MLModel.mlnet:ENTRY with either separator, in Python and in the CLI."""
    from cli_run import assert_one_line_error, run
    model = tmp_path / "MLModel.mlnet"
    model.write_bytes((MODEL_ZIPS_DIR / archive).read_bytes())
    with zipfile.ZipFile(model) as z:
        expected = read_quiet(z.read(entry))
    for spec in (entry.replace("\\", "/"), entry.replace("/", "\\")):
        assert same(read_quiet(f"{model}:{spec}"), expected), spec
    if archive != "ep_model1.zip":      # the command line: once
        return
    rc, out, err = run("schema", f"{model}:{entry.replace(chr(92), '/')}", check_rc=0)
    assert out.strip()
    rc, out, err = run("schema", model)
    assert rc != 0
    assert_one_line_error(err, f"{model} is a zip archive; name an entry as {model}:ENTRY")
    assert entry.replace("\\", "/") in err
    rc, out, err = run("ls", model, check_rc=0)
    assert entry.replace("\\", "/") in out
    rc, out, err = run("schema", f"{model}:Nope.idv")
    assert rc != 0 and entry.replace("\\", "/") in err


def _big_zip(tmp_path, monkeypatch, method=zipfile.ZIP_DEFLATED):
    """(columns, the .idv, a zip holding it as Data/Big.idv) with archive.READ_LIMIT made
    smaller than the entry, so that it is inflated into a temporary file."""
    import numpy as np
    from idv._storage import archive
    monkeypatch.setattr(archive, "READ_LIMIT", 64 << 10)
    src = tmp_path / "big.idv"
    cols = {f"c{i}": np.arange(100_000, dtype=np.int64) * i for i in range(4)}
    idv.write(src, cols, rows_per_block=5_000)
    p = tmp_path / "big.zip"
    with zipfile.ZipFile(p, "w", method) as z:
        z.write(src, "Data/Big.idv")
    return cols, src, p


def test_a_large_entry_is_inflated_once(tmp_path, monkeypatch):
    """An entry beyond archive.READ_LIMIT is inflated once (into a temporary file, mapped),
    not again at every backward seek of the reader (a 2 MB zip inflating to 2 GiB took 14 s
    to open), by the streaming DEFLATE library in large steps."""
    import numpy as np
    from idv import compression
    cols, src, p = _big_zip(tmp_path, monkeypatch)
    inflated = []
    real = compression.stream_inflater

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def decompress(self, data, n):
            out = self.inner.decompress(data, n)
            inflated.append(len(out))
            return out

        def __getattr__(self, name):
            return getattr(self.inner, name)
    monkeypatch.setattr(compression, "stream_inflater",
                        lambda: (lambda d, crc: (Counting(d), crc))(*real()))
    with idv.open(f"{p}:Data/Big.idv") as f:
        got = f.read()
    assert all(np.array_equal(got[k], v) for k, v in cols.items())
    assert sum(inflated) == src.stat().st_size


def test_a_large_stored_entry_is_copied_once(tmp_path, monkeypatch):
    """An entry zipfile reads itself (stored, not DEFLATE) is also copied out once."""
    import numpy as np
    cols, src, p = _big_zip(tmp_path, monkeypatch, zipfile.ZIP_STORED)
    copied = []
    real = zipfile.ZipExtFile.read
    monkeypatch.setattr(zipfile.ZipExtFile, "read",
                        lambda self, n=-1: (lambda b: (copied.append(len(b)), b)[1])(
                            real(self, n)))
    with idv.open(f"{p}:Data/Big.idv") as f:
        got = f.read()
    assert all(np.array_equal(got[k], v) for k, v in cols.items())
    assert sum(copied) == src.stat().st_size


@pytest.mark.parametrize("field, value, message", [
    (16, 0x12345678, "Bad CRC-32"),                  # the central directory's CRC-32
    (24, 100_000, "inflates to more than the 100,000 bytes it declares"),   # its size
])
def test_a_large_entry_that_is_not_what_its_directory_says_is_damage(
        tmp_path, monkeypatch, field, value, message):
    import struct
    _, _, p = _big_zip(tmp_path, monkeypatch)
    data = bytearray(p.read_bytes())
    struct.pack_into("<I", data, data.index(b"PK\x01\x02") + field, value)
    p.write_bytes(bytes(data))
    with pytest.raises(idv.IdvFormatError, match=message):
        idv.open(f"{p}:Data/Big.idv")


def test_an_entry_declaring_more_than_the_limit_is_refused_before_inflating(tmp_path):
    import struct
    import zipfile
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("Data/Schema.idv", b"\0" * 1000)
    data = bytearray(path.read_bytes())
    at = data.index(b"PK\x01\x02")                 # its central directory entry
    struct.pack_into("<I", data, at + 24, 3_000_000_000)      # declares 3 GB
    path.write_bytes(bytes(data))
    with pytest.raises(idv.MemoryLimitError, match="bomb.zip:Data/Schema.idv: inflating"):
        idv.open(f"{path}:Data/Schema.idv")       # before a byte is inflated (or written)


def test_an_entry_is_held_to_the_memory_limit_given_to_open(tmp_path):
    """idv.open's memory_limit= bounds what an entry may inflate to, as it bounds a read."""
    p = tmp_path / "model.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(idv.sample_path(), "Data/Schema.idv")
    with idv.open(f"{p}:Data/Schema.idv") as f:      # the default limit: opens
        assert f.num_rows > 0
    with pytest.raises(idv.MemoryLimitError, match="model.zip:Data/Schema.idv: inflating"):
        idv.open(f"{p}:Data/Schema.idv", memory_limit=100)


def test_an_archive_replaced_under_a_dataset_of_its_entries_is_found(tmp_path):
    """A zip entry has its archive's identity, as a file has its own: a dataset that opens
    the entry again (a file closed to stay within max_open_files, a Dask task, a loader's
    worker) after the archive was replaced by one of the same rows and types says so,
    rather than read the new archive's rows under the plan made from the old one."""
    import io
    import os
    import numpy as np

    def zipped(path, x):
        buf = io.BytesIO()
        idv.write(buf, {"x": np.asarray(x, np.float64)})
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("Data/Schema.idv", buf.getvalue())
    zipped(tmp_path / "m.zip", [1, 2])
    zipped(tmp_path / "n.zip", [3, 4])
    entries = [f"{tmp_path / n}:Data/Schema.idv" for n in ("m.zip", "n.zip")]
    with idv.dataset(entries, max_open_files=1) as ds:
        assert ds.read(["x"])["x"].tolist() == [1, 2, 3, 4]
        zipped(tmp_path / "new.zip", [-1, -2])
        os.replace(tmp_path / "new.zip", tmp_path / "m.zip")
        with pytest.raises(idv.IdvFormatError, match=r"m\.zip:Data/Schema\.idv.*changed since "
                                                     r"the dataset listed it"):
            ds.read(["x"])
