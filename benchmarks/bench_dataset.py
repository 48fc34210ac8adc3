#!/usr/bin/env python3
"""Dataset and Dask benchmark: a column sum through Dask against idv.read, same run.

    python3 benchmarks/bench_dataset.py            # 8 files of 2M x 11 numeric rows, 1,000 small
    python3 benchmarks/bench_dataset.py --quick    # 8 files of 100k rows, 100 small files
    python3 benchmarks/bench_dataset.py --json     # machine-readable results on stdout

The 8 files are copies of bench_read's ML.NET-written numeric file (bench_read.ensure_data: the
oracle writes it once into the git-ignored benchmarks/_data/). Figures:

  dask sum       one column's sum over the 8 files through idv.dask.read_idv on a
                 distributed.LocalCluster of 2 worker processes (1 thread each, forked from
                 this one), against
                 ``sum(idv.read(p, col))`` in this process (idv's own threads), best of
                 --repeat, interleaved
  overhead       the scheduler's cost per partition: the same sum with one block per partition
                 against the default partitions, (t_small - t_default) / (extra partitions)
  many files     idv.dataset over 1,000 small idv-written files (100 with --quick), in a fresh
                 interpreter: the time to open them, the resident memory and memory maps added,
                 and the time to read one column of all, with max_open_files=64 (the remote
                 default) and with the local default (1,024: every file kept open)
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import idv  # noqa: E402
import bench_read  # noqa: E402  (its ML.NET-written data, its timing and machine description)

COLUMN = "Price"        # a Double column of bench_read's numeric file
FILES = 8


def dataset_files(quick, log):
    """8 copies of bench_read's ML.NET-written numeric file (made once)."""
    src = bench_read.ensure_data(quick, log)["numeric_deflate"]
    folder = os.path.join(bench_read.DATA, f"dataset_{'quick' if quick else 'full'}")
    os.makedirs(folder, exist_ok=True)
    paths = []
    with bench_read.data_lock():        # bench_engines reads them too
        for i in range(FILES):
            p = os.path.join(folder, f"part-{i}.idv")
            if not os.path.exists(p) or os.path.getsize(p) != os.path.getsize(src):
                shutil.copyfile(src, p)
            paths.append(p)
    return paths


def small_files(n, log):
    """n small files (1,000 rows x bench_read's 11 numeric columns each), made once."""
    folder = os.path.join(bench_read.DATA, f"small_{n}")
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f"f{i:05d}.idv") for i in range(n)]
    if not all(os.path.exists(p) for p in paths):
        log(f"writing {n} small files ...")
        for i, p in enumerate(paths):
            idv.write(p, {name: a for name, _t, a in bench_read.numeric_columns(1000, seed=i)})
    return folder, paths


def single_sum(paths):
    return sum(float(idv.read(p, [COLUMN])[COLUMN].sum(dtype=np.float64)) for p in paths)


def dask_figures(paths, repeat, log):
    import dask
    import dask.dataframe  # noqa: F401  (imported before timing read_idv)
    import idv.dask
    from distributed import Client, LocalCluster
    out = {}
    # the workers forked from this process, which has imported dask and idv: spawned, each
    # imports them again, seconds of start-up (most of --quick's time)
    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=":0", silence_logs=40) as cluster, \
            Client(cluster) as c:
        t0 = time.perf_counter()
        ddf = idv.dask.read_idv(paths, [COLUMN])
        out["read_idv_build_s"] = time.perf_counter() - t0
        small = idv.dask.read_idv(paths, [COLUMN], blocks_per_partition=1)
        want = single_sum(paths)
        got = c.compute(ddf[COLUMN].sum()).result()
        got_small = c.compute(small[COLUMN].sum()).result()
        if not (np.isclose(got, want, rtol=1e-9) and np.isclose(got_small, want, rtol=1e-9)):
            sys.exit(f"bench_dataset: the sums differ: dask {got}, {got_small}; idv {want}")
        log(f"racing: dask ({ddf.npartitions} partitions, and {small.npartitions}) "
            f"against idv.read ...")
        best = bench_read.race({
            "idv": lambda: single_sum(paths),
            "dask": lambda: c.compute(ddf[COLUMN].sum()).result(),
            "dask_small": lambda: c.compute(small[COLUMN].sum()).result(),
        }, repeat)
    out.update(partitions=ddf.npartitions, small_partitions=small.npartitions,
               idv_read_s=best["idv"], dask_s=best["dask"], dask_small_s=best["dask_small"],
               dask_vs_idv=best["idv"] / best["dask"],
               overhead_per_partition_ms=1e3 * (best["dask_small"] - best["dask"])
               / (small.npartitions - ddf.npartitions))
    return out


_PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import idv
folder, max_open = sys.argv[2], int(sys.argv[3])
def status():
    with open("/proc/self/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k == "VmRSS":
                return int(v.split()[0]) * 1024
def maps():
    with open("/proc/self/maps") as fh:
        return sum(1 for line in fh if folder in line)
import glob, os
files = sorted(glob.glob(os.path.join(folder, "*.idv")))
for p in files:                                   # the page cache: not measured
    with open(p, "rb") as fh:
        fh.read()
with idv.dataset(files[:2], max_open_files=1) as warm:   # imports, the threads: not measured
    warm.read(["Price"])
r0 = status()
t0 = time.perf_counter()
ds = idv.dataset(folder, max_open_files=max_open)
t1 = time.perf_counter()
r1, m1 = status(), maps()
t2 = time.perf_counter()
total = float(ds.read(["Price"])["Price"].sum())
t3 = time.perf_counter()
print(json.dumps({"files": len(ds.files), "rows": ds.num_rows, "open_s": t1 - t0,
                  "rss_added": r1 - r0, "maps": m1, "open_files": ds.num_open_files,
                  "read_column_s": t3 - t2, "maps_after_read": maps()}))
"""


def many_files(n, repeat, log):
    folder, paths = small_files(n, log)
    out = {}
    from idv._reader.dataset import DEFAULT_MAX_OPEN_FILES
    for label, max_open in (("64 open", 64), ("default", min(n, DEFAULT_MAX_OPEN_FILES))):
        runs = []
        for _ in range(repeat):
            r = subprocess.run([sys.executable, "-c", _PROBE, ROOT, folder, str(max_open)],
                               capture_output=True, text=True, check=True)
            runs.append(json.loads(r.stdout))
        best = min(runs, key=lambda x: x["open_s"])
        best["max_open_files"] = max_open
        out[label] = best
    return out


def main(argv=None):
    a = bench_read.options(__doc__.split("\n")[0]).parse_args(argv)
    repeat, _ = bench_read.runs_and_log(a, 5)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)
    paths = dataset_files(a.quick, log)
    with idv.open(paths[0]) as f:
        rows = f.num_rows
    report = {"quick": a.quick, "repeat": repeat, "machine": bench_read.machine(),
              "files": FILES, "rows_per_file": rows, "column": COLUMN}
    report["dask"] = dask_figures(paths, repeat, log)
    report["many_files"] = many_files(100 if a.quick else 1000, repeat, log)
    if a.json:
        print(json.dumps(report, indent=1))
        return
    d, m = report["dask"], report["many_files"]
    print(f"{FILES} files x {rows} rows, sum of {COLUMN} (best of {repeat}):")
    print(f"  idv.read, one process      {d['idv_read_s']:.3f} s")
    print(f"  idv.dask, 2 workers        {d['dask_s']:.3f} s ({d['partitions']} partitions; "
          f"{d['dask_vs_idv']:.2f}x idv.read's speed)")
    print(f"  one block per partition    {d['dask_small_s']:.3f} s ({d['small_partitions']} "
          f"partitions): {d['overhead_per_partition_ms']:.2f} ms per extra partition")
    print(f"  read_idv (graph, tables)   {d['read_idv_build_s']:.3f} s")
    for label, r in m.items():
        print(f"{r['files']} small files, max_open_files={r['max_open_files']}: open "
              f"{r['open_s']:.3f} s, +{r['rss_added'] / 2**20:.1f} MiB resident, {r['maps']} "
              f"memory maps; one column of all {r['rows']} rows {r['read_column_s']:.3f} s")


if __name__ == "__main__":
    main()
