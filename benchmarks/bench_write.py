#!/usr/bin/env python3
"""Write benchmark: idv.write against ML.NET's own saver (oracle bench-write), same data.

    python3 benchmarks/bench_write.py                 # 1M rows x (Int32, Single, Double, Text)
    python3 benchmarks/bench_write.py --rows 200000 --repeat 5 --json
    python3 benchmarks/bench_write.py --no-mlnet      # idv only

The data is the oracle's synthetic bench-write table (I32 = i, F32 = i * 0.25, F64 = i / 7,
Txt = "row i"), built in memory first (not timed). Each idv time is one full ``idv.write`` to a
file: checking and converting the input, encoding, compressing, writing, fsync and rename.
ML.NET's time is its BinarySaver on a cached in-memory view. With DeterministicBlockOrder both
files are compared byte for byte (idv's zlib backend must match).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import idv  # noqa: E402


def oracle_path():
    env = os.environ.get("IDV_MLNET_ORACLE")
    if env:
        return env
    return os.path.join(ROOT, "..", "shared", "oracle", "mlnet_oracle.py")


def synthetic(rows):
    i = np.arange(rows)
    return {"I32": i.astype(np.int32), "F32": (i * 0.25).astype(np.float32), "F64": i / 7.0,
            "Txt": np.array(["row %d" % k for k in range(rows)], dtype=object)}


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), sorted(times)[len(times) // 2]


def mlnet(out, rows, repeat, compression):
    cmd = [sys.executable, oracle_path(), "bench-write", out, "--rows", str(rows), "--kinds",
           "i32,f32,f64,text", "--repeat", str(repeat), "--compression", compression,
           "--deterministic-block-order", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip().splitlines()[-1:] or ["failed"]
    try:
        res = json.loads(proc.stdout)
    except ValueError:
        return None, ["unreadable oracle output"]
    return res["best_s"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-mlnet", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    data = synthetic(a.rows)
    raw = sum(v.nbytes for k, v in data.items() if k != "Txt") + \
        sum(len(s) + 4 for s in data["Txt"])
    results = []
    with tempfile.TemporaryDirectory() as d:
        for backend, comp in (("zlib", "deflate"), ("libdeflate", "deflate"), ("zlib", "none")):
            path = os.path.join(d, f"idv_{backend}_{comp}.idv")
            try:
                best, median = best_of(lambda: idv.write(path, data, compression=comp,
                                                         backend=backend), a.repeat)
            except ImportError as e:
                results.append({"writer": f"idv {backend}", "compression": comp,
                                "error": str(e)})
                continue
            row = {"writer": f"idv {backend}", "compression": comp, "best_s": round(best, 4),
                   "median_s": round(median, 4), "bytes": os.path.getsize(path),
                   "MB_per_s": round(raw / best / 1e6, 1)}
            if not a.no_mlnet and backend == "zlib":
                theirs = os.path.join(d, f"mlnet_{comp}.idv")
                t, err = mlnet(theirs, a.rows, a.repeat, comp)
                if err:
                    row["mlnet_error"] = err
                else:
                    row["mlnet_best_s"] = round(t, 4)
                    with open(path, "rb") as f1, open(theirs, "rb") as f2:
                        row["byte_identical_to_mlnet"] = f1.read() == f2.read()
            results.append(row)
    if a.json:
        print(json.dumps({"rows": a.rows, "raw_bytes": raw, "results": results}, indent=1))
        return
    print(f"{a.rows} rows x (Int32, Single, Double, Text), {raw / 1e6:.1f} MB of payload")
    for r in results:
        if "error" in r:
            print(f"  {r['writer']:16} {r['compression']:8} {r['error']}")
            continue
        line = (f"  {r['writer']:16} {r['compression']:8} best {r['best_s']:.3f} s  "
                f"({r['MB_per_s']} MB/s, {r['bytes']} bytes)")
        if "mlnet_best_s" in r:
            line += (f"   ML.NET {r['mlnet_best_s']:.3f} s, identical: "
                     f"{r['byte_identical_to_mlnet']}")
        elif "mlnet_error" in r:
            line += f"   ML.NET: {r['mlnet_error']}"
        print(line)


if __name__ == "__main__":
    main()
