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
