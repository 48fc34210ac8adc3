#!/usr/bin/env python3
"""Coverage-guided fuzzing of the read path and of ``idv.verify`` (atheris, libFuzzer's engine).

Every input is used as a user would use a file: open it, print its schema, read every column
(dense and sparse), a row, every annotation, then verify it, in a process whose address space
is limited (RLIMIT_AS, ``IDV_FUZZ_ADDRESS_SPACE`` bytes, 3 GiB by default) with idv's default
memory limit. The exceptions allowed out are ``idv.IdvFormatError`` (its subclasses included)
and ``idv.MemoryLimitError``; anything else (numpy's MemoryError included), a crash, a leak past
``-rss_limit_mb`` or a hang past ``-timeout`` is a finding.

    pip install atheris
    python fuzz/fuzz_read.py --seeds CORPUS_DIR          # write the seed corpus, then
    python fuzz/fuzz_read.py CORPUS_DIR -runs=1000000 -rss_limit_mb=3072 -timeout=20
    python fuzz/fuzz_read.py --replay CORPUS_DIR_OR_FILE...   # each input once, no libFuzzer

The arguments after the script's own are libFuzzer's (``-help=1`` lists them). docs/development.md
has the AddressSanitizer build. tests/test_fuzz.py runs a short, bounded session in CI.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import harness


def exercise(data: bytes) -> None:
    """Open, inspect, read and verify `data`; let through only what a file may raise."""
    import idv

    with harness.quiet():
        _one_pass_agrees(data)
        try:
            with idv.open(data) as f:
                str(f.schema)
                repr(f)
                for col in f.columns:
                    _exercise_column(col)
        except harness.file_errors():
            pass
        report = idv.verify(io.BytesIO(data))
        report.to_text()


def _one_pass_agrees(data: bytes) -> None:
    """A file the one pass of C accepts when it opens (idv._reader.opening, idv._parts) is one the
    checks part by part accept, with the same tables: else a check is skipped (a finding)."""
    from idv._reader import opening
    from idv._storage import source

    fast = opening._in_memory(memoryview(data), True)
    if fast is None:
        return
    try:
        slow = opening._in_parts(source.MemorySource(data), True)
        same = _same_opened(fast, slow)
    except harness.file_errors() as e:
        raise AssertionError(f"the one pass at open accepts what the checks part by part "
                             f"refuse: {e}") from e
    if not same:
        raise AssertionError("the one pass at open and the checks part by part disagree")


def _same_opened(fast, slow) -> bool:
    """Whether two idv._reader.opening.Opened of one file hold the same facts."""
    def crcs(o, e):
        if o.sums is None:
            return None
        if o.tables.crcs is not None:
            return o.tables.crcs[e.index].tolist()
        t = o.tables.lookup(e.index)
        return o.sums.expected(t["offset"], t["disk"]).tolist()
    return (fast.header.pack() == slow.header.pack() and fast.head == slow.head
            and [(e.pack(), c, d) for e, c, d in fast.described]
            == [(e.pack(), c, d) for e, c, d in slow.described]
            and all(fast.tables.lookup(e.index).tobytes() == slow.tables.lookup(e.index).tobytes()
                    and [m.pack() for m in fast.tables.metadata(e.index)]
                    == [m.pack() for m in slow.tables.metadata(e.index)]
                    and fast.tables.sizes_checked(e.index) == slow.tables.sizes_checked(e.index)
                    and crcs(fast, e) == crcs(slow, e)
                    for e, _, _ in fast.described)
            and fast.tables.regions.starts.tolist() == slow.tables.regions.starts.tolist()
            and fast.tables.regions.stops.tolist() == slow.tables.regions.stops.tolist())


def _exercise_column(col) -> None:
    try:
        col.metadata
    except harness.file_errors():
        pass
    if not col.readable:
        return
    for read in (col.read, lambda: col.read(sparse=True) if _sparse_readable(col.type) else None,
                 lambda: col[len(col) - 1] if len(col) else None, lambda: col[::3]):
        harness.outcome(read, harness.file_errors())


def _sparse_readable(t) -> bool:
    """Vectors of numbers, Booleans or keys: what read(sparse=True) takes (others: TypeError)."""
    import idv

    return isinstance(t, idv.types.Vector) and (
        isinstance(t.item, idv.types.Key) or t.item.dtype.kind in "biuf")


def seed_files() -> dict:
    """{name: bytes}: the project's ML.NET-written fixtures and the bundled sample, plus small
    files written here with every item type, compressed and not."""
    import numpy as np

    import idv

    paths = sorted((harness.REPO / "testdata").glob("*.idv")) + [Path(idv.sample_path())]
    seeds = {p.name: p.read_bytes() for p in paths}
    rng = np.random.default_rng(0)
    columns = {
        "f32": rng.normal(size=40).astype(np.float32),
        "i64": rng.integers(-5, 5, size=40),
        "u8": rng.integers(0, 255, size=40).astype(np.uint8),
        "flag": rng.random(40) < 0.5,
        "text": [f"w{i}é" * (i % 4) for i in range(40)],
        "vec": rng.normal(size=(40, 3)).astype(np.float32),
        "when": np.arange(40).astype("datetime64[s]"),
    }
    for compression in ("deflate", "none"):
        buf = io.BytesIO()
        idv.write(buf, columns, compression=compression, rows_per_block=16)
        seeds[f"written_{compression}.idv"] = buf.getvalue()
    buf = io.BytesIO()      # a metadata table as long as the lookup tables (3 blocks of 16 B)
    idv.write(buf, {"v": columns["vec"][:3, :2]}, rows_per_block=1,
              metadata={"v": {"SlotNames": ["a", "b"]}})
    seeds["slot_names_3_blocks.idv"] = buf.getvalue()
    return seeds


def write_seeds(folder: Path) -> int:
    """The seed corpus: seed_files() in `folder`."""
    return harness.write_files(folder, seed_files())


if __name__ == "__main__":
    harness.main(sys.argv, exercise, write_seeds)
