"""A mapped file truncated or written in place while a stream reads it: the batches not yet
handed out raise IdvFormatError ("truncated", "changed while reading"), never a SIGBUS that
kills the process nor bytes that were not the file's when it opened. Each case runs in a child
process, so that a SIGBUS fails the test instead of ending the run."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    import idv
    path, how, entry = sys.argv[1], sys.argv[2], sys.argv[3]
    idv.write(path, {"x": np.arange(400_000, dtype=np.float64)}, rows_per_block=10_000,
              compression="none", checksums=False)
    os.utime(path, (1_000_000_000, 1_000_000_000))       # a modification time long past
    f = idv.open(path)
    if entry == "reader":
        batches = iter(idv.record_batch_reader(f, ["x"]))
    elif entry == "iter_batches":
        batches = iter(f.iter_batches(["x"]))
    else:
        batches = iter(idv.arrow_dataset(path).to_batches(columns=["x"], batch_size=20_000))
    first = next(batches)
    if how == "truncate":
        os.truncate(path, 4096)
    else:
        with open(path, "r+b") as out:
            out.seek(os.path.getsize(path) // 2)
            out.write(b"\\xff" * 8)
    try:
        total = first.num_rows + sum(b.num_rows for b in batches)
        print("read", total)
    except idv.IdvFormatError as e:
        print("error", e)
""")


@pytest.mark.parametrize("entry", ["reader", "iter_batches", "arrow_dataset"])
@pytest.mark.parametrize("how", ["truncate", "overwrite"])
def test_a_stream_stops_with_an_error_when_its_file_changes(tmp_path, how, entry):
    if entry == "arrow_dataset":
        pytest.importorskip("pyarrow.dataset")
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "f.idv"), how, entry],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])   # -7: SIGBUS
    want = "truncated while open" if how == "truncate" else "changed while reading"
    assert done.stdout.startswith("error") and want in done.stdout, done.stdout
