"""Damaged zip archives (as the fuzzer made them, fuzz/fuzz_archive.py): listing them
(``idv ls``, ``idv.zip_entries``) and opening an entry by ``ARCHIVE:ENTRY`` raise an
IdvFormatError naming the archive, never zipfile's or the OS's errors from deep inside."""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

import idv
from cli_run import run


def _zip(tmp_path, damage=bytes, names=("data.idv", "é.idv")):
    stream = io.BytesIO()
    idv.write(stream, {"x": np.arange(5, dtype=np.int32)})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name in names:
            z.writestr(zipfile.ZipInfo(name), stream.getvalue())
    path = tmp_path / "model.zip"
    path.write_bytes(damage(buf.getvalue()))
    return path


def _member_elsewhere(data):
    """The central directory places the member one byte after its local header: no
    signature there."""
    at = data.index(b"PK\x01\x02") + 42
    return data[:at] + (1).to_bytes(4, "little") + data[at + 4:]


def _directory_beyond(data):
    """The end record places the central directory 100 bytes further on than it is: the
    members' offsets come out before the start of the file."""
    at = data.rindex(b"PK\x05\x06") + 16
    offset = int.from_bytes(data[at:at + 4], "little") + 100
    return data[:at] + offset.to_bytes(4, "little") + data[at + 4:]


def _name_not_utf8(data):
    """The member's name is flagged UTF-8 (as zipfile writes "é.idv"), but its bytes are not."""
    return data.replace("é".encode(), b"\x80\x80")


DAMAGE = [_member_elsewhere, _directory_beyond, _name_not_utf8]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__.strip("_"))
def test_a_damaged_archive_is_a_format_error(tmp_path, damage):
    path = _zip(tmp_path, damage)
    with pytest.raises(idv.IdvFormatError, match="damaged zip archive") as e:
        idv.zip_entries(path)
    assert e.value.path == str(path)
    with pytest.raises(idv.IdvFormatError, match="damaged zip archive"):
        idv.open(f"{path}:data.idv")


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__.strip("_"))
def test_idv_ls_says_the_archive_is_damaged(tmp_path, damage):
    rc, out, err = run("ls", _zip(tmp_path, damage))
    assert rc == 1 and "damaged zip archive" in err and "internal error" not in err, err


def test_an_entry_without_a_name_is_not_listed(tmp_path):
    path = _zip(tmp_path, names=("", "data.idv"))
    assert [e.name for e in idv.zip_entries(path)] == ["data.idv"]
    rc, out, err = run("ls", path)
    assert rc == 0 and "data.idv: 5 rows" in out, (out, err)


def test_a_file_that_only_starts_as_a_zip_is_a_format_error(tmp_path):
    """idv.open lists a zip's entries in its error; a damaged one says it is damaged."""
    pytest.importorskip("aiohttp", reason="remote reads need the remote extra (aiohttp)")
    from http_server import RangeServer

    data = b"PK\x03\x04" + bytes(300)
    path = tmp_path / "x.idv"
    path.write_bytes(data)
    with pytest.raises(idv.IdvFormatError, match="damaged zip archive"):
        idv.open(path)
    with RangeServer({"/x.idv": data}) as srv, \
            pytest.raises(idv.IdvFormatError, match="damaged zip archive"):
        idv.open(srv.url("/x.idv"))


def test_an_archive_with_bytes_before_its_first_member_opens_by_spec(tmp_path):
    """zipfile reads such an archive (a self-extracting one), so zip_entries lists it: each
    spec listed opens."""
    path = _zip(tmp_path, lambda data: bytes(16) + data)
    specs = [e.spec for e in idv.zip_entries(path)]
    assert specs == [f"{path}:data.idv", f"{path}:é.idv"]
    for spec in specs:
        with idv.open(spec) as f:
            assert f["x"].read().tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_a_damaged_bzip2_or_lzma_member_is_a_format_error(tmp_path, method):
    stream = io.BytesIO()
    idv.write(stream, {"x": np.arange(5, dtype=np.int32)})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        z.writestr("data.idv", stream.getvalue())
    data = bytearray(buf.getvalue())
    start = 30 + len("data.idv")                 # the member's compressed bytes
    data[start + 4:start + 12] = bytes(8)
    path = tmp_path / "model.zip"
    path.write_bytes(bytes(data))
    with pytest.raises(idv.IdvFormatError, match="damaged zip archive"):
        idv.zip_entries(path)
