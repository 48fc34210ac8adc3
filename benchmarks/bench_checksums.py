#!/usr/bin/env python3
"""What checksums cost: idv.write and a whole-file read with idv's CRC-32s on and off, same data.

    python3 benchmarks/bench_checksums.py              # 2M rows x 11 numeric columns, 15 rounds
    python3 benchmarks/bench_checksums.py --quick      # smoke run: 100,000 rows, one round
    python3 benchmarks/bench_checksums.py --rounds 25 --json

The data (built with numpy, not timed): Int32, Int64, Single, Double, Boolean and an 8-item
Single vector, plus five more Double columns: 11 columns. Each round times a write with
checksums (the default) and one without, then a read of every column with checksums checked
(the default) and one skipped (``idv.open(..., checksums=False)``), of one checksummed file
written and read once before the rounds; with DEFLATE (the default) and without compression,
all at the default backend and threads. Which of each pair goes first alternates by round.
The best time of each over the rounds is reported, and the cost of checksums as the ratio of
the two minus one (the issue's goal: at most 5% at the default settings). Both wall time and
the process's CPU time (all its threads) are reported: on a shared machine the CPU time is the
steadier of the two, as other processes stretch wall time, not CPU time.

``results`` holds those four default figures. ``variants`` holds reads off the default path,
timed in the same rounds: the file given as an open file object instead of a path, and each
other installed DEFLATE backend (``--no-variants`` leaves them out).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import idv  # noqa: E402
from idv import compression as _backends  # noqa: E402
from bench_read import crc32_option, use_crc32  # noqa: E402

TARGET_COST = 0.05


def dataset(rows):
    i = np.arange(rows)
    data = {"I32": i.astype(np.int32), "I64": i * 1000003, "F32": (i * 0.25).astype(np.float32),
            "F64": i / 7, "B": i % 3 == 0,
            "Vec8": ((i[:, None] + np.arange(8)) / 2).astype(np.float32)}
    for k in range(5):
        data[f"D{k}"] = np.sin(i * (k + 1) * 0.001)
    return data


def timed(fn, times):
    """Run fn, appending (wall seconds, this process's CPU seconds in all its threads)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    times.append((time.perf_counter() - t0, time.process_time() - c0))


def read_all(path, file_object=False, **options):
    """Read every column of `path` (given as a path, or as an open file object)."""
    if file_object:
        with open(path, "rb") as fh, idv.open(fh, **options) as f:
            f.read()
    else:
        with idv.open(path, **options) as f:
            f.read()


def read_cases(compression, variants):
    """(label, source, backend) of each read timed: the default first."""
    cases = [("default", "path", None)]
    if variants:
        cases.append(("file object", "file object", None))
        if compression == "deflate":
            default = _backends.default_backend()
            cases += [(f"backend {b}", "path", b) for b in _backends.installed() if b != default]
    return cases


def figure(compression, what, on, off, **extra):
    """The best wall and CPU times with and without checksums, and the costs they give."""
    (wall_on, cpu_on), (wall_off, cpu_off) = (np.min(on, axis=0), np.min(off, axis=0))
    return {"compression": compression, "what": what, **extra, "checksums_s": wall_on,
            "without_s": wall_off, "cost": wall_on / wall_off - 1, "checksums_cpu_s": cpu_on,
            "without_cpu_s": cpu_off, "cost_cpu": cpu_on / cpu_off - 1}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--quick", action="store_true", help="100,000 rows, one round")
    p.add_argument("--no-variants", dest="variants", action="store_false",
                   help="time only the default read (a path, the default backend)")
    p.add_argument("--json", action="store_true")
    crc32_option(p)
    a = p.parse_args(argv)
    use_crc32(a)
    rows, rounds = (100_000, 1) if a.quick else (a.rows, a.rounds)
    data = dataset(rows)
    results, variants = [], []
    with tempfile.TemporaryDirectory() as d:
        for compression in ("deflate", "none"):
            paths = {s: os.path.join(d, f"{compression}_{s}.idv") for s in (True, False)}
            # reads read one checksummed file written (and read once) before the rounds:
            # the files the rounds write are new each time, and their first read pays more
            source_file = os.path.join(d, f"{compression}_read.idv")
            idv.write(source_file, data, compression=compression)
            read_all(source_file)
            cases = read_cases(compression, a.variants)
            t = {("write", s): [] for s in (True, False)}
            t.update({(label, s): [] for label, _, _ in cases for s in (True, False)})
            for r in range(rounds):
                order = (True, False) if r % 2 == 0 else (False, True)   # alternately first
                for sums in order:
                    timed(lambda: idv.write(paths[sums], data, compression=compression,
                                            checksums=sums), t["write", sums])
                for label, source, backend in cases:
                    for sums in order:
                        timed(lambda: read_all(source_file, source == "file object",
                                               checksums=sums, backend=backend),
                              t[label, sums])
            results.append(figure(compression, "write", t["write", True], t["write", False]))
            results.append(figure(compression, "read", t["default", True], t["default", False],
                                  file_bytes=os.path.getsize(paths[True]),
                                  file_bytes_without=os.path.getsize(paths[False])))
            for label, source, backend in cases[1:]:
                variants.append(figure(compression, "read", t[label, True], t[label, False],
                                       source=source,
                                       backend=backend or _backends.default_backend()))
    report = {"quick": a.quick, "rows": rows, "rounds": rounds, "target_cost": TARGET_COST,
              "default_backend": _backends.default_backend(),
              "crc32": idv._compression.CRC32_LIBRARY, "threads": idv._resources.threads.default_threads(),
              "results": results, "variants": variants}
    if a.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{rows:,} rows x 11 columns, best of {rounds}; backend {report['default_backend']}, "
          f"CRC-32 by {report['crc32']}, {report['threads']} threads")
    for r in results + variants:
        how = f" ({r['source']}, {r['backend']})" if "source" in r else ""
        print(f"  {r['what']:5} {r['compression']:7}{how:28}  with {r['checksums_s']:.3f} s  "
              f"without {r['without_s']:.3f} s  cost {r['cost']:+.1%}  (CPU time: "
              f"{r['checksums_cpu_s']:.3f} s vs {r['without_cpu_s']:.3f} s, "
              f"{r['cost_cpu']:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
