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
import os
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The address space of the fuzzing process: reads beyond idv's memory limit must be refused
# (MemoryLimitError) before numpy or the decoders run out of it.
ADDRESS_SPACE = int(os.environ.get("IDV_FUZZ_ADDRESS_SPACE", 3 << 30))


def limit_address_space() -> None:
    """RLIMIT_AS of this process: ADDRESS_SPACE bytes (0: none)."""
    import resource

    if ADDRESS_SPACE:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def exercise(data: bytes) -> None:
    """Open, inspect, read and verify `data`; let through only what a file may raise."""
    import idv

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with idv.open(data) as f:
                str(f.schema)
                repr(f)
                for col in f.columns:
                    _exercise_column(col)
        except (idv.IdvFormatError, idv.MemoryLimitError):
            pass
        report = idv.verify(io.BytesIO(data))
        report.to_text()


def _exercise_column(col) -> None:
    import idv

    try:
        col.metadata
    except (idv.IdvFormatError, idv.MemoryLimitError):
        pass
    if not col.readable:
        return
    for read in (col.read, lambda: col.read(sparse=True) if _sparse_readable(col.type) else None,
                 lambda: col[len(col) - 1] if len(col) else None, lambda: col[::3]):
        try:
            read()
        except (idv.IdvFormatError, idv.MemoryLimitError):
            pass


def _sparse_readable(t) -> bool:
    """Vectors of numbers, Booleans or keys: what read(sparse=True) takes (others: TypeError)."""
    import idv

    return isinstance(t, idv.types.Vector) and (
        isinstance(t.item, idv.types.Key) or t.item.dtype.kind in "biuf")


def write_seeds(folder: Path) -> int:
    """The seed corpus: the project's ML.NET-written fixtures and the bundled sample, plus
    small files written here with every item type, compressed and not."""
    import numpy as np

    import idv

    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in sorted((REPO / "testdata").glob("*.idv")) + [Path(idv.sample_path())]:
        (folder / p.name).write_bytes(p.read_bytes())
        n += 1
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
        (folder / f"written_{compression}.idv").write_bytes(buf.getvalue())
        n += 1
    return n


def replay(paths: list[str]) -> int:
    """Run every file of the given files and folders once, without libFuzzer: for a build
    under AddressSanitizer (docs/development.md), and to re-check a corpus or a finding."""
    files = [f for p in map(Path, paths) for f in (sorted(p.iterdir()) if p.is_dir() else [p])]
    limit_address_space()
    for f in files:
        print(f, flush=True)
        exercise(f.read_bytes())
    return len(files)


def main(argv: list[str]) -> None:
    if len(argv) >= 3 and argv[1] == "--seeds":
        print(f"{write_seeds(Path(argv[2]))} seeds in {argv[2]}")
        return
    if len(argv) >= 3 and argv[1] == "--replay":
        print(f"{replay(argv[2:])} inputs replayed, nothing found")
        return
    import atheris

    limit_address_space()
    with atheris.instrument_imports(include=["idv"]):
        import idv  # noqa: F401  (instrumented for coverage)
    atheris.Setup(argv, exercise)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
