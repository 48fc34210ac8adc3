#!/usr/bin/env python3
"""Ray and Spark benchmark: .idv through idv.ray and idv.spark against Parquet of the same rows
through each engine's own reader, same run.

    python3 benchmarks/bench_engines.py            # 8 files of 2M x 11 numeric rows
    python3 benchmarks/bench_engines.py --quick    # 2 files of 100k rows, a smoke run
    python3 benchmarks/bench_engines.py --json     # machine-readable results on stdout

The .idv files are bench_dataset's (copies of bench_read's ML.NET-written numeric file); the
Parquet files are converted from them once (idv.convert, into the git-ignored
benchmarks/_data/). Figures, each the best of --repeat, the two readers of an engine
interleaved:

  ray            one column's sum over the 8 files: idv.ray.read_idv against
                 ray.data.read_parquet, on ray.init(num_cpus=2)
  spark          the same sum: spark.read.format("idv") (option columns) against
                 spark.read.parquet, on Spark local[2]; the Python data source hands Arrow
                 batches to the JVM, Parquet is read in the JVM
--quick runs each code path once, as cheaply as it can: no warm-up job before the timing, and
Ray's aggregates as tasks (its sort shuffle) rather than its default hash shuffle, whose
actors take seconds a sum on 2 cores (the same for both readers). An engine that is not
installed (or Spark without Java) is reported as skipped, with why. Run
through main() in a process that already has Ray initialized or a Spark session active (the
tests'), the benchmark uses those and leaves them running.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import idv  # noqa: E402
import bench_dataset  # noqa: E402  (its 8 ML.NET-written files)
import bench_read  # noqa: E402  (timing, options, machine description)

COLUMN = bench_dataset.COLUMN
QUICK_FILES = 2


def parquet_files(paths, log):
    """The .idv files as Parquet (one each, made once), in a folder of their own."""
    folder = os.path.join(os.path.dirname(paths[0]) + "_parquet")
    os.makedirs(folder, exist_ok=True)
    out = []
    for p in paths:
        q = os.path.join(folder, os.path.basename(p)[:-4] + ".parquet")
        if not os.path.exists(q) or os.path.getmtime(q) < os.path.getmtime(p):
            log(f"converting {p} to Parquet")
            idv.convert(p, q)
        out.append(q)
    return folder, out


def ray_figures(paths, parquet, repeat, quick, log):
    try:
        import ray
        import idv.ray
    except ImportError as e:
        return {"skipped": f"ray is not installed: {e}"}
    started = not ray.is_initialized()      # else the Ray of the calling process (a test's)
    if started:
        log("Ray: starting (num_cpus=2)")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    shuffle = context.shuffle_strategy
    if quick:
        context.shuffle_strategy = "sort_shuffle_pull_based"
    try:
        sums = {}

        def idv_sum():
            sums["idv"] = idv.ray.read_idv(paths, [COLUMN]).sum(COLUMN)

        def parquet_sum():
            sums["parquet"] = ray.data.read_parquet(parquet).select_columns([COLUMN]).sum(COLUMN)
        if not quick:
            ray.data.range(8, override_num_blocks=2).sum("id")    # workers started before timing
        return _race(idv_sum, parquet_sum, sums, repeat)
    finally:
        context.shuffle_strategy = shuffle
        if started:
            ray.shutdown()


def _race(idv_sum, parquet_sum, sums, repeat):
    """The two sums timed interleaved (best of `repeat`), checked equal: the engine's figures."""
    best = bench_read.race({"idv": idv_sum, "parquet": parquet_sum}, repeat)
    assert abs(sums["idv"] - sums["parquet"]) <= 1e-9 * abs(sums["parquet"]), sums
    return {"idv_s": best["idv"], "parquet_s": best["parquet"],
            "idv_vs_parquet": best["parquet"] / best["idv"]}


def _source(paths):
    """What spark.read.format("idv").load takes for `paths`: their folder when they are all
    of it, else a glob of their names."""
    folder = os.path.dirname(paths[0])
    if len(paths) == len([n for n in os.listdir(folder) if n.endswith(".idv")]):
        return folder
    return os.path.join(folder, "part-[" + "".join(p[-5] for p in paths) + "].idv")


def spark_figures(folder, parquet, repeat, quick, log):
    try:
        import idv.spark
        from pyspark.sql import SparkSession, functions as F
    except ImportError as e:
        return {"skipped": f"pyspark is not installed: {e}"}
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return {"skipped": "Spark needs Java 17 or newer"}
    spark = SparkSession.getActiveSession()     # the calling process's session (a test's)
    started = spark is None
    if started:
        log("Spark: starting (local[2])")
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    idv.spark.register(spark)
    try:
        sums = {}

        def idv_sum():
            df = spark.read.format("idv").option("columns", COLUMN).load(folder)
            sums["idv"] = df.agg(F.sum(COLUMN)).first()[0]

        def parquet_sum():
            df = spark.read.parquet(*parquet)
            sums["parquet"] = df.agg(F.sum(COLUMN)).first()[0]
        if not quick:
            spark.range(8, numPartitions=2).count()     # the executors' first job before timing
        return _race(idv_sum, parquet_sum, sums, repeat)
    finally:
        if started:
            spark.stop()


def main(argv=None):
    a = bench_read.options(__doc__.split("\n")[0]).parse_args(argv)
    repeat, _ = bench_read.runs_and_log(a, 5)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)
    paths = bench_dataset.dataset_files(a.quick, log)
    if a.quick:         # two of the files: every code path, a quarter of the engines' work
        paths = paths[:QUICK_FILES]
    parquet_folder, parquet = parquet_files(paths, log)
    with idv.open(paths[0]) as f:
        rows = f.num_rows
    report = {"quick": a.quick, "repeat": repeat, "machine": bench_read.machine(),
              "files": len(paths), "rows_per_file": rows, "column": COLUMN,
              "ray": ray_figures(paths, parquet, repeat, a.quick, log),
              "spark": spark_figures(_source(paths), parquet, repeat, a.quick, log)}
    if a.json:
        print(json.dumps(report, indent=1))
        return
    print(f"{len(paths)} files x {rows} rows, sum of {COLUMN} (best of {repeat}):")
    for engine in ("ray", "spark"):
        r = report[engine]
        if "skipped" in r:
            print(f"  {engine:6} skipped: {r['skipped']}")
            continue
        print(f"  {engine:6} .idv {r['idv_s']:.3f} s, Parquet {r['parquet_s']:.3f} s "
              f"(.idv at {r['idv_vs_parquet']:.2f}x Parquet's speed)")


if __name__ == "__main__":
    main()
