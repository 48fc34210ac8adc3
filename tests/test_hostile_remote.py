"""A lying server (tests/http_server.py) against what idv.open fetches: the table of contents
is fetched as far as its entries go, not as far as the header says."""
from __future__ import annotations

import pytest

import idv

pytest.importorskip("aiohttp", reason="remote reads need the remote extra (aiohttp)")
from http_server import RangeServer, Sparse  # noqa: E402


def test_open_fetches_the_table_of_contents_its_entries_need():
    """A file declaring 64 MiB whose header puts the table of contents at byte 256 and the
    tail at the end: open fetches the entries (a few KiB), not the 64 MiB up to the tail."""
    import io

    import numpy as np

    from idv import _header

    out = io.BytesIO()
    idv.write(out, {f"c{i}": np.arange(10, dtype=np.int32) for i in range(30)})
    data = out.getvalue()
    real = _header.parse_header(data[:256], len(data))
    size = 64 << 20
    head = type(real)(real.version, real.compatible_version, 256, size - 8, real.row_count,
                      real.column_count).pack()
    toc = data[real.toc_offset:real.tail_offset]
    files = {"/wide.idv": Sparse(size, {0: head, 256: toc, size - 8: data[-8:]})}
    with RangeServer(files) as srv:
        try:
            idv.open(srv.url("/wide.idv")).close()
        except idv.IdvFormatError:       # its tables are zeros: refused, later
            pass
        assert srv.bytes_served < 1 << 20, srv.ranges


def test_a_table_of_contents_longer_than_a_piece_is_read_whole(tmp_path):
    """Columns whose names take more than the first piece fetched: read in larger pieces,
    with the same columns as from the local file."""
    import numpy as np

    cols = {f"{'n' * 3000}{i}": np.arange(3, dtype=np.int32) + i for i in range(40)}
    path = tmp_path / "named.idv"
    idv.write(path, cols)
    with RangeServer({"/named.idv": path.read_bytes()}) as srv, \
            idv.open(srv.url("/named.idv")) as f:
        assert [c.name for c in f.columns] == list(cols)
        assert np.array_equal(f[f"{'n' * 3000}39"].read(), cols[f"{'n' * 3000}39"])


def test_open_fetches_a_metadata_table_as_far_as_its_entries_go():
    """The table of contents moved to byte 32 MiB of a file declaring 64 MiB: the metadata
    table before it may run up to it, but open fetches its entries (a few bytes), and the
    file reads as the local one."""
    import io

    import numpy as np

    from idv import _header

    out = io.BytesIO()
    idv.write(out, {"v": np.arange(6, dtype=np.float32).reshape(3, 2)},
              metadata={"v": {"SlotNames": ["a", "b"]}})
    data = out.getvalue()
    real = _header.parse_header(data[:256], len(data))
    size, toc_at = 64 << 20, 32 << 20
    head = type(real)(real.version, real.compatible_version, toc_at, size - 8, real.row_count,
                      real.column_count).pack()
    files = {"/far.idv": Sparse(size, {0: head, 256: data[256:real.toc_offset],
                                       toc_at: data[real.toc_offset:real.tail_offset],
                                       size - 8: data[-8:]})}
    with RangeServer(files) as srv:
        with idv.open(srv.url("/far.idv")) as f:
            assert f["v"].read().tolist() == [[0, 1], [2, 3], [4, 5]]
            assert list(f["v"].metadata["SlotNames"]) == ["a", "b"]
        assert srv.bytes_served < 1 << 20, srv.ranges


def _versions(n=40_000):
    """Two versions of one file, of the same size and rows, whose values differ; without
    checksums (as ML.NET writes), so that only the answers' validators tell them apart."""
    import io

    import numpy as np

    out = []
    for v in (1, 2):
        buf = io.BytesIO()
        idv.write(buf, {"x": np.full(n, v, np.int64)}, rows_per_block=n // 4,
                  compression="none", checksums=False, statistics=False)
        out.append(buf.getvalue())
    assert len(out[0]) == len(out[1])
    return out


def test_a_weak_etag_tells_a_file_replaced_while_reading():
    """A server that sends only a weak ETag (nothing to send as If-Match): an answer of
    another version carries another one, and is refused, never read next to the first."""
    first, second = _versions()
    with RangeServer({"/w.idv": first}) as srv:
        srv.validators = "weak"
        with idv.open(srv.url("/w.idv")) as f:
            assert f["x"][:10_000].tolist() == [1] * 10_000
            srv.files["/w.idv"] = second
            with pytest.raises(idv.RemoteError, match=r"/w\.idv: the file changed while "
                                                      r"reading \(opened as ETag W/"):
                f["x"][10_000:]


def test_a_server_without_validators_is_told_at_open():
    """No ETag and no Last-Modified: nothing tells a file replaced while it is read, and
    opening it says so; a server sending either says nothing."""
    import warnings

    first, _ = _versions()
    with RangeServer({"/n.idv": first}) as srv:
        srv.validators = "none"
        with pytest.warns(idv.IdvWarning, match=r"/n\.idv: the server sends neither an ETag "
                                                r"nor a Last-Modified"):
            idv.open(srv.url("/n.idv")).close()
        srv.validators = "weak"
        with warnings.catch_warnings():
            warnings.simplefilter("error", idv.IdvWarning)
            idv.open(srv.url("/n.idv")).close()


def test_the_whole_file_fetch_is_retried(monkeypatch):
    """A server that ignores Range: its one fetch of the whole file is retried after a
    transient failure, as every request is."""
    from idv._storage import remote

    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    first, _ = _versions()
    with RangeServer({"/a.idv": first}) as srv:
        srv.mode = "no-range"
        # the size, the open's two ranges (each answered whole), then the whole file: a 503
        srv.failing["/a.idv"] = [None, None, None, 503]
        with pytest.warns(idv.IdvWarning, match="whole file"), \
                idv.open(srv.url("/a.idv")) as f:
            assert f["x"][-3:].tolist() == [1, 1, 1]
        assert srv.failing["/a.idv"] == [] and srv.requests == 4


@pytest.mark.parametrize("limit", [None, 1024], ids=["in-memory", "spilled"])
@pytest.mark.parametrize("mode,why", [
    ("no-range-cut", r"\d+ bytes of \d+: the answer was truncated"),
    ("no-range-long", r"the server sent more than the \d+ bytes it announced")],
    ids=["cut-short", "longer"])
def test_a_whole_file_fetch_of_another_size_is_a_remote_error(limit, mode, why):
    """The whole file of a server that ignores Range, cut short or longer than the size it
    announced: idv.RemoteError naming the URL, in memory or spilled to a temporary file
    (above the memory limit), never a file read as corrupt."""
    first, _ = _versions()
    with RangeServer({"/a.idv": first}) as srv:
        srv.mode = mode
        idv.set_memory_limit(limit)
        try:
            with pytest.warns(idv.IdvWarning, match="whole file"), \
                    pytest.raises(idv.RemoteError, match=r"/a\.idv: fetching the whole "
                                                         r"file: " + why):
                idv.open(srv.url("/a.idv"), memory_limit=1 << 30)
        finally:
            idv.set_memory_limit(None)


def test_a_file_stored_gzip_encoded_is_named_as_such():
    """A file stored with Content-Encoding: gzip (its ranges are of the encoded bytes; fsspec
    drops its size): the error names the encoding, not a missing Content-Length."""
    import gzip

    first, _ = _versions()
    with RangeServer({"/g.idv": gzip.compress(first)}) as srv:
        srv.encodings["/g.idv"] = "gzip"
        with pytest.raises(idv.RemoteError, match=r"/g\.idv: the server sends the file "
                                                  r"gzip-encoded \(Content-Encoding: gzip\)"):
            idv.open(srv.url("/g.idv"))
