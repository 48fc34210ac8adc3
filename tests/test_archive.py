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
from reference import MODEL_ZIPS_DIR, model_zip_entries, skip_param

ENTRIES = [pytest.param(z, e, id=f"{z}:{e}") for z, e in model_zip_entries()] or \
    [skip_param(f"model zips missing under {MODEL_ZIPS_DIR} (set IDV_SHARED)")]


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


@pytest.mark.parametrize("magic, what", [(b"PAR1", "a Parquet file"), (None, "a gzip file"),
                                         (b"ARROW1\x00\x00", "an Arrow IPC")])
def test_other_formats_say_what_they_are(tmp_path, magic, what):
    p = tmp_path / "data.idv"
    p.write_bytes(gzip.compress(b"x" * 300) if magic is None else magic + bytes(300))
    with pytest.raises(idv.IdvFormatError, match=f"not an .idv file: this is {what}"):
        idv.open(p)
