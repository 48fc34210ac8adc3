#!/usr/bin/env python3
"""Fuzzing of zip archives (ML.NET model zips) and of the ``ARCHIVE:ENTRY`` specs that name
their .idv streams (atheris, libFuzzer's engine).

An input is a zip archive, saved as ``model.zip`` in a folder named ``x::y`` (a spec that looks
like fsspec's chaining). It is listed with ``idv.zip_entries`` and with ``idv ls`` (run in this
process), and each stream found (the first MAX_ENTRIES) is opened by its spec and every column
read, then compared with the same stream read from the bytes zipfile gives for its entry. Seeds
hold entries named ``run::1.idv``, ``data/http://x.idv``, ``a\\b.idv``, a length-prefixed
stream with no extension (as ML.NET embeds them), a zip inside the zip, an entry declaring
2 GiB, and bytes before the first member. Allowed out: ``idv.IdvFormatError`` (a damaged
archive is one) and ``idv.MemoryLimitError``; ``idv ls`` may fail on one line, but an
"internal error" is a finding, as are values that differ between the two reads.

    python fuzz/fuzz_archive.py --seeds CORPUS_DIR
    python fuzz/fuzz_archive.py CORPUS_DIR -runs=1000000 -rss_limit_mb=3072 -timeout=30
    python fuzz/fuzz_archive.py --replay CORPUS_DIR_OR_FILE...
"""
from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import zipfile
from pathlib import Path

import harness

MAX_ENTRIES = 4
MAX_COMPARED = 16 << 20         # entries larger than this are read by spec only
_folder = None


def archive_path() -> Path:
    """Where each input is saved: one folder per process, removed at exit."""
    global _folder
    if _folder is None:
        shm = "/dev/shm" if Path("/dev/shm").is_dir() else None      # memory, not disk
        _folder = tempfile.TemporaryDirectory(prefix="idv-fuzz-", dir=shm)
        (Path(_folder.name) / "x::y").mkdir()
    return Path(_folder.name) / "x::y" / "model.zip"


def exercise(data: bytes) -> None:
    """List the archive `data` both ways, open every stream by its spec, compare."""
    import idv
    from idv.cli.app import main as cli

    path = archive_path()
    path.write_bytes(data)
    errors = harness.file_errors()
    out, err = io.StringIO(), io.StringIO()
    with harness.quiet(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        cli(["ls", str(path)])
    assert "internal error" not in err.getvalue(), err.getvalue()
    with harness.quiet():
        try:
            entries = idv.zip_entries(path)
        except errors:
            return
        for entry in entries[:MAX_ENTRIES]:
            try:
                with idv.open(entry.spec) as f:
                    got = harness.read_all(f, errors)
            except errors:
                continue
            if entry.size <= MAX_COMPARED:
                harness.check_same(_direct(path, entry), got, f"entry {entry.name!r}")


def _direct(path, entry):
    """Each column of `entry` read from the bytes zipfile gives for it."""
    import idv

    with zipfile.ZipFile(path) as z:
        stream = z.read(entry.name)[4 if entry.prefixed else 0:]
    with idv.open(stream) as f:
        return harness.read_all(f, harness.file_errors())


def write_seeds(folder: Path) -> int:
    """Zips of fuzz_read's small seed files under names that look like specs and URLs."""
    from fuzz_read import seed_files

    small = [data for data in seed_files().values() if len(data) < 5000][:3]
    a, b, c = small
    prefixed = len(c).to_bytes(4, "little") + c
    seeds = {
        "names.zip": _zip({"run::1.idv": a, "data/http://x.idv": b, "a\\b.idv": c}),
        "stored.zip": _zip({"Data/Schema": prefixed, "x.idv": a}, zipfile.ZIP_STORED),
        "nested.zip": _zip({"inner.zip": _zip({"in.idv": a}), "out.idv": b}),
        "huge.zip": _declare(_zip({"big.idv": a}), 0x7FFFFFFF),
        "empty.zip": _zip({}),
        "self_extracting.zip": bytes(16) + _zip({"x.idv": a}),       # bytes before it
    }
    return harness.write_files(folder, seeds)


def _zip(entries, method=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buf.getvalue()


def _declare(data: bytes, size: int) -> bytes:
    """`data` (a zip) whose first entry declares `size` bytes uncompressed in the central
    directory (offset 24 of its record)."""
    at = data.index(b"PK\x01\x02") + 24
    return data[:at] + size.to_bytes(4, "little") + data[at + 4:]


if __name__ == "__main__":
    harness.main(sys.argv, exercise, write_seeds)
