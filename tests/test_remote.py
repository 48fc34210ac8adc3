"""Remote files through fsspec (idv._storage.remote): URLs, filesystem objects, ranged reads.

The HTTP tests run a real server on 127.0.0.1 (tests/http_server.py) that honours Range and
counts the requests and body bytes it serves; the S3 test runs moto's S3-compatible server on
127.0.0.1 and reads through s3fs. No traffic leaves the machine.
"""
from __future__ import annotations

import io
import json
import os
import re
import socket
import sys
import tempfile
import time
import warnings
import zipfile

import numpy as np
import pytest

import dumpcheck as dc
import idv
from expected import assert_equal_reads
import http_server
from http_server import RangeServer
from idv._scan import scan
from idv._storage import remote, remote_requests
from reference import SAMPLE_DIR, fixture_files, model_zip_entries, shared_path

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

SAMPLE = fixture_files("sample", SAMPLE_DIR)
with open(idv.sample_path(), "rb") as _f:
    SAMPLE_BYTES = _f.read()


def twelve_columns(rows=200_000):
    """12 columns of mixed compressibility (Double, Int32, Single, Int64, Boolean)."""
    rng = np.random.default_rng(11)
    cols = {}
    for i in range(12):
        kind = i % 4
        if kind == 0:
            cols[f"d{i}"] = np.round(rng.normal(size=rows) * 100, 2)
        elif kind == 1:
            cols[f"i{i}"] = rng.integers(0, 1000, rows).astype(np.int32)
        elif kind == 2:
            cols[f"f{i}"] = rng.random(rows, dtype=np.float32)
        else:
            cols[f"l{i}"] = np.cumsum(rng.integers(0, 50, rows)).astype(np.int64)
    return cols


@pytest.fixture(scope="module")
def wide_file(tmp_path_factory):
    """(path, bytes, columns) of a 12-column file of 200,000 rows written by idv."""
    cols = twelve_columns()
    p = tmp_path_factory.mktemp("remote") / "wide.idv"
    idv.write(p, cols)
    return p, p.read_bytes(), cols


def frame_bytes(f):
    """The bytes of the header, the table of contents and tail, and every lookup table."""
    h = f.header
    lookups = sum(16 * c.num_blocks for c in f.columns)
    return 256 + (h.tail_offset + 8 - h.toc_offset) + lookups


# ---- what goes over the wire -----------------------------------------------------------------

def test_one_column_of_twelve_transfers_its_blocks_and_the_tables(wide_file):
    path, data, cols = wide_file
    with idv.open(path) as f:
        disk = f["d4"].nbytes_disk
        allowance = frame_bytes(f)
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            opened = srv.bytes_served
            srv_open_requests = srv.requests
            values = f["d4"].read()
        assert np.array_equal(values, cols["d4"])
        total = srv.bytes_served
        assert total <= 1.1 * disk + allowance, (total, disk, allowance)
        # the open: header and tail, in few requests, and no block of a column besides them
        # (over HTTP the tail is asked before the size is known: the largest guess)
        assert srv_open_requests <= 3
        assert opened <= allowance + remote.TAIL_GUESS[1]
        assert total - opened <= 1.1 * disk
        assert max(b - a for a, b in srv.ranges) < len(data) / 4   # never the whole file


@pytest.mark.parametrize("kind", [None, "application/octet-stream"])
def test_a_dataset_of_a_file_url_fetches_its_tables_alone(wide_file, kind):
    """idv.dataset (scan_idv, arrow_dataset) of one file's URL fetches what opening it does,
    not the whole file (whose body fsspec's isdir reads to look for links); a page the server
    calls HTML is a directory, its .idv links the files."""
    path, data, cols = wide_file
    page = b'<html><a href="wide.idv">wide.idv</a> <a href="notes.txt">notes</a></html>'
    files = {"/d/wide.idv": data, "/d/wide": data, "/d/": page, "/d/notes.txt": b"x"}
    with RangeServer(files) as srv:
        srv.content_types.update({"/d/wide.idv": kind, "/d/wide": kind, "/d/": "text/html"})
        for name in ("/d/wide.idv", "/d/wide"):     # named .idv: a file without asking
            srv.reset_counts()
            with idv.dataset(srv.url(name)) as ds:
                assert ds.num_rows == len(cols["d0"])
            assert srv.bytes_served <= 0.1 * len(data), (srv.bytes_served, len(data))
            # asked whether it is a page; opening it asks no HEAD
            assert srv.heads == (0 if name == "/d/wide.idv" else 1), (name, srv.heads)
            with pytest.raises(TypeError, match="refused an option"):     # not "no such file"
                idv.dataset(srv.url(name), storage_options={"bogus": 1})
        with idv.dataset(srv.url("/d/")) as ds:
            assert [f.path for f in ds.files] == [srv.url("/d/wide.idv")]
            assert np.array_equal(ds.read(columns=["l3"])["l3"], cols["l3"])


def test_a_manifest_that_cannot_be_read_now_is_not_taken_for_none(monkeypatch):
    """A directory's _idv_files.json names the files its writer published; one answered
    with a transient 503 is asked again, one refused (403) is the PermissionError naming it:
    neither is read as "no manifest", which would add the leftovers (part-2) to the data.
    Only a manifest that is not there (404) means every .idv file."""
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    files = {f"/d/part-{k}.idv": _one_valued(k) for k in range(3)}
    links = "".join(f'<a href="{p[3:]}">x</a>' for p in [*files, "/d/_idv_files.json"])
    files["/d/"] = f"<html>{links}</html>".encode()
    manifest = "/d/_idv_files.json"
    files[manifest] = json.dumps({"files": ["part-0.idv", "part-1.idv"]}).encode()
    with RangeServer(files) as srv:
        srv.content_types["/d/"] = "text/html"
        srv.failing[manifest] = [503, 503, 503]     # its size (HEAD, then GET), and again
        with idv.dataset(srv.url("/d/")) as ds:
            assert np.unique(ds.read()["x"]).tolist() == [0, 1]
        assert srv.failing[manifest] == []
        srv.failing[manifest] = [503] * 100         # still failing: said as the server says it
        with pytest.raises(idv.RemoteError) as e:
            idv.dataset(srv.url("/d/"))
        assert str(e.value).endswith(f"{srv.url(manifest)}: asking for the file's size "
                                     f"failed: HTTP 503 Service Unavailable"), str(e.value)
        srv.failing[manifest] = []
        srv.forbidden.add(manifest)
        with pytest.raises(PermissionError, match=re.escape(f"'{srv.url(manifest)}'")):
            idv.dataset(srv.url("/d/"))
        del srv.files[manifest]
        srv.forbidden.clear()
        with idv.dataset(srv.url("/d/")) as ds:
            assert np.unique(ds.read()["x"]).tolist() == [0, 1, 2]


def test_a_listing_is_asked_for_as_a_read_is(monkeypatch):
    """A dataset of an HTTP directory: the question of what the URL is and its listing are
    retried while the server fails in a way that may pass (503), an error naming the URL when
    it goes on failing (never the page read as an .idv), and within timeout=."""
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    files = {f"/d/part-{k}.idv": _one_valued(k) for k in range(2)}
    files["/d/"] = ("<html>" + "".join(f'<a href="{p[3:]}">x</a>' for p in files) +
                    "</html>").encode()
    with RangeServer(files) as srv:
        srv.content_types["/d/"] = "text/html"
        srv.failing["/d/"] = [503, 503]
        with idv.dataset(srv.url("/d/")) as ds:
            assert np.unique(ds.read()["x"]).tolist() == [0, 1]
        srv.failing["/d/"] = [500] * 20
        with pytest.raises(idv.RemoteError, match=re.escape(srv.url("/d/")) + ".*HTTP 500"):
            idv.dataset(srv.url("/d/"))
        srv.failing["/d/"] = []
        srv.mode, srv.stall_seconds = "stall", 30
        t0 = time.monotonic()
        with pytest.raises(idv.RemoteTimeoutError, match="no answer within 1 s"):
            idv.dataset(srv.url("/d/"), timeout=1)
        assert time.monotonic() - t0 < 10


@pytest.mark.parametrize("page", [b"<!DOCTYPE HTML><html><body></body></html>",
                                  b'<html><a href="notes.txt">notes</a></html>'])
def test_a_page_of_links_to_no_idv_files_is_a_directory_without_them(page):
    """A dataset of an HTML page (a directory listing) that links to no .idv file: no .idv
    files there, as for an empty local directory; the page is never read as an .idv."""
    with RangeServer({"/d/": page, "/d/notes.txt": b"x"}) as srv:
        srv.content_types["/d/"] = "text/html; charset=utf-8"
        with pytest.raises(FileNotFoundError,
                           match=re.escape(f"no .idv files in '{srv.url('/d/')}'")):
            idv.dataset(srv.url("/d/"))


def test_a_dataset_of_small_remote_files_fetches_their_blocks_together():
    """A whole read of a dataset of small files over HTTP (read together in one run) fetches
    their blocks in one concurrent round, not a file after another; the values as written.
    Each file is larger than the tail its open reads (random ids: they do not compress)."""
    files, want = {}, []
    rng = np.random.default_rng(5)
    for i in range(6):
        ids = rng.integers(0, 1 << 62, 1000 * (remote.TAIL_GUESS[1] // 4000))
        buf = io.BytesIO()
        idv.write(buf, {"Id": ids, "s": [f"v{j % 1000}" for j in range(len(ids))]})
        files[f"/p{i}.idv"] = buf.getvalue()
        want.append(ids)
    with RangeServer(files) as srv:
        srv.delay = 0.05            # each answer waits, so that requests in flight overlap
        with idv.dataset([srv.url(p) for p in sorted(files)]) as ds:
            srv.reset_counts()
            srv.max_in_flight = 0
            got = idv.to_arrow(ds, columns=["Id", "s"])
        assert got.column("Id").to_pylist() == np.concatenate(want).tolist()
        assert got.column("s").to_pylist()[999::1000] == ["v999"] * (len(got) // 1000)
        assert srv.max_in_flight >= 3, srv.max_in_flight


def test_tables_beyond_the_tail_guess_come_in_one_more_request(tmp_path):
    """Small blocks: the lookup tables (12 x 500 entries, 96 KB) outrun the open's tail
    read; they come in one batch, as one request (they lie side by side)."""
    cols = twelve_columns(5_000)
    p = tmp_path / "small_blocks.idv"
    idv.write(p, cols, rows_per_block=10)
    data = p.read_bytes()
    with idv.open(p) as f:
        tables = frame_bytes(f)
    assert tables > 4 * remote.tail_guess(len(data))
    with RangeServer({"/s.idv": data}) as srv:
        with idv.open(srv.url("/s.idv"), checksums=False) as f:
            assert srv.heads == 0 and srv.requests == 3, (srv.heads, srv.requests)
            assert srv.bytes_served <= tables + remote.TAIL_GUESS[1]
            assert np.array_equal(f["i5"][1_234:1_260], cols["i5"][1_234:1_260])
    # checked (the default): the checksum table (24 bytes a block, 144 KB here) is beyond
    # the tail read too, and comes in one request of its own; the tables are fetched once
    with RangeServer({"/s.idv": data}) as srv:
        with idv.open(srv.url("/s.idv")) as f:
            assert f.has_checksums
            assert srv.heads == 0 and srv.requests == 4, (srv.heads, srv.requests)
            sums_bytes = 24 * (12 * 500 + 13)
            assert srv.bytes_served <= tables + sums_bytes + remote.TAIL_GUESS[1]
            assert np.array_equal(f["i5"][1_234:1_260], cols["i5"][1_234:1_260])


def test_every_column_reads_as_the_local_file(wide_file):
    path, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            got = f.read()
            rows = f["l3"][12_345:12_350]
            one = f["f2"][-1]
    assert got.keys() == cols.keys()
    for k in cols:
        assert np.array_equal(got[k], cols[k]), k
    assert np.array_equal(rows, cols["l3"][12_345:12_350])
    assert one == cols["f2"][-1]


def test_a_whole_read_fetches_its_blocks_in_few_requests(wide_file):
    """read() and to_arrow() of a remote file fetch the selected columns' blocks up front,
    coalesced (capped at remote_requests.MAX_REQUEST bytes a request), not a request per block
    and column; what they hold is dropped when they return."""
    path, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            blocks = sum(c.num_blocks for c in f.columns)
            disk = sum(c.nbytes_disk for c in f.columns)
            srv.reset_counts()
            got = f.read()
            assert srv.requests <= disk // remote_requests.MAX_REQUEST + 3, (srv.requests, blocks)
            srv.reset_counts()
            table = idv.to_arrow(f, ["i1", "f2"])        # blocks far apart: fewer requests
            assert srv.requests < f["i1"].num_blocks + f["f2"].num_blocks
            srv.reset_counts()
            f["i1"][:10]                # held no more: fetched again
            assert srv.requests >= 1
            ahead = f["i1"].nbytes_disk + f["f2"].nbytes_disk
            one_per_block = f["i1"].num_blocks + f["f2"].num_blocks
            assert max(f["i1"].nbytes, f["f2"].nbytes) < ahead
        # blocks that would not fit the memory limit beside the read's output are not fetched
        # ahead: each column's read fetches its own (one request each, as they are not
        # contiguous), within the limit
        output = f["i1"].nbytes + f["f2"].nbytes
        with idv.open(srv.url("/wide.idv"), memory_limit=output + ahead - 1) as f:
            srv.reset_counts()
            small = f.read(["i1", "f2"])
            assert srv.requests == one_per_block
    for k in cols:
        assert np.array_equal(got[k], cols[k]), k
    assert np.array_equal(table.column("f2").to_numpy(), cols["f2"])
    assert np.array_equal(small["i1"], cols["i1"])


def test_a_row_slice_fetches_only_its_blocks(wide_file):
    path, data, cols = wide_file
    with idv.open(path) as f:
        col = f["i1"]
        b = col.block_rows(3)
        block = col.lookup[3]
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            srv.reset_counts()
            got = f["i1"][b[0] + 10:b[0] + 20]
        assert np.array_equal(got, cols["i1"][b[0] + 10:b[0] + 20])
        assert srv.ranges == [(int(block["offset"]), int(block["offset"] + block["disk"]))]


def test_requests_go_out_concurrently(wide_file):
    """With every answer delayed, one column's 25 blocks (one batch, one thread) are in flight
    together: the read takes far less than 25 delays."""
    path, data, _ = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv"), threads=1) as f:
            blocks = f["d0"].num_blocks
            srv.delay = 0.2
            t0 = time.perf_counter()
            f["d0"].read()
            took = time.perf_counter() - t0
        assert srv.max_in_flight > 1
    assert blocks >= 20 and took < blocks * 0.2 / 2, (blocks, took)


def _random_columns(names, rows, seed=4):
    """Columns of random float64 (they do not compress: a file larger than an open's tail)."""
    rng = np.random.default_rng(seed)
    return {n: rng.random(rows) for n in names}


@pytest.fixture
def deep_backlog(monkeypatch):
    """A test server whose listen queue takes many connections at once (5 by default: more
    arriving together wait for the kernel to retry, a second later)."""
    monkeypatch.setattr(http_server._Quiet, "request_queue_size", 256)


def test_a_column_of_many_blocks_is_fetched_in_one_round(deep_backlog):
    """read() of a column of 40 blocks, each a block of the other columns apart (a request
    each), with every answer delayed: all its requests are in flight at once, not a few at a
    time."""
    cols = _random_columns(["a", "b", "c"], 40_000)
    buf = io.BytesIO()
    idv.write(buf, cols, rows_per_block=1000)
    with RangeServer({"/m.idv": buf.getvalue()}) as srv:
        with idv.open(srv.url("/m.idv")) as f:
            srv.reset_counts()
            srv.delay, srv.max_in_flight = 0.2, 0
            assert np.array_equal(f.read(["a"])["a"], cols["a"])
        assert srv.requests > 30, srv.requests          # not merged: a request per block
        # (nearly) all at once: a thread scheduled late may miss the others' 0.2 s
        assert srv.max_in_flight > 24, (srv.max_in_flight, srv.requests)


def test_an_http_open_is_one_round_of_two_requests(wide_file):
    """Opening a file over HTTP: its header and its tail (a suffix range, whose Content-Range
    gives the size) in two GETs at once, no HEAD; later requests pin the version seen."""
    _, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        srv.delay = 0.1
        seen = []
        srv.on_request = seen.append
        with idv.open(srv.url("/wide.idv")) as f:
            assert (srv.heads, srv.requests, srv.max_in_flight) == (0, 2, 2)
            assert sorted(h["Range"] for h in seen) == [
                "bytes=-65536", f"bytes=0-{256 + 8 - 1}"]
            assert f.num_rows == len(cols["d0"])
            assert np.array_equal(f["d0"][:10], cols["d0"][:10])
        assert "If-Match" not in seen[0] and seen[2]["If-Match"] == http_server.etag(data)


def test_a_row_selection_fetches_every_column_in_one_round(tmp_path):
    """read(rows=...) of a file of 30 columns (a file's, a dataset's, idv.read's): the blocks
    that hold the rows, of all columns, fetched together (they lie side by side: one request),
    not a request per column one after another."""
    cols = _random_columns([f"c{i}" for i in range(30)], 20_000)
    buf = io.BytesIO()
    idv.write(buf, cols, rows_per_block=2000)
    with RangeServer({"/w.idv": buf.getvalue(), "/w2.idv": buf.getvalue()}) as srv:
        url = srv.url("/w.idv")
        with idv.open(url) as f, idv.dataset([srv.url("/w2.idv"), url]) as ds:
            for read, rows, want in [
                    (f.read, slice(0, 5), slice(0, 5)),
                    (f.read, [3, 2001, -1], [3, 2001, -1]),
                    (ds.read, slice(20_003, 20_008), slice(3, 8)),
                    (lambda rows: idv.read(url, rows=rows), slice(4, 9), slice(4, 9))]:
                srv.reset_counts()
                got = read(rows=rows)
                assert all(np.array_equal(got[k], cols[k][want]) for k in cols)
                assert srv.requests - (2 if read not in (f.read, ds.read) else 0) <= 3, \
                    (rows, srv.requests)


def test_a_remote_dataset_opens_many_files_at_once(deep_backlog):
    """The files of a remote dataset are opened many at a time (two requests each, with
    every answer delayed: all in flight together), in their order."""
    files = {f"/p{i:02d}.idv": _one_valued(i) for i in range(24)}
    with RangeServer(files) as srv:
        srv.delay = 0.2
        with idv.dataset([srv.url(p) for p in sorted(files)]) as ds:
            assert np.unique(ds.read()["x"]).tolist() == list(range(24))
        assert srv.heads == 0 and srv.requests == 2 * 24, (srv.heads, srv.requests)
        assert srv.max_in_flight > 32, srv.max_in_flight      # (nearly) all at once


def test_small_remote_files_stay_open_by_their_bytes_beyond_the_file_limit():
    """A dataset of more small files than a remote dataset keeps handles for (64) keeps them
    all, each brought whole by its open: a read after the open, and a second one, ask the
    server nothing. It reopened every file beyond the 64th for each read, two requests each,
    one after another (754 requests and 5.8 s for 220 files at 30 ms)."""
    limit = idv._reader.dataset.DEFAULT_MAX_OPEN_REMOTE
    n = limit + 6
    files = {f"/p{i:03d}.idv": _one_valued(i) for i in range(n)}
    with RangeServer(files) as srv:
        with idv.dataset([srv.url(p) for p in sorted(files)]) as ds:
            assert ds.max_open_files == limit
            srv.reset_counts()
            for _ in range(2):
                assert np.unique(ds.read()["x"]).tolist() == list(range(n))
            assert idv.to_arrow(ds).num_rows == len(ds)
            assert ds.num_open_files == n
        assert srv.requests == 0, srv.requests
        # a server that ignores Range: each file fetched whole once (one warning each), kept
        srv.mode = "no-range"
        with pytest.warns(idv.IdvWarning) as said:
            ds = idv.dataset([srv.url(p) for p in sorted(files)])
        with ds:
            srv.reset_counts()
            assert np.unique(ds.read()["x"]).tolist() == list(range(n))
            assert srv.requests == 0 and ds.num_open_files == n, srv.requests
        assert len(said) == n


def test_a_stream_fetches_each_windows_blocks_together_ahead(wide_file):
    """A stream of batches of a remote file (the scan behind iter_batches, the engines and the
    loaders) requests each window's blocks of every column together when it queues the
    window: a few coalesced requests a window, not one a block and column. The batches are
    the local file's, and nothing stays held once the stream ends. Where the memory limit
    leaves no room for the fetched bytes beside the windows queued, each block is fetched as
    its piece is decoded."""
    path, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            blocks = sum(c.num_blocks for c in f.columns)
            srv.reset_counts()
            got = list(f.iter_batches())
            assert srv.requests < blocks / 10, (srv.requests, blocks)
            srv.reset_counts()
            f["i1"][:10]                # held no more: fetched again
            assert srv.requests == 1
        with idv.open(srv.url("/wide.idv"), memory_limit=8 << 20) as f:
            srv.reset_counts()
            tight = list(f.iter_batches(columns=["i1"]))
            assert srv.requests == f["i1"].num_blocks
    for k in cols:
        assert np.array_equal(np.concatenate([b[k] for b in got]), cols[k]), k
    assert np.array_equal(np.concatenate([b["i1"] for b in tight]), cols["i1"])


def test_small_windows_of_a_stream_are_fetched_while_the_ones_before_are_handed_out(
        monkeypatch):
    """Windows small enough to be decoded in the calling thread are decoded when the stream
    hands them out, not when they are queued, and the blocks of scan.EARLY windows beyond
    those queued are requested too: the windows queued and those after them are on their way
    together (4 requests at once from the start: two queued, two early), not one window's
    round trip after another's."""
    monkeypatch.setattr(scan, "WINDOW_BYTES", 64 << 10)       # a block a window
    x = np.random.default_rng(5).integers(0, 1 << 62, 8 * 8192)
    buf = io.BytesIO()
    idv.write(buf, {"x": x}, rows_per_block=8192)
    with RangeServer({"/a.idv": buf.getvalue()}) as srv:
        with idv.open(srv.url("/a.idv")) as f:
            srv.delay = 0.05
            srv.reset_counts()
            srv.max_in_flight = 0
            got = np.concatenate([b["x"] for b in f.iter_batches()])
            assert srv.requests == 8
            assert srv.max_in_flight >= scan.AHEAD + scan.EARLY
    assert np.array_equal(got, x)


def test_a_scan_with_none_ahead_requests_only_the_window_it_hands_out(wide_file):
    """A consumer that may stop at any batch (the command line into `head`) scans with no
    window ahead: its first batch requests that window's blocks alone, none early."""
    path, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            srv.reset_counts()
            batches = scan.scan(f, ["i1"], batch_rows=8192, window_bytes=1, ahead=0)
            first = next(batches)
            assert srv.requests == 1
            batches.close()
    assert np.array_equal(first.values[0][:10], cols["i1"][:10])


def test_a_stream_whose_window_fetch_fails_says_where(wide_file, monkeypatch):
    """A server failing while a stream's window is fetched ahead: idv.RemoteError naming the
    URL and the bytes, raised where the stream hands out that window's batch, as a read
    fetching its own blocks raises it."""
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    path, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            srv.statuses = [500] * 100
            with pytest.raises(idv.RemoteError, match=r"/wide\.idv: reading bytes \d+-\d+.*"
                                                      r"HTTP 500") as e:
                list(f.iter_batches())
            assert e.value.url == srv.url("/wide.idv")
            srv.statuses = []
            assert np.array_equal(f["i1"].read(), cols["i1"])     # the file reads again


def test_coalescing_merges_near_ranges_and_bounds_the_waste():
    starts = np.array([0, 100, 100 + 1000, 5000, 5000, 50_000])
    stops = np.array([100, 1100, 2000, 6000, 5500, 60_000])
    # touching and overlapping ranges merge; a 3000-byte gap after 2000 bytes wanted does not
    # (3000 > 1/16 of 3000), nor the 44,000-byte hole
    assert remote_requests.coalesce(starts, stops) == [(0, 2000), (5000, 6000), (50_000, 60_000)]
    # a small gap between large ranges merges, within the waste bound
    assert remote_requests.coalesce(np.array([0, 20_100]), np.array([20_000, 40_000])) == [(0, 40_000)]
    assert remote_requests.coalesce(np.array([0, 20_100]), np.array([20_000, 40_000]), hole=50) == \
        [(0, 20_000), (20_100, 40_000)]
    # requests are capped (then fetched concurrently), a larger range stays whole
    got = remote_requests.coalesce(np.arange(0, 100, 10), np.arange(10, 110, 10), max_request=30)
    assert got == [(0, 30), (30, 60), (60, 90), (90, 100)]
    assert remote_requests.coalesce(np.array([0]), np.array([100]), max_request=30) == [(0, 100)]
    # the bytes fetched over the bytes wanted stay within 1 + 1/16 for any layout
    rng = np.random.default_rng(3)
    for _ in range(200):
        sizes = rng.integers(1, 20_000, 50)
        gaps = rng.integers(0, 10_000, 50)
        s = np.cumsum(gaps + np.r_[0, sizes[:-1]])
        e = s + sizes
        runs = remote_requests.coalesce(s, e)
        fetched = sum(b - a for a, b in runs)
        assert fetched <= sizes.sum() * (1 + 1 / 16)
        for a, b in zip(s, e):
            assert any(r0 <= a and b <= r1 for r0, r1 in runs)


# ---- ML.NET's files --------------------------------------------------------------------------

@pytest.mark.parametrize("case", SAMPLE or [None], ids=[c.id for c in SAMPLE] or ["missing"])
def test_mlnet_files_over_http_read_as_mlnet_reads_them(case):
    if case is None:
        pytest.skip(f"sample fixtures missing: {SAMPLE_DIR} (set IDV_SHARED)")
    with RangeServer({"/f.idv": case.idv_path.read_bytes()}) as srv:
        with dc.open_quietly(srv.url("/f.idv")) as f:
            dc.check_file(f, case.sidecar)


def test_a_model_zip_entry_through_fsspec_zip_chaining():
    entries = model_zip_entries()
    if not entries:
        pytest.skip("the ML.NET model zips are missing (set IDV_SHARED)")
    name, entry = next((z, e) for z, e in entries if "Schema" in e)   # length-prefixed
    zp = shared_path("mlnet-files", "model-zips", name)
    local = idv.read(f"{zp}:{entry}")
    with idv.open(f"zip://{entry}::file://{zp}") as f:
        got = f.read()
    assert got.keys() == local.keys()
    for k in local:
        assert_equal_reads(got[k], local[k])


# ---- URLs and filesystems ----------------------------------------------------------------------

def test_memory_url_and_filesystem_object(wide_file):
    import fsspec
    path, data, cols = wide_file
    fs = fsspec.filesystem("memory")
    fs.pipe("/idv-tests/wide.idv", data)
    try:
        got = idv.read("memory://idv-tests/wide.idv", columns=["d8", "i5"])
        assert np.array_equal(got["d8"], cols["d8"]) and np.array_equal(got["i5"], cols["i5"])
        with idv.open("idv-tests/wide.idv", filesystem=fs) as f:
            assert np.array_equal(f["l7"].read(), cols["l7"])
        with pytest.raises(FileNotFoundError, match="memory:///idv-tests/none.idv"):
            idv.open("idv-tests/none.idv", filesystem=fs)
    finally:
        fs.rm("/idv-tests", recursive=True)


def test_file_url_keeps_the_memory_map(wide_file, monkeypatch):
    path, _, cols = wide_file
    url = path.as_uri()

    def no_ranges(*args):
        raise AssertionError("a file:// URL read by ranges, not memory-mapped")
    monkeypatch.setattr(remote, "RemoteSource", no_ranges)
    with idv.open(url) as f:
        assert np.array_equal(f["f6"].read(), cols["f6"])
    with pytest.raises(FileNotFoundError):
        idv.open(url + ".missing")


def test_pyarrow_filesystem(wide_file):
    pafs = pytest.importorskip("pyarrow.fs")
    path, _, cols = wide_file
    with idv.open(str(path), filesystem=pafs.LocalFileSystem()) as f:
        assert np.array_equal(f["d4"].read(), cols["d4"])


_TAKE_URL = {
    "read": lambda url, **kw: idv.read(url, columns=["i1"], **kw)["i1"][:2].tolist(),
    "open": lambda url, **kw: _closing(idv.open(url, **kw), lambda f: f["i1"][:2].tolist()),
    "dataset": lambda url, **kw: idv.dataset([url], **kw).read(["i1"])["i1"][:2].tolist(),
    "verify": lambda url, **kw: idv.verify(url, **kw).ok,
}


def _closing(f, use):
    with f:
        return use(f)


@pytest.mark.parametrize("entry", sorted(_TAKE_URL))
def test_storage_options_reach_the_filesystem(wide_file, entry):
    """HTTP headers given in storage_options arrive at the server, whichever entry point
    takes the URL."""
    path, data, cols = wide_file
    seen = []
    with RangeServer({"/wide.idv": data}) as srv:
        srv.on_request = seen.append
        got = _TAKE_URL[entry](srv.url("/wide.idv"),
                               storage_options={"headers": {"X-Idv-Test": "yes"}})
    assert got is True if entry == "verify" else got == cols["i1"][:2].tolist()
    assert seen and all(h.get("X-Idv-Test") == "yes" for h in seen)


@pytest.mark.parametrize("entry", sorted(_TAKE_URL))
def test_every_entry_point_takes_timeout_and_filesystem(wide_file, entry):
    """timeout= bounds each request of every entry point that takes a URL (a server that
    stopped answering is an idv.RemoteTimeoutError within it), and filesystem= names the
    filesystem a path is in."""
    import fsspec
    path, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        srv.stall_seconds, srv.mode = 30, "stall"
        t0 = time.perf_counter()
        with pytest.raises(idv.RemoteTimeoutError, match="within 1 s"):
            _TAKE_URL[entry](srv.url("/wide.idv"), timeout=1)
        assert time.perf_counter() - t0 < 15
    fs = fsspec.filesystem("memory")
    fs.pipe(f"/idv-entry-{entry}/wide.idv", data)
    got = _TAKE_URL[entry](f"/idv-entry-{entry}/wide.idv", filesystem=fs)
    assert got is True if entry == "verify" else got == cols["i1"][:2].tolist()


def test_zip_entries_takes_where_and_how_long_as_every_entry_point_does(wide_file, tmp_path):
    """idv.zip_entries lists a model zip at a URL, within timeout= (a stalled server is an
    idv.RemoteTimeoutError), in a filesystem= given, and refuses storage_options= beside a
    local path as idv.open does."""
    import fsspec
    import zipfile
    _, data, _ = wide_file
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("Model/Schema.idv", data)
    zipped = buf.getvalue()
    (tmp_path / "m.zip").write_bytes(zipped)
    with RangeServer({"/m.zip": zipped}) as srv:
        assert [e.name for e in idv.zip_entries(srv.url("/m.zip"), timeout=5)] == \
            ["Model/Schema.idv"]
        srv.stall_seconds, srv.mode = 30, "stall"
        with pytest.raises(idv.RemoteTimeoutError, match="within 1 s"):
            idv.zip_entries(srv.url("/m.zip"), timeout=1)
    fs = fsspec.filesystem("memory")
    fs.pipe("/idv-zip-entries/m.zip", zipped)
    got = idv.zip_entries("/idv-zip-entries/m.zip", filesystem=fs)
    assert [(e.name, e.num_rows) for e in got] == [("Model/Schema.idv", 200_000)]
    for call in (idv.zip_entries, idv.open):
        with pytest.raises(TypeError, match="storage_options= is for URLs"):
            call(str(tmp_path / "m.zip"), storage_options={"anon": True})


def test_verify_of_an_open_file_refuses_options_it_would_ignore(wide_file):
    path, _, _ = wide_file
    with idv.open(path) as f:
        with pytest.raises(TypeError, match="timeout: .* opened with its own"):
            idv.verify(f, timeout=5)
        assert idv.verify(f).ok


def test_cli_storage_options_reach_the_filesystem(wide_file):
    """idv --storage-option KEY=VALUE (VALUE JSON or text) gives fsspec's storage_options:
    headers arrive at the server; the option without a URL, or not KEY=VALUE, is a usage
    error."""
    from cli_run import assert_one_line_error, run
    path, data, _ = wide_file
    seen = []
    with RangeServer({"/wide.idv": data}) as srv:
        srv.on_request = seen.append
        rc, out, err = run("head", srv.url("/wide.idv"), "-n", "2", "-c", "i1", "--json",
                           "--storage-option", 'headers={"X-Idv-Test": "cli"}')
    assert rc == 0, err
    assert len(json.loads(out)["data"]) == 2
    assert seen and all(h.get("X-Idv-Test") == "cli" for h in seen)
    rc, _, err = run("info", path, "--storage-option", "anon=true")
    assert rc == 2
    assert_one_line_error(err, "--storage-option is for URLs")
    rc, _, err = run("info", "https://127.0.0.1:9/x.idv", "--storage-option", "anon")
    assert rc == 2 and "KEY=VALUE" in err
    with RangeServer({"/wide.idv": data}) as srv:
        rc, _, err = run("info", srv.url("/wide.idv"), "--storage-option", "bogus=1")
    assert rc == 2
    assert_one_line_error(err, "the filesystem refused an option of --storage-option")


def test_wrong_arguments():
    with pytest.raises(TypeError, match="storage_options= is for URLs"):
        idv.open(idv.sample_path(), storage_options={"anon": True})
    import fsspec
    with pytest.raises(TypeError, match="not both"):
        idv.open("x.idv", filesystem=fsspec.filesystem("memory"), storage_options={"a": 1})
    with pytest.raises(TypeError, match="fsspec filesystem"):
        idv.open("x.idv", filesystem=object())


@pytest.mark.parametrize("timeout,error", [(-1, ValueError), (0, ValueError),
                                           (float("nan"), ValueError), (float("inf"), ValueError),
                                           ("10", TypeError), (True, TypeError)])
def test_a_timeout_that_is_not_a_number_of_seconds_is_refused(timeout, error):
    """timeout= is a positive, finite number of seconds: anything else is refused as the bad
    argument it is, before any request (none would otherwise ever be answered in time)."""
    import gc
    with RangeServer({"/a.idv": SAMPLE_BYTES}) as srv, warnings.catch_warnings():
        warnings.simplefilter("error")          # no coroutine left never awaited either
        with pytest.raises(error, match="timeout="):
            idv.open(srv.url("/a.idv"), timeout=timeout)
        gc.collect()
        assert srv.requests == srv.heads == 0


def test_missing_fsspec_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(idv.MissingDependencyError, match=r"pip install 'idv\[remote\]'"):
        idv.open("s3://bucket/x.idv")
    with idv.open(idv.sample_path()) as f:      # local paths never need it
        assert f.num_rows == 240


def test_a_missing_backend_names_it():
    try:
        import gcsfs  # noqa: F401
        pytest.skip("gcsfs is installed")
    except ImportError:
        pass
    with pytest.raises(idv.MissingDependencyError, match=r"gs:// URLs needs .*gcsfs"):
        idv.open("gs://bucket/x.idv")


# ---- errors ------------------------------------------------------------------------------------

def test_not_found_and_forbidden_name_the_url():
    with RangeServer({"/a.idv": SAMPLE_BYTES}) as srv:
        srv.forbidden.add("/a.idv")
        with pytest.raises(FileNotFoundError) as missing:
            idv.open(srv.url("/b.idv"))
        # as the OS names a local path: once, its text as it is
        assert str(missing.value) == f"[Errno 2] no such file (HTTP 404): '{srv.url('/b.idv')}'"
        assert missing.value.filename == srv.url("/b.idv")
        with pytest.raises(PermissionError, match=r"access denied \(HTTP 403\): '.*/a\.idv'$"):
            idv.open(srv.url("/a.idv"))


def test_connection_refused_names_the_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]          # nothing listens there once it is closed
    url = f"http://127.0.0.1:{port}/x.idv"
    t0 = time.perf_counter()
    with pytest.raises(idv.RemoteError) as e:
        idv.open(url, timeout=5)
    assert url in str(e.value) and e.value.url == url
    assert "connect" in str(e.value).lower()
    assert time.perf_counter() - t0 < 10


def test_a_server_that_stalls_times_out(wide_file):
    _, data, _ = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        srv.mode = "stall"
        t0 = time.perf_counter()
        with pytest.raises(idv.RemoteTimeoutError) as e:
            idv.open(srv.url("/wide.idv"), timeout=0.5)
        took = time.perf_counter() - t0
        assert isinstance(e.value, TimeoutError)
        assert srv.url("/wide.idv") in str(e.value) and "0.5 s" in str(e.value)
        assert took < 5
        # a stall after the open, while reading blocks
        srv.mode = None
        with idv.open(srv.url("/wide.idv"), timeout=0.5) as f:
            srv.mode = "stall"
            with pytest.raises(idv.RemoteTimeoutError, match="reading bytes"):
                f["d0"].read()


def test_a_truncated_answer_is_an_error(wide_file):
    _, data, _ = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            srv.mode = "truncate"
            with pytest.raises(idv.RemoteError, match=r"/wide\.idv: .*truncated") as e:
                f["d0"].read()
            assert e.value.url == srv.url("/wide.idv")


def test_a_server_that_ignores_range_gives_the_whole_file_once(wide_file):
    _, data, _ = wide_file
    with idv.open(data) as f:
        want = f.read()
    with RangeServer({"/wide.idv": data}) as srv:
        srv.mode = "no-range"
        with pytest.warns(idv.IdvWarning, match=r"/wide\.idv: the server ignores HTTP Range.*"
                                                r"whole file .* is fetched once"):
            f = idv.open(srv.url("/wide.idv"))
        with f:
            got = f.read()
        assert got.keys() == want.keys()
        assert all(np.array_equal(got[k], want[k]) for k in want)
        # the first round's two ranges (the header, the tail: sent in parallel, each answered
        # with the whole file), then the file once: not the whole file once per range
        assert srv.requests == 3 and srv.bytes_served == 3 * len(data)
        # past the limit idv.open is given (not only the global one): spilled to a mapped file
        with pytest.warns(idv.IdvWarning, match="whole file"):
            f = idv.open(srv.url("/wide.idv"), memory_limit=len(data) - 1)
        with f:
            with open("/proc/self/maps") as maps:      # the temporary file, unnamed
                assert any(tempfile.gettempdir() in line and "(deleted)" in line for line in maps)
            name = next(iter(want))
            assert np.array_equal(f.read([name])[name], want[name])


def test_a_whole_fetch_that_stops_sending_is_cut_at_the_timeout(wide_file):
    """The whole-file fetch of a server that ignores Range is bounded by timeout= in each of
    its waits (here its answer, held back 30 s): an idv.RemoteTimeoutError that says so,
    well before the server would have answered."""
    _, data, _ = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        srv.stall_seconds = 30
        srv.statuses = ["no-range", "no-range", None, "stall"]   # the ranges, HEAD, whole GET
        t0 = time.monotonic()
        with pytest.warns(idv.IdvWarning, match="whole file"), \
                pytest.raises(idv.RemoteTimeoutError, match="no answer within 2 s while "
                                                            "fetching the whole file"):
            idv.open(srv.url("/wide.idv"), timeout=2)
        assert time.monotonic() - t0 < 15


def test_not_an_idv_gets_the_local_error_with_the_url(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "t.parquet")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("Data/Schema.idv", SAMPLE_BYTES)
    good = SAMPLE_BYTES
    files = {"/t.parquet": (tmp_path / "t.parquet").read_bytes(), "/m.zip": buf.getvalue(),
             "/short.idv": good[:len(good) - 100], "/junk.idv": b"\x00" * 5000}
    for name, data in files.items():
        (tmp_path / name[1:]).write_bytes(data)
    with RangeServer(files) as srv:
        for name in files:
            local_path = str(tmp_path / name[1:])
            with pytest.raises(idv.IdvFormatError) as local_err:
                idv.open(local_path)
            with pytest.raises(idv.IdvFormatError) as remote_err:
                idv.open(srv.url(name))
            assert remote_err.value.path == srv.url(name)
            if name == "/m.zip":
                assert srv.url(name) + ":ENTRY" in str(remote_err.value)
                assert "Data/Schema.idv" in str(remote_err.value)
            else:
                assert remote_err.value.reason == local_err.value.reason, name


def test_damage_found_in_a_block_names_the_url(wide_file):
    path, data, _ = wide_file
    with idv.open(path) as f:
        blk = f["d0"].lookup[2]
    bad = bytearray(data)
    bad[int(blk["offset"]):int(blk["offset"]) + 8] = b"\xff" * 8
    with RangeServer({"/bad.idv": bytes(bad)}) as srv:
        with idv.open(srv.url("/bad.idv")) as f:
            with pytest.raises(idv.IdvFormatError) as e:
                f["d0"].read()
    assert e.value.path == srv.url("/bad.idv") and e.value.block == 2


def test_checksums_are_checked_over_http(wide_file):
    _, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv"), checksums=True) as f:
            assert f.has_checksums
            assert np.array_equal(f["i9"].read(), cols["i9"])


# ---- S3 ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3-compatible server on 127.0.0.1 (skips with the reason when it cannot start)."""
    try:
        from moto.server import ThreadedMotoServer
        import s3fs  # noqa: F401
    except ImportError as e:
        pytest.skip(f"the S3 test needs moto[server] and s3fs: {e}")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    try:
        server.start()
    except Exception as e:       # noqa: BLE001 - any failure to start is a reason to skip
        pytest.skip(f"moto's S3 server did not start: {e}")
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_s3_through_s3fs_and_storage_options(s3_endpoint, wide_file, monkeypatch):
    import s3fs
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    opts = {"key": "testing", "secret": "testing", "endpoint_url": s3_endpoint,
            "client_kwargs": {"region_name": "us-east-1"}}
    import boto3
    boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing",
                 aws_secret_access_key="testing", region_name="us-east-1"
                 ).create_bucket(Bucket="idv-bucket")
    fs = s3fs.S3FileSystem(**opts)
    path, data, cols = wide_file
    fs.pipe("idv-bucket/dir/wide.idv", data)
    got = idv.read("s3://idv-bucket/dir/wide.idv", columns=["d0", "l11"],
                   storage_options=opts)
    assert np.array_equal(got["d0"], cols["d0"]) and np.array_equal(got["l11"], cols["l11"])
    sources = []

    class Recorded(remote.RemoteSource):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            sources.append(self)
    monkeypatch.setattr(remote, "RemoteSource", Recorded)
    with idv.open("idv-bucket/dir/wide.idv", filesystem=fs) as f:
        (src,) = sources
        assert src.name == "s3://idv-bucket/dir/wide.idv"
        opened = src.bytes_fetched
        assert np.array_equal(f["f10"].read(), cols["f10"])
        assert src.bytes_fetched - opened <= 1.1 * f["f10"].nbytes_disk
    with pytest.raises(FileNotFoundError, match="s3://idv-bucket/dir/none.idv"):
        idv.open("s3://idv-bucket/dir/none.idv", storage_options=opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fs.rm("idv-bucket", recursive=True)


# ---- a server that lies ------------------------------------------------------------------------

def test_an_answer_for_another_range_is_refused(wide_file):
    """A server answering with bytes of another range (saying so in Content-Range) would give
    shifted values; the error names the URL, the range asked and the range sent."""
    _, data, _ = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        url = srv.url("/wide.idv")
        with idv.open(url, checksums=False) as f:
            blk = f["d0"].lookup[1]
            o, n = int(blk["offset"]), int(blk["disk"])
            srv.mode = "shift"
            with pytest.raises(idv.RemoteError) as e:
                f["d0"].read()
        assert e.value.url == url and url in str(e.value)
        assert re.search(r"asked for bytes (\d+)-(\d+) of \d+, the server answered with "
                         r"another range \(Content-Range: bytes (\d+)-", str(e.value))
        asked, sent = re.search(r"bytes (\d+)-", str(e.value)), \
            re.search(r"Content-Range: bytes (\d+)-", str(e.value))
        assert int(sent.group(1)) == int(asked.group(1)) + srv.shift
        with pytest.raises(idv.RemoteError, match="another range"):     # at open too
            idv.open(url)
    assert n > 0 and o > 0


@pytest.mark.parametrize("mode", [None, "no-conditions", "no-conditions, no ETag"])
def test_a_file_replaced_while_reading_is_refused(wide_file, mode):
    """The object opened is pinned (If-Match with its ETag); a server that honours the
    condition answers 412, one that ignores it sends the new ETag, or leaves the ETag out and
    sends the new Last-Modified: each way "changed while reading", never blocks of two
    versions."""
    _, data, cols = wide_file
    changed = bytearray(data)
    changed[300:308] = b"\x01" * 8
    with RangeServer({"/wide.idv": data}) as srv:
        srv.mode = mode and "no-conditions"
        seen = []
        srv.on_request = seen.append
        with idv.open(srv.url("/wide.idv")) as f:
            assert np.array_equal(f["d0"].read(), cols["d0"])
            srv.files["/wide.idv"] = bytes(changed)
            if mode == "no-conditions, no ETag":
                srv.validators = "modified"
                srv.modified["/wide.idv"] = "Thu, 22 Oct 2015 07:28:00 GMT"
            with pytest.raises(idv.RemoteError, match=r"/wide\.idv: the file changed while "
                                                      r"reading \(opened as ETag") as e:
                f["i1"].read()
            assert isinstance(e.value, idv.IdvFormatError)      # as a local file's change
        # every request after the open's first round (which learns the ETag) carries it
        assert all(h.get("If-Match") == seen[-1]["If-Match"] for h in seen[2:])


@pytest.mark.parametrize("first", [True, False], ids=["the first round", "a block"])
def test_a_byte_past_the_range_asked_is_refused(wide_file, first):
    """An answer that carries the range's Content-Range but one byte more (no Content-Length:
    its body ends where the connection does) is refused, in the open's first round as in a
    block's read: never read as the file's bytes."""
    _, data, cols = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        if first:       # both GETs of the round (in either order: the tail's has no byte past it)
            srv.statuses = ["long-unannounced"] * 2
            with pytest.raises(idv.RemoteError, match=r"/wide\.idv: reading bytes .*: the "
                                                      r"server sent \d+ bytes"):
                idv.open(srv.url("/wide.idv"))
            return
        with idv.open(srv.url("/wide.idv")) as f:
            srv.statuses = ["long-unannounced"] * 8
            with pytest.raises(idv.RemoteError, match="the server sent"):
                f["i1"].read()


def test_every_request_asks_for_the_files_own_bytes(wide_file):
    """Each GET of a file's bytes (the open's, a block's, a whole read's, the whole file from
    a server that ignores Range) asks for no encoding: a range of an encoded body is none of
    the file's bytes."""
    _, data, cols = wide_file
    seen = []
    with RangeServer({"/wide.idv": data}) as srv:
        srv.on_request = seen.append
        with idv.open(srv.url("/wide.idv")) as f:
            assert np.array_equal(f["d0"].read(), cols["d0"]) and f.read()
        srv.mode = "no-range"
        with pytest.warns(idv.IdvWarning, match="whole file"):
            idv.open(srv.url("/wide.idv")).close()
    assert len(seen) > 4
    assert all(h.get("Accept-Encoding") == "identity" for h in seen), seen


def test_last_modified_pins_a_file_without_etag(wide_file, monkeypatch):
    _, data, _ = wide_file
    import http_server
    monkeypatch.setattr(http_server, "etag", lambda data: None)
    with RangeServer({"/wide.idv": data}) as srv:
        with idv.open(srv.url("/wide.idv")) as f:
            srv.modified["/wide.idv"] = "Thu, 22 Oct 2015 07:28:00 GMT"
            with pytest.raises(idv.RemoteError, match="changed while reading .*Last-Modified"):
                f["i1"].read()


def _one_valued(v, rows=1000):
    buf = io.BytesIO()
    idv.write(buf, {"x": np.full(rows, v, np.int64)}, rows_per_block=100)
    return buf.getvalue()


@pytest.mark.parametrize("reader", ["dataset", "dask", "dask elsewhere"])
def test_a_file_replaced_since_it_was_listed_is_refused(reader, monkeypatch):
    """A remote file's strong ETag is its identity, as a local file's inode and time are: a
    dataset that opens the file again (one open file at most), or a Dask task (on the
    machine that planned or another: a version means the same on every machine), finds
    another version in its place (the same rows and types, other values) and says so,
    never reading it under the plan made from the first."""
    if reader.startswith("dask"):
        pytest.importorskip("dask.dataframe", reason="the Dask reader needs dask[dataframe]")
        from idv import dask as idv_dask
    with RangeServer({"/a.idv": _one_valued(1), "/b.idv": _one_valued(5)}) as srv:
        urls = [srv.url("/a.idv"), srv.url("/b.idv")]
        if reader == "dataset":
            ds = idv.dataset(urls, max_open_files=1)
            assert np.unique(ds.read(["x"])["x"]).tolist() == [1, 5]      # reopened: same
            read = lambda: ds.read(["x"])      # noqa: E731
        else:
            ddf = idv_dask.read_idv(urls)
            read = ddf["x"].compute
            if reader == "dask elsewhere":      # the tasks run on another machine
                from idv._engines import reopen
                monkeypatch.setattr(reopen.socket, "gethostname", lambda: "another-machine")
        srv.files["/a.idv"] = _one_valued(2)
        with pytest.raises(idv.IdvFormatError, match=r"/a\.idv: the file changed since the "
                                                     r"dataset (listed it|was made)"):
            read()


def test_a_huge_declared_file_fetches_within_the_limit():
    """A server declaring 64 GiB whose header puts the table of contents at byte 256 would
    have the whole range fetched in one answer at open: refused by the memory limit before
    a byte of it is asked for (in a child process under RLIMIT_AS)."""
    from http_server import Sparse
    from test_hostile import read_limited
    size = 64 << 30
    real = _header_of(SAMPLE_BYTES)
    head = type(real)(real.version, real.compatible_version, 256, size - 8, 10, 1).pack()
    files = {"/huge.idv": Sparse(size, {0: head, size - 8: SAMPLE_BYTES[-8:]})}
    with RangeServer(files) as srv:
        got = read_limited(srv.url("/huge.idv"), timeout=60)
        assert got["outcome"] == "MemoryLimitError", got
        assert "/huge.idv" in got["message"]
        assert srv.bytes_served < 1 << 20


def _header_of(data):
    from idv import _header
    return _header.parse_header(data[:256], len(data))


@pytest.mark.parametrize("mode,status", [(None, 500), ("redirect-loop", None)])
def test_server_errors_are_not_missing_files(wide_file, mode, status):
    _, data, _ = wide_file
    with RangeServer({"/wide.idv": data}) as srv:
        srv.mode = mode
        if status:
            srv.statuses = [status] * 100
        with pytest.raises(idv.RemoteError) as e:
            idv.open(srv.url("/wide.idv"))
        assert not isinstance(e.value, FileNotFoundError)
        assert srv.url("/wide.idv") in str(e.value)
        assert ("HTTP 500" in str(e.value)) if status else ("redirect" in str(e.value).lower())


def test_transient_errors_are_retried_a_bounded_number_of_times(wide_file, monkeypatch):
    _, data, cols = wide_file
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    with RangeServer({"/wide.idv": data}) as srv:
        srv.statuses = [503, 503]               # the size, then once more
        with idv.open(srv.url("/wide.idv")) as f:
            srv.statuses = [503, 502]
            assert np.array_equal(f["d0"].read(), cols["d0"])
            srv.reset_counts()
            srv.statuses = [503] * 100
            with pytest.raises(idv.RemoteError, match="HTTP 503"):
                f["i1"][0]                      # one block: one request, retried
            assert srv.requests == remote.RETRIES + 1


def test_the_two_requests_of_an_open_are_each_retried_on_their_own(wide_file, monkeypatch):
    """A failure of one of the two requests that open a file retries that request, not both
    (each request has its retries): one failing every other time opens the file. Both were
    asked again after either failed, so four such failures made the open fail."""
    _, data, cols = wide_file
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    with RangeServer({"/wide.idv": data}) as srv:
        srv.statuses = [503, None] * remote.RETRIES + [503]
        with idv.open(srv.url("/wide.idv")) as f:
            assert np.array_equal(f["d0"][:10], cols["d0"][:10])
        srv.reset_counts()
        srv.statuses = [503] * 100          # one request failing each time: retried, bounded
        with pytest.raises(idv.RemoteError, match="HTTP 503"):
            idv.open(srv.url("/wide.idv"))
        assert srv.requests <= 2 * (remote.RETRIES + 1), srv.requests


def test_overlapping_ranges_are_fetched_once_and_cut_exactly(wide_file):
    _, data, _ = wide_file
    mb = 1 << 20
    starts, stops = [0, mb, 3 * mb], [20 * mb, 2 * mb, 4 * mb]
    runs = remote_requests.coalesce(starts, stops)
    assert sum(e - s for s, e in runs) == 20 * mb       # no byte asked twice
    offsets = [100, 200, 5000, 150]
    sizes = [len(data) - 200, 1000, 300_000, 20]
    with RangeServer({"/wide.idv": data}) as srv:
        src = remote.open_any(srv.url("/wide.idv"))
        srv.reset_counts()
        got = src.read_ranges(offsets, sizes)
        assert [len(g) for g in got] == sizes
        assert all(bytes(g) == data[o:o + n] for g, o, n in zip(got, offsets, sizes))
        assert srv.bytes_served <= len(data)
        src.close()


# ---- model zips over HTTP ----------------------------------------------------------------------

def test_a_model_zip_entry_by_url_and_idv_ls_of_a_url(tmp_path):
    """https://host/model.zip:ENTRY (and MLModel.mlnet:ENTRY), either separator, read by
    ranges; a missing entry lists those there are; idv ls URL lists them with schemas."""
    from cli_run import run
    entries = [(z, e) for z, e in model_zip_entries() if z == "ep_model1.zip"]
    if not entries:
        pytest.skip("model zips missing (set IDV_SHARED)")
    local = shared_path("mlnet-files", "model-zips", "ep_model1.zip")
    data = local.read_bytes()
    with RangeServer({"/model.zip": data, "/MLModel.mlnet": data}) as srv:
        for name in ("/model.zip", "/MLModel.mlnet"):
            url = srv.url(name)
            for _, entry in entries:
                want = idv.read(f"{local}:{entry}")
                for spec in (entry.replace("\\", "/"), entry.replace("/", "\\")):
                    got = idv.read(f"{url}:{spec}")
                    assert list(got) == list(want)
                    for column in want:
                        assert_equal_reads(got[column], want[column])
            with pytest.raises(FileNotFoundError, match="no entry 'Nope.idv'.*"
                                                        "DataLoaderModel/Loader/Schema.idv"):
                idv.open(f"{url}:Nope.idv")
        url = srv.url("/model.zip")
        srv.reset_counts()
        listed = idv.zip_entries(url)
        assert [e.name for e in listed] == [e.name for e in idv.zip_entries(local)]
        assert all(e.spec.startswith(url + ":") for e in listed)
        assert srv.bytes_served < 3 * len(data)
        rc, out, err = run("ls", url, check_rc=0)
        assert out.startswith(f"{url}: {len(listed)} IDV streams")
        assert "DataLoaderModel/Loader/Schema.idv" in out
        rc, out, err = run("schema", f"{url}:DataLoaderModel\\Loader\\Schema.idv", check_rc=0)
        assert out.strip()


def _zip_of(data, padding=0):
    """A zip holding `data` as ML.NET names its entries (``\\`` separators), then `padding`
    random bytes stored (a zip larger than the tail an open reads, whose entry is read by a
    request of its own)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("Data\\Schema.idv", data)
        if padding:
            z.writestr("Data\\Padding", np.random.default_rng(1).bytes(padding),
                       zipfile.ZIP_STORED)
    return buf.getvalue()


def _answered_before(srv, url, stage):
    """(how many requests for `url` (a zip's entry) the server answers before `stage`: the
    first round of the zip's range requests (its header and tail, sent together), or the
    entry's; the range, as a pattern, of the request that fails), counted on an open that
    succeeds."""
    srv.reset_counts()
    idv.open(url).close()
    total, quiet = srv.heads + srv.requests, time.monotonic() + 0.3
    while time.monotonic() < quiet:     # a request of the open's that reaches the server late
        time.sleep(0.02)                # (the first round's second GET) is counted here, not
        if srv.heads + srv.requests != total:   # answered as one of the next open's
            total, quiet = srv.heads + srv.requests, time.monotonic() + 0.3
    assert srv.ranges[-1] == (0, len(srv.files["/m.zip"]))     # the entry's: the whole zip
    if stage == "first":
        return total - 3, r"\d+-\d+"
    return total - 1, f"0-{len(srv.files['/m.zip']) - 1}"


ZIP_PADDING = 2 * remote.TAIL_GUESS[1]


@pytest.mark.parametrize("stage", ["first", "entry"])
def test_every_request_for_a_zip_entry_by_url_has_the_deadline(stage):
    """URL:ENTRY on a server that stalls a GET (of the first round, or the entry's) though it
    answers the others: idv.RemoteTimeoutError within timeout=, as for a plain URL."""
    with RangeServer({"/m.zip": _zip_of(SAMPLE_BYTES, ZIP_PADDING)}) as srv:
        url = srv.url("/m.zip:Data/Schema.idv")
        answered, fault = _answered_before(srv, url, stage)
        srv.statuses = [None] * answered + ["stall"] * 10
        t0 = time.perf_counter()
        with pytest.raises(idv.RemoteTimeoutError,
                           match=rf"/m\.zip: no answer within 0\.5 s while reading bytes "
                                 rf"{fault}\b"):
            idv.open(url, timeout=0.5)
        assert time.perf_counter() - t0 < 3


@pytest.mark.parametrize("failure", ["truncate", 500])
@pytest.mark.parametrize("stage", ["first", "entry"])
def test_a_zip_entry_by_url_fails_as_a_plain_url_does(monkeypatch, failure, stage):
    """A server failing while a remote zip is read (at the first round, or at the entry's
    request): idv.RemoteError naming the zip's URL and the range, not the dependencies'
    exceptions nor a damaged archive."""
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    with RangeServer({"/m.zip": _zip_of(SAMPLE_BYTES, ZIP_PADDING)}) as srv:
        url = srv.url("/m.zip:Data/Schema.idv")
        answered, fault = _answered_before(srv, url, stage)
        srv.statuses = [None] * answered + [failure] * 100
        with pytest.raises(idv.RemoteError,
                           match=rf"/m\.zip: reading bytes {fault}\b.*" +
                                 ("truncated" if failure == "truncate" else "HTTP 500")) as e:
            idv.open(url)
        assert e.value.url == srv.url("/m.zip")


def test_an_archive_replaced_under_a_dataset_of_its_remote_entries_is_found():
    """A remote zip entry has its archive's version as its identity (and its name), as a
    local entry has its archive's: a dataset that opens it again after the archive was
    replaced by one of the same rows and types says so, rather than read the new rows."""
    def zipped(x):
        buf = io.BytesIO()
        idv.write(buf, {"x": np.asarray(x, np.float64)})
        return _zip_of(buf.getvalue())
    with RangeServer({"/m.zip": zipped([1, 2]), "/n.zip": zipped([3, 4])}) as srv:
        entries = [srv.url(f"/{n}.zip") + ":Data/Schema.idv" for n in "mn"]
        with idv.dataset(entries, max_open_files=1) as ds:
            assert ds.read(["x"])["x"].tolist() == [1, 2, 3, 4]
            srv.files["/m.zip"] = zipped([-1, -2])
            with pytest.raises(idv.IdvFormatError, match=r"changed since the dataset listed"):
                ds.read(["x"])


def test_a_zip_entry_from_a_server_that_ignores_range_is_fetched_whole():
    """URL:ENTRY from a server that ignores Range: the zip fetched once, with an IdvWarning
    (as a plain .idv URL), and the entry read as the local file."""
    want = idv.read(idv.sample_path())
    with RangeServer({"/m.zip": _zip_of(SAMPLE_BYTES)}) as srv:
        srv.mode = "no-range"
        with pytest.warns(idv.IdvWarning, match=r"/m\.zip: the server ignores HTTP Range"):
            got = idv.read(srv.url("/m.zip:Data/Schema.idv"))
    assert list(got) == list(want)
    for column in want:
        assert_equal_reads(got[column], want[column])


def test_s3_reads_the_version_opened(s3_endpoint, wide_file, monkeypatch):
    """A version-aware S3 filesystem pins the VersionId opened: an object overwritten while
    it is read still reads as opened."""
    import boto3
    import s3fs
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    client = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    client.create_bucket(Bucket="idv-versions")
    client.put_bucket_versioning(Bucket="idv-versions",
                                 VersioningConfiguration={"Status": "Enabled"})
    fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=s3_endpoint,
                           client_kwargs={"region_name": "us-east-1"}, version_aware=True)
    _, data, cols = wide_file
    fs.pipe("idv-versions/w.idv", data)
    with idv.open("idv-versions/w.idv", filesystem=fs) as f:
        fs.pipe("idv-versions/w.idv", bytes(len(data)))      # another version, all zeros
        fs.invalidate_cache()
        assert np.array_equal(f["d0"].read(), cols["d0"])


def test_a_remote_take_fetches_each_block_hit_once_in_few_requests(tmp_path):
    n, rpb = 200_000, 100                   # 2,000 blocks a column
    rng = np.random.default_rng(7)
    data = {"i": np.arange(n), "t": np.array([f"r{i}" for i in range(n)], object)}
    p = tmp_path / "scattered.idv"
    idv.write(p, data, rows_per_block=rpb)
    rows = rng.choice(n, 1000, replace=False)
    with RangeServer({"/s.idv": p.read_bytes()}) as srv:
        with idv.open(srv.url("/s.idv")) as f:
            srv.reset_counts()
            got = f.take(rows)
            blocks = len(np.unique(rows // rpb))
            assert np.array_equal(got["i"], rows) and list(got["t"]) == [f"r{r}" for r in rows]
            # each block hit fetched once, neighbours coalesced: fewer requests than one
            # column's blocks (two columns are read)
            assert srv.requests < blocks, (srv.requests, blocks)
            stored = sum(int(f[c].lookup["disk"][np.unique(rows // rpb)].sum()) for c in "it")
            assert srv.bytes_served < 1.5 * stored + 2 * (64 << 10), (srv.bytes_served, stored)
            assert blocks > 500


# ---- the process: forked children, exit ---------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_remote_file_and_dataset_read_in_a_forked_child():
    """An IdvFile and a Dataset of a URL, read in the parent, read in a child forked from it
    (multiprocessing's default on Linux): fsspec's filesystem serves only the process that
    made it, so the child's reads take one of their own. The fork happens in a process of
    its own, not in the test's."""
    import subprocess
    import textwrap
    code = textwrap.dedent("""
        import multiprocessing, sys
        import idv
        url = sys.argv[1]
        f, ds = idv.open(url), idv.dataset([url])
        assert f["x"][:3].tolist() == [7, 7, 7] and ds.read(["x"])["x"][0] == 7

        def child(q):
            try:
                q.put((int(f["x"][:].sum()), int(ds.read(["x"])["x"].sum())))
            except BaseException as e:
                q.put(f"{type(e).__name__}: {e}")

        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print(q.get(timeout=60))
        p.join(10)
    """)
    with RangeServer({"/a.idv": _one_valued(7)}) as srv:
        done = subprocess.run([sys.executable, "-c", code, srv.url("/a.idv")],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(7000, 7000)"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_parent_reads_on_after_its_forked_children_collect_garbage_and_exit():
    """A parent reads a URL, then forks children that read nothing (as PyTorch's DataLoader
    workers of a local dataset do) and run the garbage collector, one exiting as
    multiprocessing's children do (os._exit) and one through the interpreter's exit: the
    parent's next reads, on its pooled connections, are answered. Were a child to finalize
    the filesystem it inherited, it would take the parent's sockets out of the event loop's
    epoll set, which the two share, and the parent's reads would wait out their deadline."""
    import subprocess
    import textwrap
    code = textwrap.dedent("""
        import gc, multiprocessing, os, sys
        import idv
        url = sys.argv[1]
        with idv.open(url, timeout=5) as f:
            assert f["x"][:3].tolist() == [7, 7, 7]
        ctx = multiprocessing.get_context("fork")
        p = ctx.Process(target=gc.collect)
        p.start()
        p.join(60)
        assert p.exitcode == 0, p.exitcode
        with idv.open(url, timeout=5) as f:
            first = int(f["x"][:].sum())
        pid = os.fork()
        if pid == 0:
            gc.collect()
            sys.exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        with idv.open(url, timeout=5) as f:
            print(first, int(f["x"][:].sum()))
    """)
    with RangeServer({"/a.idv": _one_valued(7)}) as srv:
        done = subprocess.run([sys.executable, "-c", code, srv.url("/a.idv")],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "7000 7000"


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_ctrl_c_in_a_stalled_read_lets_the_process_exit():
    """Ctrl-C while reading threads wait for storage that stopped answering: the process
    exits at once after the KeyboardInterrupt, its requests in flight cancelled, not when
    their deadline (a minute here) has passed."""
    import signal
    import subprocess
    import textwrap
    code = textwrap.dedent("""
        import sys
        import idv
        f = idv.open(sys.argv[1], timeout=60)
        print("opened", flush=True)
        try:
            f["x"][:]                  # several blocks: fetched by the reading threads
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
    """)
    buf = io.BytesIO()          # random: larger than the tail the open reads
    x = np.random.default_rng(3).integers(0, 1 << 62, 40_000)
    idv.write(buf, {"x": x}, rows_per_block=10_000)
    with RangeServer({"/a.idv": buf.getvalue()}) as srv:
        child = subprocess.Popen([sys.executable, "-c", code, srv.url("/a.idv")],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "opened"
            srv.stall_seconds, srv.mode = 60, "stall"
            waited = time.monotonic() + 20
            while srv.in_flight < 2 and time.monotonic() < waited:
                time.sleep(0.05)
            assert srv.in_flight >= 2           # the reading threads wait for answers
            child.send_signal(signal.SIGINT)
            t0 = time.perf_counter()
            out, _ = child.communicate(timeout=30)
            took = time.perf_counter() - t0
        finally:
            child.kill()
    assert "interrupted" in out and child.returncode == 130
    assert took < 10, took


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_a_caught_ctrl_c_leaves_the_next_read_nothing_to_wait_for():
    """Ctrl-C caught while a read waits for storage that stopped answering: the work of that
    read ends with it (its tasks not begun dropped, its requests in flight cancelled), so the
    interrupt and the next read, once the storage answers again, do not wait behind them for
    their deadline in the pool's threads. By way of reading: a column's blocks, a stream of
    batches (the scan's windows), a dataset of several files (opened ahead, fetched
    together)."""
    import subprocess
    import textwrap
    code = textwrap.dedent("""
        import json, signal, sys, threading, time
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import idv
        from http_server import RangeServer
        signal.signal(signal.SIGINT, signal.default_int_handler)
        files = {}
        for i in range(3):
            path = f"{sys.argv[2]}/{i}.idv"
            x = np.random.default_rng(i).integers(0, 1 << 62, 1_000_000)
            idv.write(path, {"x": x, "y": x[::-1].copy()})   # blocks for several threads
            files[f"/{i}.idv"] = open(path, "rb").read()
        ways = {
            "column": lambda urls, f: f["x"].read(),
            "batches": lambda urls, f: list(idv.record_batch_reader(f)),
            "dataset": lambda urls, f: idv.dataset(urls, timeout=60).read(),
        }
        main = threading.main_thread().ident
        took, sent = {}, []
        with RangeServer(files) as srv:
            urls = [srv.url(p) for p in files]
            for name, way in ways.items():
                f = idv.open(urls[0], timeout=60)
                srv.stall_seconds, srv.mode = 30, "stall"
                stalled = srv.in_flight         # those of the ways before, still waiting
                def interrupt():        # once every thread that can wait does
                    seen = [stalled] * 20
                    while seen[-1] < stalled + 2 or seen[-1] != seen[0]:
                        time.sleep(0.02)
                        seen = seen[1:] + [srv.in_flight]
                    sent.append(time.perf_counter())
                    signal.pthread_kill(main, signal.SIGINT)
                threading.Thread(target=interrupt, daemon=True).start()
                try:
                    way(urls, f)
                    took[name] = "not interrupted"
                    continue
                except KeyboardInterrupt:
                    pass
                srv.mode = None
                idv.open(urls[2], timeout=60).read()      # a read in the threads
                took[name] = time.perf_counter() - sent[-1]
            print(json.dumps(took), flush=True)
    """)
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__), tmp],
                              capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    took = json.loads(done.stdout)
    assert all(isinstance(t, float) and t < 10 for t in took.values()), took


def test_prefetches_that_end_out_of_order_keep_each_others_bytes():
    """Two prefetches of one remote file (two threads' whole reads) that end in another order
    than they began: the one still open serves its blocks from memory, no request again."""
    buf = io.BytesIO()
    rng = np.random.default_rng(4)
    idv.write(buf, {"x": rng.random(200_000), "y": rng.random(200_000)})
    with RangeServer({"/a.idv": buf.getvalue()}) as srv:
        f = idv.open(srv.url("/a.idv"))
        first, second = f.prefetch(["x"]), f.prefetch(["y"])
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        asked = srv.requests
        y = f["y"].read()
        assert srv.requests == asked
        second.__exit__(None, None, None)
        assert np.array_equal(y, idv.read(buf.getvalue())["y"])
