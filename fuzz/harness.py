"""What the fuzzing harnesses (fuzz/fuzz_*.py) share: the address-space limit, the exceptions
a hostile input may raise, the comparison of two reads, and the command line (``--seeds``,
``--replay``, else atheris with libFuzzer's own arguments).

A harness is a module with ``exercise(data)`` and ``write_seeds(folder)`` that calls
``harness.main(sys.argv, exercise, write_seeds)``.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The address space of the fuzzing process: reads beyond idv's memory limit must be refused
# (MemoryLimitError) before numpy or the decoders run out of it. 0: none (under ASan, whose
# shadow memory takes terabytes of address space).
ADDRESS_SPACE = int(os.environ.get("IDV_FUZZ_ADDRESS_SPACE", 3 << 30))


def limit_address_space() -> None:
    """RLIMIT_AS of this process: ADDRESS_SPACE bytes (0: none)."""
    import resource

    if ADDRESS_SPACE:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def file_errors() -> tuple:
    """What reading a damaged or hostile file may raise; anything else is a finding."""
    import idv

    return idv.IdvFormatError, idv.MemoryLimitError


def remote_errors() -> tuple:
    """What reading from a misbehaving server may raise besides file_errors()."""
    import idv

    return file_errors() + (idv.RemoteError,)


@contextlib.contextmanager
def quiet():
    """Warnings (IdvWarning about damage, numpy's) are expected from hostile input."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def outcome(read, errors):
    """("value", what read() returned) or ("error", its exception's type) for one of
    `errors`; any other exception goes through (a finding)."""
    try:
        return "value", read()
    except errors as e:
        return "error", type(e)


def read_all(f, errors) -> list:
    """The outcome of reading each column of the open file `f`, in order."""
    return [(c.name, outcome(c.read, errors) if c.readable else ("unreadable", None))
            for c in f.columns]


def same(a, b) -> bool:
    """Whether two values read are the same: arrays of one dtype and shape whose items are
    equal (NaN equal to NaN, NaT to NaT), ragged vectors by values and offsets, lists and
    tuples item by item, others by ==."""
    import numpy as np

    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or \
                a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind == "O":
            return all(same(x, y) for x, y in zip(a.ravel().tolist(), b.ravel().tolist()))
        if a.dtype.kind in "fcmM":
            return bool(np.array_equal(a, b, equal_nan=True))
        return bool(np.array_equal(a, b))
    if hasattr(a, "values") and hasattr(a, "offsets"):       # idv's Ragged vectors
        return type(a) is type(b) and same(a.values, b.values) and same(a.offsets, b.offsets)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and bool(a == b)


def check_same(local, other, what) -> None:
    """Raise AssertionError (a finding) unless each column of `other` read as in `local`, or
    failed with an allowed error (its outcome "error")."""
    assert [n for n, _ in local] == [n for n, _ in other], (what, "columns differ")
    for (name, (kind, value)), (_, (okind, ovalue)) in zip(local, other):
        if okind == "error" or (kind, okind) == ("unreadable", "unreadable"):
            continue
        assert kind == "value" and same(value, ovalue), (
            f"{what}: column {name!r} read {okind} {ovalue!r:.200} where the local read "
            f"gave {kind} {value!r:.200}")


def write_files(folder: Path, files: dict) -> int:
    """Write {name: bytes} into `folder` (a seed corpus); how many."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return len(files)


def corpus_files(paths) -> list:
    """The files of the given files and folders."""
    return [f for p in map(Path, paths) for f in (sorted(p.iterdir()) if p.is_dir() else [p])]


def replay(exercise, paths) -> int:
    """Run every file of the given files and folders once, without libFuzzer: to re-check a
    corpus or a finding, and under AddressSanitizer (fuzz/asan.sh)."""
    files = corpus_files(paths)
    limit_address_space()
    for f in files:
        print(f, flush=True)
        exercise(f.read_bytes())
    return len(files)


def _merge_coordinator(argv) -> bool:
    """Whether this process is libFuzzer's -merge=1 coordinator, which starts the harness
    again (-merge_inner=1) to run the inputs and only reads the coverage that one reports."""
    return "-merge=1" in argv[1:] and not any(a.startswith("-merge_inner=") for a in argv)


def main(argv, exercise, write_seeds) -> None:
    """The command line of a harness: ``--seeds DIR``, ``--replay PATH...``, or atheris
    (libFuzzer's arguments: a corpus folder, ``-runs=N``, ``-help=1``...)."""
    if len(argv) >= 3 and argv[1] == "--seeds":
        print(f"{write_seeds(Path(argv[2]))} seeds in {argv[2]}")
        return
    if len(argv) >= 3 and argv[1] == "--replay":
        print(f"{replay(exercise, argv[2:])} inputs replayed, nothing found")
        return
    import atheris

    limit_address_space()
    if not _merge_coordinator(argv):    # it runs no input: instrumenting takes seconds
        with atheris.instrument_imports(include=["idv"]):
            import idv  # noqa: F401  (instrumented for coverage)
    atheris.Setup(argv, exercise)
    atheris.Fuzz()


if __name__ == "__main__":
    sys.exit("run a harness: fuzz/fuzz_read.py, fuzz/fuzz_remote.py, fuzz/fuzz_archive.py")
