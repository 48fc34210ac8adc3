#!/usr/bin/env python3
"""Engine queries against their floor: polars and DuckDB queries over .idv (``scan_idv``,
``arrow_dataset``), each against idv's own decode of the same columns and against the same
query over those columns already in memory (the engine's own work, which no reader saves).

    python3 benchmarks/bench_queries.py            # 2M rows, best of 15
    python3 benchmarks/bench_queries.py --quick    # 100,000 rows, one round (smoke run)
    python3 benchmarks/bench_queries.py --json     # machine-readable results on stdout

The data is the shared ``engines-speed`` check's: 2M rows of a sorted Int64 ``Id``, an Int32,
a Single ``Score``, a 5-valued Text ``City``, a Boolean ``Label`` and a Vector<Single, 8>,
written by ``idv.write`` into a temporary folder. The queries are the check's: P1 polars
``mean(Score)``, P2 polars ``City == "Nice"`` counted, D1 DuckDB ``avg(Score)``, D2 DuckDB
``count(*) where City = 'Nice'``, each opening the file in the timed call; and T1, polars
reading ``City`` whole (``select("City").collect()``: its Text handed over as string views).
For each:

  decode     ``idv.to_arrow`` of the column the check compares with (``Score``, ``City``)
  read       ``idv.to_arrow`` of the columns the engine asks for (polars counts rows through
             ``City`` and ``Label``, DuckDB through ``Id``), with the query's filter where it
             has one (idv tests the rows for both engines, reading ``City`` for the test):
             idv's part of the query
  in memory  the engine's part: the query over what ``read`` gives, already in memory (for
             polars, a polars IO source that yields it as one frame already made: what polars
             spends on a Python source; for DuckDB, the Arrow table); where idv tested the rows,
             their count without the filter (the least the engine does with them)
  query      the query over the file

Then the first rows, what a first look at a file asks: polars ``head(5)``, DuckDB ``select *
... limit 5`` and ``arrow_dataset(...).head(5)``, each against idv's own read of those five
rows of every column (``record_batch_reader(rows=slice(0, 5))``), opening included.

and the ratios: ``check`` = decode / query (the shared check's figure, goal 0.9), ``ceiling``
= decode / (read + in memory): the most the check can give with an adapter that costs
nothing beyond idv's part and the engine's, where the engine's work does not overlap idv's
(its decode keeps both cores of a 2-core machine busy); ``adapter`` = query - read - in
memory, what the adapter (and the engine's handling of a scan) adds. All runs interleaved,
best of the rounds, the garbage collector off around each.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import idv  # noqa: E402
import bench_read  # noqa: E402  (options, the machine's description)

NICE = "Nice"


def write_data(path, rows):
    """The check's file of `rows` rows; returns (mean of Score, rows whose City is Nice)."""
    import pyarrow as pa
    rng = np.random.default_rng(2024)
    cities = pa.array(["Paris", "Lyon", NICE, "Lille", "Nantes"])
    codes = rng.integers(0, 5, rows)
    score = rng.random(rows, dtype=np.float32)
    feats = rng.random((rows, 8), dtype=np.float32)
    idv.write(path, pa.table({
        "Id": np.arange(rows, dtype=np.int64),
        "Age": rng.integers(18, 90, rows).astype(np.int32), "Score": score,
        "City": cities.take(pa.array(codes)), "Label": rng.random(rows) < 0.5,
        "Features": pa.FixedSizeListArray.from_arrays(pa.array(feats.ravel()), 8)}))
    return float(score.astype(np.float64).mean()), int((codes == 2).sum())


def queries(path):
    """{name: (decode column, columns asked, filter (idv's form) or None, query over the file,
    the engine's part over what idv reads)}."""
    import duckdb
    import polars as pl
    from polars.io.plugins import register_io_source
    from idv.polars import scan_idv
    duckdb.sql("set threads = 2")
    nice = pl.col("City") == NICE
    is_nice = [("City", "==", NICE)]

    def duck(sql, source):              # the query's `source`: DuckDB finds it here
        return duckdb.sql(sql).fetchall()[0][0]

    def given(df):
        """A LazyFrame over a polars IO source that yields `df` as it is."""
        def source(with_columns, predicate, n_rows, batch_size):
            yield df
        return register_io_source(source, schema=df.schema)

    def over_file(sql):
        def run():
            with idv.arrow_dataset(path) as ds:
                return duck(sql, ds)
        return run

    return {
        "P1": ("Score", ["Score"], None,
               lambda: scan_idv(path).select(pl.col("Score").mean()).collect().item(),
               lambda df: given(df).select(pl.col("Score").mean()).collect().item()),
        "P2": ("City", ["City", "Label"], is_nice,
               lambda: scan_idv(path).filter(nice).select(pl.len()).collect().item(),
               lambda df: given(df).select(pl.len()).collect().item()),
        "T1": ("City", ["City"], None, lambda: scan_idv(path).select("City").collect(),
               lambda df: given(df).select("City").collect()),
        "D1": ("Score", ["Score"], None, over_file("select avg(Score) from source"),
               lambda t: duck("select avg(Score) from source", t)),
        "D2": ("City", ["Id"], is_nice,
               over_file(f"select count(*) from source where City = '{NICE}'"),
               lambda t: duck("select count(*) from source", t)),
    }


def _value(pl, result):
    """A query's figure: its number, or a frame of ``City``'s count of NICE."""
    if isinstance(result, pl.DataFrame):
        return float(result.get_column("City").eq(NICE).sum())
    return float(result)


def figures(path, rounds, mean, nice, log):
    """One dict per query: the four times (ms) and the two ratios."""
    import polars as pl
    out = []
    for name, (column, asked, where, query, in_memory) in queries(path).items():
        def read():
            return idv.to_arrow(path, columns=asked, filter=where)
        table = read()
        mem = pl.from_arrow(table) if name.startswith(("P", "T")) else table    # polars
        got, again = (_value(pl, v) for v in (query(), in_memory(mem)))
        want = mean if column == "Score" else nice
        if abs(got - want) > 1e-5 * abs(want) or abs(again - want) > 1e-5 * abs(want):
            raise SystemExit(f"{name}: {got} where {want} was expected")
        t = bench_read.race({"decode": lambda: idv.to_arrow(path, columns=[column]),
                             "read": read, "in memory": lambda: in_memory(mem),
                             "query": query}, rounds, rotate=True)
        row = {"name": name, "columns": asked, **{k: v * 1e3 for k, v in t.items()},
               "check": t["decode"] / t["query"],
               "ceiling": t["decode"] / (t["read"] + t["in memory"]),
               "adapter": (t["query"] - t["read"] - t["in memory"]) * 1e3}
        log(f"{name}: decode {row['decode']:.1f} ms, read {row['read']:.1f}, in memory "
            f"{row['in memory']:.1f}, query {row['query']:.1f} (adapter {row['adapter']:.1f}): "
            f"check {row['check']:.2f}x, ceiling {row['ceiling']:.2f}x")
        out.append(row)
    return out


def first_rows(path, rounds, log):
    """The engines' first five rows (polars head, DuckDB LIMIT, arrow_dataset head) against
    idv's own read of them: ms each, and own / engine."""
    import duckdb
    from idv.polars import scan_idv
    duckdb.sql("set threads = 2")

    def own():
        return idv.record_batch_reader(path, rows=slice(0, 5)).read_all()

    def limit(source):                  # the query's `source`: DuckDB finds it here
        got = duckdb.sql("select * from source limit 5")
        return got.to_arrow_table() if hasattr(got, "to_arrow_table") else got.arrow()

    def duck():
        with idv.arrow_dataset(path) as ds:
            return limit(ds)

    def head():
        with idv.arrow_dataset(path) as ds:
            return ds.head(5)
    engines = {"polars head": lambda: scan_idv(path).head(5).collect().to_arrow(),
               "DuckDB limit": duck, "arrow_dataset head": head}
    want = own().column("Id").to_pylist()
    for name, fn in engines.items():
        got = fn()
        ids = got.column("Id").to_pylist()
        if ids != want:
            raise SystemExit(f"{name}: rows {ids} where {want} were expected")
    t = bench_read.race({"own": own, **engines}, rounds, rotate=True)
    out = {k: v * 1e3 for k, v in t.items()}
    log("first 5 rows: idv's read {:.2f} ms; ".format(out["own"]) + ", ".join(
        f"{k} {out[k]:.2f} ms ({t['own'] / t[k]:.2f}x)" for k in engines))
    return out


def main(argv=None):
    a = bench_read.options(__doc__.split("\n\n")[0], "100,000 rows, one round").parse_args(argv)
    rounds, log = bench_read.runs_and_log(a, 15)
    rows = 100_000 if a.quick else 2_000_000
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "queries.idv")
        mean, nice = write_data(path, rows)
        results = figures(path, rounds, mean, nice, log)
        first = first_rows(path, rounds, log)
    if a.json:
        print(json.dumps({"machine": bench_read.machine(), "quick": a.quick, "rows": rows,
                          "rounds": rounds, "results": results, "first_rows": first},
                         indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
