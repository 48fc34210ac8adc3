#!/usr/bin/env python3
"""What statistics buy: a 1% filter on a sorted timestamp through idv.read(filter=),
idv.polars.scan_idv, DuckDB over the LazyFrame and DuckDB over idv.arrow_dataset, each against
the same read without the filter, and pyarrow.dataset's filtered read of the same data in
Parquet; what writing the statistics costs; and a Text equality no statistics can skip
(``city == "Nice"``, 1 row in 5 of every block) through the same doors against Parquet's,
and a key compared with its label (``city == "category_7"``, a key of 1,000 labels written
from an Arrow dictionary, which Parquet stores dictionary-encoded).

    python3 benchmarks/bench_filter.py              # 8M rows, best of 3
    python3 benchmarks/bench_filter.py --quick      # smoke run: 200,000 rows, one round
    python3 benchmarks/bench_filter.py --rounds 5 --json

The data (built with numpy, not timed): a sorted DateTime ``ts`` (one a second), an Int64,
two Doubles and a Single: 5 columns, written by idv.write (DEFLATE, 8,192 rows per block)
and by pyarrow.parquet.write_table (default settings: Snappy, its own row groups). The filter
keeps the hour of rows in the middle (1% of them). The best wall time of each over the
rounds (each query run once untimed first) is reported, with the speedup of the filtered
query over the unfiltered one, and the write's cost of statistics: the CPU time (all
threads) of a write with them over one without, minus one, the two interleaved, best of the
rounds, for these numeric columns and for a Text-only file of as many rows.
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


def dataset(rows):
    rng = np.random.default_rng(0)
    return {"ts": np.datetime64("2024-01-01") + np.arange(rows).astype("timedelta64[s]"),
            "id": np.arange(rows, dtype=np.int64) * 7,
            "a": rng.random(rows), "b": rng.normal(size=rows),
            "c": rng.random(rows, dtype=np.float32)}


def text_dataset(rows):
    """Two Text columns: short ids sharing a prefix, and words of 1-40 characters, 1 in 10
    not ASCII."""
    rng = np.random.default_rng(1)
    ids = np.char.add("user-", rng.integers(0, 10**7, rows).astype(str)).astype(object)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzé"))
    lengths = rng.integers(1, 41, rows)
    pool = ["".join(rng.choice(letters[:26 if i % 10 else 27], n)) for i, n in
            enumerate(rng.integers(1, 41, 4096))]
    words = np.array([pool[i] for i in rng.integers(0, len(pool), rows)], dtype=object)
    return {"id": ids, "word": words[np.argsort(lengths, kind="stable")]}


def city_dataset(rows):
    """An Int64 and a Text column of 5 values, in random order."""
    rng = np.random.default_rng(2)
    cities = np.array(["Paris", "Lyon", "Nice", "Lille", "Nantes"], dtype=object)
    return {"id": np.arange(rows, dtype=np.int64), "city": cities[rng.integers(0, 5, rows)]}


def key_dataset(rows):
    """An Int64 and a key of 1,000 labels (written from an Arrow dictionary: Key<UInt32> with
    KeyValues, a dictionary to Arrow, a Categorical to polars), in random order."""
    import pyarrow as pa
    rng = np.random.default_rng(3)
    labels = pa.array([f"category_{i}" for i in range(1000)])
    return pa.table({"id": np.arange(rows, dtype=np.int64), "city": pa.DictionaryArray
                     .from_arrays(pa.array(rng.integers(0, 1000, rows).astype(np.int32)),
                                  labels)})


def text_filter(d, rows, rounds, data=None, value="Nice"):
    """Best times (s) of `id where city == value` through each door, and Parquet's: `data`
    city_dataset's Text (default) or key_dataset's key compared with a label."""
    import polars as pl
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from idv.polars import scan_idv
    data = city_dataset(rows) if data is None else data
    path, pq_path = os.path.join(d, "city.idv"), os.path.join(d, "city.parquet")
    idv.write(path, data)
    want = int(sum(v == value for v in idv.to_arrow(path)["city"].to_pylist()))
    pq.write_table(idv.to_arrow(path), pq_path)
    doors = {
        "idv.read": lambda: len(idv.read(path, ["id"], filter=[("city", "==", value)])["id"]),
        "idv.to_arrow": lambda: idv.to_arrow(path, ["id"], filter=f"city == '{value}'").num_rows,
        "idv.record_batch_reader": lambda: sum(b.num_rows for b in idv.record_batch_reader(
            path, ["id"], filter=f"city == '{value}'")),
        "polars scan_idv": lambda: scan_idv(path).filter(pl.col("city") == value)
        .select("id").collect().height,
        "DuckDB over arrow_dataset": lambda: _duckdb(
            idv.arrow_dataset(path), f"select count(id) from src where city = '{value}'")[0][0],
        "pyarrow.dataset Parquet": lambda: ds.dataset(pq_path).to_table(
            columns=["id"], filter=ds.field("city") == value).num_rows,
    }
    out = {}
    for name, fn in doors.items():
        t, n = best(fn, rounds)
        if n != want:
            raise AssertionError(f"{value} filter, {name}: {n} rows, not {want}")
        out[name] = t
    return out


def write_cost(path, data, rounds):
    """(CPU seconds of a write with statistics, without): interleaved, best of `rounds`."""
    on, off = [], []
    for _ in range(max(rounds, 1)):
        for flag, times in ((True, on), (False, off)):
            t0 = time.process_time()
            idv.write(path, data, statistics=flag)
            times.append(time.process_time() - t0)
    return min(on), min(off)


def best(fn, rounds, warm=True):
    """(best wall seconds, fn's last result), after one run not timed (imports, caches)."""
    times, out = [], fn() if warm else None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=8_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="200,000 rows, one round")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows, rounds = (200_000, 1) if a.quick else (a.rows, a.rounds)
    data = dataset(rows)
    lo = np.datetime64("2024-01-01") + np.timedelta64(rows // 2, "s")
    hi = lo + np.timedelta64(rows // 100, "s")
    want = int(rows // 100)
    results = []
    with tempfile.TemporaryDirectory() as d:
        path, plain = os.path.join(d, "ts.idv"), os.path.join(d, "plain.idv")
        write_on, write_off = write_cost(plain, data, rounds)
        text_on, text_off = write_cost(plain, text_dataset(rows), rounds)
        idv.write(path, data)

        flt = [("ts", ">=", lo), ("ts", "<", hi)]

        def full_numpy():
            got = idv.read(path)
            keep = (got["ts"] >= lo) & (got["ts"] < hi)
            return int(keep.sum())
        results.append(_pair("idv.read", rounds, want,
                             lambda: len(idv.read(path, filter=flt)["ts"]), full_numpy))

        import polars as pl
        from idv.polars import scan_idv
        pred = (pl.col("ts") >= lo.astype("datetime64[us]").item()) & \
            (pl.col("ts") < hi.astype("datetime64[us]").item())
        results.append(_pair("polars scan_idv", rounds, want,
                             lambda: scan_idv(path).filter(pred).collect().height,
                             lambda: scan_idv(path).collect().filter(pred).height))

        where = f"ts >= TIMESTAMP '{lo}' and ts < TIMESTAMP '{hi}'"
        query = f"select count(*) from (select * from src where {where})"
        # DuckDB pushes a time filter into a LazyFrame in its own microseconds only
        results.append(_pair("DuckDB over scan_idv", rounds, want,
                             lambda: _duckdb(scan_idv(path, datetime="us"), query)[0][0],
                             lambda: _duckdb_unfiltered(scan_idv(path, datetime="us"), lo, hi)))
        results.append(_pair("DuckDB over arrow_dataset", rounds, want,
                             lambda: _duckdb(idv.arrow_dataset(path), query)[0][0],
                             lambda: _duckdb_unfiltered(idv.arrow_dataset(path), lo, hi)))

        import pyarrow.dataset as ds
        import pyarrow.parquet as pq
        pq_path = os.path.join(d, "ts.parquet")
        pq.write_table(idv.to_arrow(path), pq_path)
        import pyarrow as pa
        expr = (ds.field("ts") >= pa.scalar(lo.astype("datetime64[us]"))) & \
            (ds.field("ts") < pa.scalar(hi.astype("datetime64[us]")))
        results.append(_pair("pyarrow.dataset Parquet", rounds, want,
                             lambda: ds.dataset(pq_path).to_table(filter=expr).num_rows,
                             lambda: ds.dataset(pq_path).to_table().filter(expr).num_rows))
        text = text_filter(d, rows, rounds)
        key = text_filter(d, rows, rounds, key_dataset(rows), "category_7")
    by = {r["query"]: r for r in results}
    report = {"quick": a.quick, "rows": rows, "rounds": rounds, "matching_rows": want,
              "write_statistics_s": write_on, "write_without_s": write_off,
              "write_cost": write_on / write_off - 1,
              "text_write_statistics_s": text_on, "text_write_without_s": text_off,
              "text_write_cost": text_on / text_off - 1, "results": results,
              "text_filter_s": text, "key_filter_s": key,
              "idv_vs_parquet": by["pyarrow.dataset Parquet"]["filtered_s"] /
              by["idv.read"]["filtered_s"]}
    if a.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{rows:,} rows x 5 columns, a 1% filter on a sorted timestamp, best of {rounds}")
    for r in results:
        print(f"  {r['query']:<26} filtered {r['filtered_s'] * 1000:8.1f} ms, "
              f"unfiltered {r['unfiltered_s'] * 1000:8.1f} ms: {r['speedup']:6.1f}x")
    print(f"  idv.read(filter=) against Parquet's filtered read: "
          f"{report['idv_vs_parquet']:.2f}x")
    for name, on, off in (("numeric", write_on, write_off), ("Text-only", text_on, text_off)):
        print(f"  {name} write, CPU with statistics {on:.2f} s, without {off:.2f} s: "
              f"{on / off - 1:+.1%}")
    for what, times in (("city == 'Nice' (a Text of 5 values, every block matches)", text),
                        ("city == 'category_7' (a key of 1,000 labels)", key)):
        print(f"{rows:,} rows, id where {what}")
        for name, t in times.items():
            print(f"  {name:<26} {t * 1000:8.1f} ms: "
                  f"{times['pyarrow.dataset Parquet'] / t:.2f}x Parquet's")
    return 0


def _duckdb(src, query):
    """The rows of a DuckDB query over `src` (a LazyFrame or a pyarrow Dataset, which DuckDB
    finds by its name here)."""
    import duckdb
    return duckdb.sql(query).fetchall()


def _duckdb_unfiltered(src, lo, hi):
    """Every row through DuckDB into Arrow, then the filter (DuckDB pushes a WHERE down into
    its source even through a subquery: this is the query with nothing pushed down)."""
    import duckdb
    import pyarrow.compute as pc
    t = duckdb.sql("select * from src").arrow()
    t = t.read_all() if hasattr(t, "read_all") else t
    ts = t.column("ts")
    keep = pc.and_(pc.greater_equal(ts, lo.astype("datetime64[us]")),
                   pc.less(ts, hi.astype("datetime64[us]")))
    return int(pc.sum(keep).as_py())


def _pair(name, rounds, want, filtered, unfiltered):
    """The best times of a query with the filter pushed down and without."""
    t_on, n_on = best(filtered, rounds)
    t_off, n_off = best(unfiltered, rounds)
    if n_on != want or n_off != want:
        raise AssertionError(f"{name}: {n_on} and {n_off} rows, not {want}")
    return {"query": name, "filtered_s": t_on, "unfiltered_s": t_off, "speedup": t_off / t_on,
            "rows": n_on}


if __name__ == "__main__":
    sys.exit(main())
