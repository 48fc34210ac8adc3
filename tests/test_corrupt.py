"""Corrupt, truncated and hand-crafted files: the reader fails with IdvFormatError, never worse.

The contract for bad input: ``idv.IdvFormatError`` naming what is wrong and where (byte offset,
column, block). Never a crash, a hang, an out-of-bounds read, a huge allocation, another
exception type, or a silently wrong value where the damage is detectable. An unknown top-level
codec or compression leaves the column listed but unreadable (``IdvWarning`` at open,
``UnsupportedCodecError`` on read).

Every corrupt file here is built in memory from the real ML.NET-written fixtures in the shared
folder (``<repo>/../shared`` or ``$IDV_SHARED``; tests skip when it is absent), either by editing
their bytes at offsets found with the small independent parser of tests/craft.py, or by
re-assembling them from their decoded parts (``parse``/``build``) after changing one thing. The
crafted cases are in tests/corrupt_cases.py, the read-everything judge in tests/readback.py.

* truncation: every fixture cut at every offset (a seeded sample for the big ones);
* random byte flips (seeded): an error or data, and exactly "error" or "same data" where the
  byte's role demands it (header, unused header bytes, tail signature);
* crafted cases for each rule of the contract, each through bytes, a file object and a path;
* decoder leaks: reading text-heavy files (and failing on corrupt ones) many times does not
  grow memory; one read loop of valid and corrupt files under valgrind's memcheck (~10 s;
  skipped without valgrind or with IDV_VALGRIND=0).
"""
from __future__ import annotations

import ast
import gc
import io
import os
import random
import re
import struct
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

import idv
from corrupt_cases import (CASES, FAIL_AT_OPEN, FIXTURE_FILES, MISSING, fixture_bytes,
                           fixed_size_huge, fixture_file_params, model_of)
from craft import (HDR, TAIL_SIG, V, build, compress, mutate, parse, patch,
                   respell_rows_per_block, tail_offset)
from idv import compression
from readback import SOURCES, as_source, expect_error, prefix_same, read_quiet, same
from reference import REPO_DIR, SAMPLE_DIR, shared_dir

SMALL = 64 * 1024            # files up to this size get exhaustive treatment
BACKENDS = [b for b in ("zlib", "libdeflate", "isal") if b in compression.installed()]
ALL_CASES = sorted(CASES)
HUGE_CASES = ["raw_length_huge", "raw_length_huge_vector", "vbuffer_huge_sparse_row_count",
              "row_count_huge", "vbuffer_sparse_length_huge",
              "metadata_sparse_length_huge", "column_count_huge", "metadata_entry_count_huge"]
TEXT_HEAVY = ["scalars_text.idv", "pipeline_featurize_text.idv", "pipeline_multiclass_scored.idv",
              "datatypes.idv", "mixed_smallblocks_deflate.idv", "vectors_fixed.idv"]
VALGRIND_CASES = ["text_boundary_backwards", "text_boundary_splits_surrogate_pair",
                  "text_invalid_utf8_overlong", "text_vector_invalid_utf8",
                  "text_invalid_utf8_continuation", "text_string_length_beyond_block",
                  "vbuffer_index_out_of_range", "vbuffer_values_short", "corrupt_deflate",
                  "raw_length_one_short_text", "raw_length_one_long_text", "dvbool_pattern_11",
                  "metadata_deflate_truncated", "leb128_overlong", "key2_params_short"]


# ============================================================================ sanity

def test_builder_round_trips_every_fixture():
    """parse() + build() reproduce every fixture's data: the crafted files are realistic."""
    if not FIXTURE_FILES:
        pytest.skip(MISSING)
    for p in FIXTURE_FILES:
        if p.stat().st_size > SMALL:
            continue
        data = fixture_bytes(p.name)
        rebuilt, _ = build(parse(data))
        assert same(read_quiet(rebuilt), read_quiet(data)), p.name


# ============================================================================ 1. truncation

@pytest.mark.parametrize("name", fixture_file_params())
def test_truncated_everywhere(name):
    """Every prefix of every fixture is an IdvFormatError (bytes source)."""
    data = fixture_bytes(name)
    rng = random.Random(len(data))
    for n in _truncation_offsets(len(data), rng):
        with pytest.raises(idv.IdvFormatError):
            read_quiet(data[:n], slices=False)


@pytest.mark.parametrize("name", fixture_file_params())
def test_truncated_file_objects_and_paths(name, tmp_path):
    """A sample of prefixes through a file object and a path; the message names the sizes."""
    data = fixture_bytes(name)
    rng = random.Random(len(data) + 1)
    cuts = sorted({0, 100, 255, 256, len(data) - 1, len(data) - 8}
                  | {rng.randrange(len(data)) for _ in range(8)})
    for n in cuts:
        for kind in ("fileobj", "path"):
            src = as_source(kind, data[:n], tmp_path)
            with pytest.raises(idv.IdvFormatError, match=r"truncated|outside the file|ended"):
                read_quiet(src, slices=False)
    # the exact messages for the two kinds of truncation
    with pytest.raises(idv.IdvFormatError, match=r"byte 100: truncated file: 100 bytes"):
        idv.open(data[:100])
    with pytest.raises(idv.IdvFormatError,
                       match=rf"tail offset {len(data) - 8} .*outside the file of "
                             rf"{len(data) - 1} bytes"):
        idv.open(data[:-1])


# ============================================================================ 2. byte flips

@pytest.mark.parametrize("name", fixture_file_params())
def test_random_byte_flips(name):
    """A flipped byte gives IdvFormatError (or an unreadable column) or data, nothing else;
    where the byte's role decides the outcome, exactly that outcome."""
    data = fixture_bytes(name)
    rng = random.Random(f"flip-{name}")
    big = len(data) > SMALL
    original = read_quiet(data)
    tail = tail_offset(data)
    columns = HDR.unpack_from(data, 0)[6]
    backends = BACKENDS or [None]
    for k, i in enumerate(_flip_positions(data, rng, 15 if big else 250)):
        b = bytearray(data)
        b[i] ^= rng.randrange(1, 256)
        flipped = bytes(b)
        try:
            got = read_quiet(flipped, backend=backends[k % len(backends)],
                             slices=not big and k % 4 == 0)
        except idv.IdvFormatError:
            got = None
        where = f"{name}: byte {i} {data[i]:#04x} -> {flipped[i]:#04x}"
        if i < 8 or 32 <= i < 40 or tail <= i < tail + 8 or (24 <= i < 32 and columns):
            # signature, TOC offset, tail offset, tail signature: must be detected
            assert got is None, where
        elif i < 32:
            # version / compatible version (and the TOC offset of a file without columns,
            # which is never followed): refused, or accepted with identical data
            assert got is None or same(got, original), where
        elif i < 52:
            # row count / column count: refused, or the rows and columns still there agree
            assert got is None or prefix_same(got, original), where
        elif i < 256:
            # unused header bytes: never read
            assert got is not None and same(got, original), where


@pytest.mark.parametrize("name", ["mixed_smallblocks_none.idv", "vectors_sparse.idv",
                                  "vectors_variable.idv", "vectors_misc.idv", "scalars_text.idv",
                                  "scalars_datetime.idv", "datatypes.idv", "keys.idv",
                                  "annotations_custom.idv", "pipeline_multiclass_scored.idv"])
def test_payload_mutations(name):
    """Mutate decompressed block and metadata payloads, then recompress, so the damage reaches
    the decoders instead of breaking DEFLATE: IdvFormatError or data, nothing else."""
    m = model_of(name)
    rng = random.Random(f"payload-{name}")
    targets = [(c, b) for c in m.cols for b in range(len(c.blocks))] + \
        [(c, e) for c in m.cols for e in c.meta]
    for k in range(120):
        c, which = rng.choice(targets)
        if isinstance(which, int):
            blocks = list(c.blocks)
            blocks[which] = mutate(blocks[which], rng)
            c2 = replace(c, blocks=blocks)
        else:
            c2 = replace(c, meta=[replace(e, payload=mutate(e.payload, rng)) if e is which else e
                                  for e in c.meta])
        data, _ = build(replace(m, cols=[c2 if x is c else x for x in m.cols]))
        try:
            read_quiet(data, slices=k % 4 == 0)
        except idv.IdvFormatError:
            pass


# ============================================================================ 3. crafted cases
# Each case of tests/corrupt_cases.py, through bytes, a file object and a path.

@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", ALL_CASES)
def test_crafted(name, source, tmp_path):
    data, pattern = CASES[name]()
    expect_error(data, pattern, tmp_path, source)


# the crafted cases whose damage is in a text column (checked in the test): besides those named
# text_*, the damaged blocks and lookup entries of the Txt columns
TEXT_CASES = [n for n in ALL_CASES if n.startswith("text_")] + [
    "block_disk_length_beyond_file", "block_negative_lengths", "block_offset_beyond_file",
    "corrupt_deflate", "deflate_stream_truncated", "raw_length_differs_uncompressed",
    "raw_length_huge", "raw_length_one_long_text", "raw_length_one_short_text"]


# the crafted cases whose damage is in a Boolean column (read into Arrow from its bits)
BOOLEAN_CASES = [n for n in ALL_CASES if n.startswith("boolean_")]


@pytest.mark.parametrize("name, item", [(n, idv.Text) for n in TEXT_CASES]
                         + [(n, idv.Boolean) for n in BOOLEAN_CASES])
def test_crafted_cases_on_the_arrow_path(name, item):
    """Text and Boolean scalars read straight into Arrow (to_arrow, record_batch_reader: from
    the blocks' UTF-8, from their bits) fail on each crafted case of theirs with the object
    path's IdvFormatError: the same message, column, block and byte offset; through the Arrow
    C stream, which carries errors as ArrowInvalid, with its message."""
    pa = pytest.importorskip("pyarrow", reason="the Arrow path needs pyarrow")
    data, pattern = CASES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", idv.IdvWarning)
        f = idv.open(data)
        text = [c.index for c in f.columns
                if c.readable and idv.types.item_type(c.type) is item]
        with pytest.raises(idv.IdvFormatError) as objects:
            for i in text:
                f[i].read()
        assert re.search(pattern, str(objects.value)), str(objects.value)
        assert f[objects.value.column_index].index in text
        ways = {"to_arrow": lambda: idv.to_arrow(data, columns=text),
                "record_batch_reader": lambda: idv._interop.arrow.record_batch_reader(
                    data, columns=text).read_all()}
        for how, read in ways.items():
            with pytest.raises(idv.IdvFormatError) as arrow:
                read()
            assert type(arrow.value) is type(objects.value), how
            assert str(arrow.value) == str(objects.value), how
            assert (arrow.value.column, arrow.value.block) == \
                (objects.value.column, objects.value.block), how
        with pytest.raises(pa.ArrowInvalid, match=re.escape(str(objects.value))):
            pa.table(idv._interop.arrow.record_batch_reader(data, columns=text))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", [n for n in ALL_CASES if "raw_length" in n or "deflate" in n])
def test_crafted_backends(name, backend):
    """The DEFLATE errors read the same with every installed backend."""
    data, pattern = CASES[name]()
    expect_error(data, pattern, backend=backend)


def test_huge_lengths_do_not_allocate_or_hang(tmp_path):
    """Lengths and counts claiming gigabytes are refused quickly without allocating them. Run in
    a child process with a 3 GB address-space limit and a timeout, so a regression fails the
    test instead of hanging it or exhausting the machine's memory."""
    if not FIXTURE_FILES:
        pytest.skip(MISSING)
    script = tmp_path / "huge.py"
    script.write_text(ISOLATED_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR), IDV_SHARED=str(shared_dir()))
    try:
        r = subprocess.run([sys.executable, str(script), str(Path(__file__).parent),
                            *HUGE_CASES], capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hang: no answer in 120 s; got so far:\n{e.stdout}")
    results = [ast.literal_eval(line) for line in r.stdout.splitlines() if line.startswith("(")]
    assert [x[0] for x in results] == HUGE_CASES, r.stderr[-3000:]
    for name, outcome, seconds, peak in results:
        assert outcome.startswith("IdvFormatError: "), (name, outcome)
        assert re.search(CASES[name]()[1], outcome), (name, outcome)
        assert seconds < 5, (name, seconds)
        assert peak < 32 << 20, (name, f"peak {peak} bytes")


@pytest.mark.parametrize("name", sorted(FAIL_AT_OPEN))
def test_header_toc_and_codec_errors_at_open(name):
    """Header, TOC and codec-parameter damage (a nested unknown codec included) fails in
    idv.open itself, as ML.NET's loader does; block and metadata damage when read."""
    data, pattern = CASES[name]()
    with pytest.raises(idv.IdvFormatError, match=pattern) as ei:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", idv.IdvWarning)
            idv.open(data)
    assert type(ei.value) is idv.IdvFormatError


# ---- accepted variants (not errors)

@pytest.mark.parametrize("name", ["vbuffer_sparse_length_huge", "fixed_size_huge"])
def test_huge_sparse_vectors_read_sparse(name):
    """Vectors of 2^31-1 slots are valid: read(sparse=True) gives them without densifying;
    a fixed size's dense read is refused by the memory limit, not called corrupt."""
    data = CASES[name]()[0] if name in CASES else fixed_size_huge()
    with idv.open(data) as f:
        m = f[0].read(sparse=True)
        assert m.shape == (6, 2**31 - 1) and m.nnz == 0
        if name == "fixed_size_huge":
            with pytest.raises(idv.MemoryLimitError):
                f[0].read()


def test_leb128_non_minimal_is_accepted():
    """ML.NET reads up to 10 LEB128 bytes, minimal or not: a padded rows-per-block reads."""
    d, lay = build(model_of("scalars_text.idv"))
    padded, _ = respell_rows_per_block(d, lay, b"\x8e" + b"\x80" * 8 + b"\x00")
    assert same(read_quiet(padded), read_quiet(d))


def test_rows_per_block_zero_without_rows():
    m = model_of("schema-codec-test.idv")
    assert m.rows == 0
    for c in m.cols:
        c.rpb = 0
    d, _ = build(m)
    with idv.open(d) as f:
        assert f.num_rows == 0 and all(len(c.read()) == 0 for c in f.columns)


@pytest.mark.parametrize("version", [V[6], V[9], 0x0002000000000000])
@pytest.mark.parametrize("compat", [V[4], V[5], V[6]])
def test_readable_versions(version, compat):
    """Compatible version 1.1.1.4-1.1.1.6 reads, whatever the (newer) version."""
    d = fixture_bytes("scalars_numeric.idv")
    d2 = patch(patch(d, 8, "<Q", version), 16, "<Q", compat)
    assert same(read_quiet(d2), read_quiet(d))


@pytest.mark.parametrize("source", SOURCES)
def test_trailing_bytes_after_tail_allowed(source, tmp_path):
    d = fixture_bytes("mixed_smallblocks_deflate.idv")
    for extra in (b"\x00", b"junk" * 100, struct.pack("<Q", TAIL_SIG)):
        assert same(read_quiet(as_source(source, d + extra, tmp_path)), read_quiet(d))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", SOURCES)
def test_compression_kind_2_zlib_is_read(source, backend, tmp_path):
    """Kind 2 (zlib-wrapped DEFLATE) reads, for blocks and metadata."""
    for name in ("mixed_smallblocks_deflate.idv", "annotations_custom.idv"):
        m = model_of(name)
        for c in m.cols:
            c.comp = 2
            for e in c.meta:
                e.comp = 2
        d, _ = build(m)
        with idv.open(as_source(source, d, tmp_path)) as f:
            assert all(c.compression == "Zlib" for c in f.columns)
        assert same(read_quiet(as_source(source, d, tmp_path), backend=backend),
                    read_quiet(fixture_bytes(name)))


def test_compression_kind_2_bad_checksum():
    m = model_of("scalars_text.idv")
    m.cols[0].comp = 2
    z = bytearray(compress(2, m.cols[0].blocks[0]))
    z[-1] ^= 1                               # Adler-32
    m.cols[0].stored[0] = bytes(z)
    expect_error(build(m)[0], r"column 0 'Txt' block 0 .*corrupt compressed data")


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("what", ["codec", "compression", "both"])
def test_unknown_top_level_codec(what, source, tmp_path):
    """Listed, unreadable with a warning naming it; the other columns read as before."""
    m = model_of("scalars_numeric.idv")
    c = m.cols[3]
    if what in ("codec", "both"):
        c.codec, c.params = "Float8", b"\x01\x02"
    if what in ("compression", "both"):
        c.comp, c.stored = 7, {0: b"\x00" * 5}
    d, _ = build(m)
    with pytest.warns(idv.IdvWarning, match=rf"column 3 '{c.name}'"):
        f = idv.open(as_source(source, d, tmp_path))
    with f:
        assert f.column_names == [x.name for x in m.cols]
        col = f[3]
        assert not col.readable
        assert (col.type is None) == (what != "compression")
        assert str(f.schema)
        with pytest.raises(idv.UnsupportedCodecError, match=rf"column 3 '{c.name}'"):
            col.read()
        with pytest.raises(idv.UnsupportedCodecError):
            col[0:2]
        if what != "compression":
            assert "Float8" in str(f.schema)
        got = f.read()
        assert c.name not in got
        want = read_quiet(fixture_bytes("scalars_numeric.idv"))
        for i in range(10):
            if i != 3:
                assert same(got[m.cols[i].name], want[i][0])


def test_unknown_metadata_codec_is_skipped():
    m = model_of("annotations_custom.idv")
    m.cols[1].meta[3].codec = "Decimal"
    m.cols[1].meta[4].comp = 9
    d, _ = build(m)
    with idv.open(d) as f:
        with pytest.warns(idv.IdvWarning) as record:
            meta = f[1].metadata
        messages = [str(w.message) for w in record]
        assert any("column 1 'Score' metadata 'MyDouble'" in w and "Decimal" in w
                   for w in messages), messages
        assert any("column 1 'Score' metadata 'MyI64'" in w and "compression 9" in w
                   for w in messages), messages
        assert "MyDouble" not in meta and "MyI64" not in meta
        assert f[1].metadata_types["MyDouble"] is None
        assert same(f[1].read(), read_quiet(fixture_bytes("annotations_custom.idv"))[1][0])


@pytest.mark.parametrize("source", SOURCES)
def test_length_prefixed_idv(source, tmp_path):
    """An IDV behind an int32 length prefix (model zips): the prefix bounds the stream the same
    way for every source; a prefix cutting the IDV short is a truncated file."""
    d = fixture_bytes("scalars_text.idv")
    want = read_quiet(d)
    for prefix, extra in ((len(d), b""), (len(d), b"more model bytes")):
        blob = struct.pack("<i", prefix) + d + extra
        assert same(read_quiet(as_source(source, blob, tmp_path)), want)
    for prefix in (len(d) - 1, len(d) // 2):
        blob = struct.pack("<i", prefix) + d
        expect_error(blob, rf"tail offset \d+ .*outside the file of {prefix} bytes", tmp_path,
                     source)
    for prefix in (0, -1, len(d) + 1):       # not a plausible prefix: not skipped
        blob = struct.pack("<i", prefix) + d
        expect_error(blob, r"byte 0: not an \.idv file: bad signature ", tmp_path, source)


def test_messages_name_the_place_for_file_objects():
    """The error raised for a file-object source names the same place as for bytes."""
    for name in ("corrupt_deflate", "text_boundary_backwards", "lookup_offset_beyond_file",
                 "metadata_duplicate_kind", "bad_tail_signature"):
        data, pattern = CASES[name]()
        assert expect_error(io.BytesIO(data), pattern) == expect_error(data, pattern)


# ============================================================================ 4. leaks



def test_text_decoders_do_not_leak():
    """Reading text-heavy files again and again keeps no Python objects (a leaked reference to
    each decoded str would show as thousands of blocks)."""
    datas = [fixture_bytes(n) for n in TEXT_HEAVY]

    def once():
        for _ in range(10):
            for d in datas:
                read_quiet(d, threads=1, slices=False)
    blocks, objs, _ = _grows(once)
    assert blocks < 300, f"{blocks} memory blocks kept"
    assert objs < 100, f"{objs} objects kept"


def test_big_text_column_does_not_leak():
    """200,000 strings per read: a leaked str per row, or the C boundary array of each block,
    would add megabytes per read."""
    data = fixture_bytes("multiblock_200k_deflate.idv")

    def once():
        for _ in range(3):
            with idv.open(data) as f:
                f["Name"].read()
    once()      # one more warm-up: the heaps of threads that earlier tests left settle
    blocks, objs, rss = _grows(once, rounds=4)
    assert blocks < 300, f"{blocks} memory blocks kept"
    assert objs < 100, f"{objs} objects kept"
    if rss is not None:     # 12 reads: a leak of 1.6 MB per read would be ~20 MB
        assert rss < 6 << 20, f"resident memory grew by {rss} bytes"


def test_failing_decoders_do_not_leak():
    """The error paths free what they allocated."""
    cases = [CASES[n]()[0] for n in ("text_boundary_backwards", "text_invalid_utf8_lead",
                                     "text_invalid_utf8_surrogate_encoded", "corrupt_deflate",
                                     "vbuffer_indices_unsorted", "metadata_text_invalid_utf8",
                                     "dvbool_pattern_11", "key2_count_zero")]

    def once():
        for _ in range(20):
            for d in cases:
                try:
                    read_quiet(d, threads=1, slices=False)
                except idv.IdvFormatError:
                    pass
    blocks, objs, _ = _grows(once)
    assert blocks < 300, f"{blocks} memory blocks kept"
    assert objs < 100, f"{objs} objects kept"




@pytest.mark.skipif(os.environ.get("IDV_VALGRIND") == "0", reason="IDV_VALGRIND=0")
def test_valgrind_read_loop(tmp_path):
    """Valid and corrupt files read under memcheck: no invalid access inside idv's modules."""
    import shutil
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind not installed")
    if not FIXTURE_FILES:
        pytest.skip(MISSING)
    paths = [str(SAMPLE_DIR / n) for n in ("scalars_text.idv", "vectors_sparse.idv",
                                        "mixed_smallblocks_none.idv", "annotations_custom.idv")]
    for name in VALGRIND_CASES:
        p = tmp_path / f"{name}.idv"
        p.write_bytes(CASES[name]()[0])
        paths.append(str(p))
    written = tmp_path / "checksummed.idv"        # idv's own: checksums and statistics
    idv.write(written, {"x": [float(i) for i in range(1000)],
                        "t": [f"row {i}" for i in range(1000)]}, rows_per_block=64)
    paths.append(str(written))
    script = tmp_path / "loop.py"
    script.write_text(VALGRIND_SCRIPT)
    env = dict(os.environ, PYTHONMALLOC="malloc", PYTHONPATH=str(REPO_DIR))
    r = subprocess.run(["valgrind", "--error-limit=no", sys.executable, str(script), *paths],
                       capture_output=True, text=True, env=env, timeout=1200)
    assert "ok" in r.stdout, r.stderr[-3000:]
    errors = valgrind_errors_in_idv(r.stderr)
    assert not errors, "\n\n".join(errors[:5])


# ============================================================================ helpers

def _truncation_offsets(n, rng):
    if n <= SMALL:
        return range(n)
    edges = {0, 1, 7, 8, 55, 56, 255, 256, 257, n - 9, n - 8, n - 7, n - 1}
    return sorted(edges | {rng.randrange(n) for _ in range(150)})


def _flip_positions(data, rng, count):
    """Random positions, plus every header byte and every tail byte."""
    tail = tail_offset(data)
    pos = [rng.randrange(len(data)) for _ in range(count)]
    return list(range(0, 56)) + list(range(tail, tail + 8)) + pos


def _rss():
    """Resident memory in bytes (Linux), else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _grows(fn, rounds=5):
    """(Python memory blocks, gc objects, resident bytes) kept after rounds of fn(), counted
    from the end of the first round (warm-up: caches, the thread pool, numpy's free lists)."""
    def measure():
        gc.collect()
        return sys.getallocatedblocks(), len(gc.get_objects()), _rss()
    fn()
    before = measure()
    for _ in range(rounds):
        fn()
    after = measure()
    rss = None if before[2] is None else after[2] - before[2]
    return after[0] - before[0], after[1] - before[1], rss


def valgrind_errors_in_idv(stderr: str):
    """Memcheck's error reports with a frame in one of idv's extension modules (CPython,
    numpy and the dynamic loader have known noise without suppression files)."""
    blocks, cur = [], []
    for line in stderr.splitlines():
        line = re.sub(r"^==\d+== ?", "", line)
        if line.strip():
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    blocks.append(cur)
    ours = re.compile(r"idv/_\w+\.cpython|\b_(codecs|cursor|toc|lookup|header|compression)\.c:")
    return ["\n".join(b) for b in blocks
            if b and re.search(r"Invalid (read|write|free)|uninitialised|overlap|Mismatched", b[0])
            and any(ours.search(x) for x in b)]


ISOLATED_SCRIPT = """
import resource, sys, time, tracemalloc, warnings
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))   # a huge allocation fails here
sys.path.insert(0, sys.argv[1])
import corrupt_cases as C, readback as R, idv
for name in sys.argv[2:]:
    data, pattern = C.CASES[name]()
    tracemalloc.start()
    t = time.perf_counter()
    try:
        R.read_quiet(data, threads=1)
        outcome = "no error"
    except idv.IdvFormatError as e:
        outcome = "IdvFormatError: " + str(e)
    except BaseException as e:
        outcome = type(e).__name__ + ": " + str(e)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(repr((name, outcome, time.perf_counter() - t, peak)), flush=True)
"""


VALGRIND_SCRIPT = """
import sys, warnings, idv
import numpy as np
for p in sys.argv[1:]:
    data = open(p, "rb").read()
    for n in (len(data), len(data) - 1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with idv.open(data[:n], threads=2) as f:
                    for c in f.columns:
                        c.metadata
                        if c.readable and idv.types.item_type(c.type) is idv.Text:
                            # text straight into Arrow's layout, and into StringDType
                            reads = [lambda: c.read_text_blocks(0, c.num_blocks)]
                            if hasattr(getattr(np, "dtypes", None), "StringDType"):
                                reads.append(c.read_strings)
                            for read in reads:
                                try:
                                    read()
                                except idv.IdvFormatError:
                                    pass
                        if c.readable:
                            c.read()
                    # rows at random: checksummed blocks inflated in part
                    f.take(np.arange(0, f.num_rows, 61))
        except idv.IdvFormatError:
            pass
print("ok")
"""
