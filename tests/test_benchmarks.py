"""The benchmark scripts still run: each in its quick mode (small data, one run of each figure,
every measured path), checked for a clean exit and results, not for speed. Each runs as a
script in a child process, but bench_engines, whose main() runs in this process on the test
session's Ray and Spark (conftest.py).

bench_read writes its data with ML.NET once (into the git-ignored benchmarks/_data/) and needs
pyarrow; without the oracle it is skipped, bench_write then runs with --no-mlnet. About 10 s
together once bench_read's data exists (15 s the first time).
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from reference import REPO_DIR, find_oracle

BENCHMARKS_DIR = REPO_DIR / "benchmarks"
# script -> its quick mode (with JSON output, to check the results)
QUICK = {
    "bench_read.py": ["--quick", "--repeat", "1", "--json"],
    "bench_write.py": ["--quick", "--json"],
    # zlib's own CRC-32 kernel, as for the figures without carry-less multiplication
    "bench_checksums.py": ["--quick", "--json", "--crc32", "zlib"],
    "bench_remote.py": ["--quick", "--json"],
    "bench_dataset.py": ["--quick", "--json"],
    "bench_arrow.py": ["--quick", "--json"],
    "bench_convert.py": ["--quick", "--json"],
    "bench_torch.py": ["--quick", "--json"],
    "bench_engines.py": ["--quick", "--json"],
    "bench_scale.py": ["--quick", "--json"],
    "bench_filter.py": ["--quick", "--json"],
    "bench_queries.py": ["--quick", "--json"],
}
# script -> (what it needs the ML.NET oracle for, the option that does without, if any); the
# others do not need it
NEEDS_MLNET = {
    "bench_read.py": ("to write its data", None),
    "bench_write.py": ("for ML.NET's own write", "--no-mlnet"),
    "bench_remote.py": ("to write its data (bench_read's)", None),
    "bench_dataset.py": ("to write its data (bench_read's)", None),
    "bench_arrow.py": ("to write its data (bench_read's)", None),
    "bench_convert.py": ("to write its data (bench_read's)", None),
    "bench_engines.py": ("to write its data (bench_read's)", None),
}


def test_every_benchmark_has_a_smoke_run():
    scripts = sorted(p.name for p in BENCHMARKS_DIR.glob("*.py"))
    assert scripts == sorted(QUICK), "add the new benchmark to QUICK (and NEEDS_MLNET)"


def _requirements(script):
    """Skip unless what `script` needs is installed; (the oracle or None, options to add)."""
    pytest.importorskip("pyarrow")
    if script == "bench_dataset.py":
        pytest.importorskip("distributed")
    if script == "bench_torch.py":
        pytest.importorskip("torch", reason="bench_torch.py needs PyTorch")
    if script in ("bench_filter.py", "bench_queries.py"):
        pytest.importorskip("polars", reason=f"{script} times scan_idv")
        pytest.importorskip("duckdb", reason=f"{script} times DuckDB")
    oracle, reason = find_oracle()
    if oracle is None and script in NEEDS_MLNET:
        why, without = NEEDS_MLNET[script]
        if without is None:
            pytest.skip(f"{script} needs the ML.NET oracle {why}: {reason}")
        return None, [without]
    return oracle, []


@pytest.mark.parametrize("script", sorted(set(QUICK) - {"bench_engines.py"}))
def test_benchmark_quick_mode(script):
    oracle, extra = _requirements(script)
    env = dict(os.environ)
    if oracle is not None:
        env["IDV_MLNET_ORACLE"] = str(oracle.script)
    proc = subprocess.run([sys.executable, str(BENCHMARKS_DIR / script), *QUICK[script],
                           *extra], capture_output=True, text=True, env=env, cwd=REPO_DIR,
                          timeout=600)
    assert proc.returncode == 0, f"{script} exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
    check_report(script, json.loads(proc.stdout), oracle)


def test_engines_benchmark_quick_mode_on_the_sessions_engines(ray_runtime, spark, capsys,
                                                              monkeypatch):
    """bench_engines.py's main() in this process, on the test session's Ray and Spark (it
    leaves them running)."""
    oracle, extra = _requirements("bench_engines.py")
    monkeypatch.setenv("IDV_MLNET_ORACLE", str(oracle.script))
    monkeypatch.chdir(REPO_DIR)
    monkeypatch.setattr(sys, "path", list(sys.path))        # the script adds its folders
    spec = importlib.util.spec_from_file_location("bench_engines",
                                                  BENCHMARKS_DIR / "bench_engines.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    capsys.readouterr()
    import idv.spark
    try:
        bench.main([*QUICK["bench_engines.py"], *extra])
    finally:        # the benchmark registers the source without pushdown: the session's back
        idv.spark.register(spark, pushdown=True)
    out = capsys.readouterr().out       # Ray may print to this process's stdout before it
    report = json.loads(out[out.index('{\n "quick"'):])
    check_report("bench_engines.py", report, oracle)
    assert ray_runtime.is_initialized() and spark.range(3).count() == 3   # still running


def check_report(script, report, oracle):
    """The JSON report of `script`'s quick mode holds every figure, each measured."""
    assert report["quick"] is True
    if script == "bench_checksums.py":
        assert [(r["what"], r["compression"]) for r in report["results"]] == [
            ("write", "deflate"), ("read", "deflate"), ("write", "none"), ("read", "none")]
        assert all(r["checksums_s"] > 0 and r["without_s"] > 0 for r in report["results"])
        assert report["crc32"] == "zlib"
        return
    if script == "bench_remote.py":
        assert len(report["columns"]) == 11
        for r in report["columns"]:     # every block of the column came, and little else
            assert r["disk_bytes"] - 70_000 <= r["read_bytes"] <= 1.1 * r["disk_bytes"], r
            assert r["open_requests"] <= 4
        assert report["column_http_s"] > 0 and report["column_local_s"] > 0
        return
    if script == "bench_dataset.py":
        d, many = report["dask"], report["many_files"]
        assert d["partitions"] == 8 and d["small_partitions"] == 8 * 13   # 100k rows / 8192
        assert d["idv_read_s"] > 0 and d["dask_s"] > 0
        assert many["64 open"]["files"] == 100 and many["64 open"]["open_files"] <= 64
        assert many["default"]["open_files"] == 100
        assert all(r["maps"] <= r["open_files"] for r in many.values())
        return
    if script == "bench_engines.py":
        for engine in ("ray", "spark"):      # each measured, or skipped saying why
            r = report[engine]
            assert r.get("skipped") or (r["idv_s"] > 0 and r["parquet_s"] > 0), r
        return
    if script == "bench_arrow.py":
        assert {t["name"].split(":")[0] for t in report["targets"]} == {
            "deflate", "none", "zero copy, mlnet's file", "zero copy, idv's file"}
        assert all(t["ratio"] > 0 for t in report["targets"])
        assert {"idv_arrow_deflate", "pq_table_deflate", "idv_pandas_none",
                "zero_copy_mlnet_arrow", "zero_copy_mlnet_copy", "zero_copy_idv_arrow",
                "zero_copy_idv_floor", "bool_arrow", "bool_pq", "bool_read",
                "bool_inflate"} <= set(report["figures"])
        return
    if script == "bench_filter.py":
        assert [r["query"] for r in report["results"]] == [
            "idv.read", "polars scan_idv", "DuckDB over scan_idv", "DuckDB over arrow_dataset",
            "pyarrow.dataset Parquet"]
        assert all(r["rows"] == report["matching_rows"] > 0 for r in report["results"])
        assert report["write_statistics_s"] > 0 and report["idv_vs_parquet"] > 0
        return
    if script == "bench_queries.py":
        assert [r["name"] for r in report["results"]] == ["P1", "P2", "T1", "D1", "D2"]
        for r in report["results"]:         # each time measured, each ratio from them
            assert min(r["decode"], r["read"], r["in memory"], r["query"]) > 0, r
            assert r["check"] == pytest.approx(r["decode"] / r["query"])
            assert r["ceiling"] == pytest.approx(r["decode"] / (r["read"] + r["in memory"]))
        return
    if script == "bench_convert.py":
        assert [d["dataset"] for d in report["datasets"]] == ["numeric", "text"]
        for d in report["datasets"]:
            whats = [r["what"] for r in d["results"]]
            assert whats[:3] == ["pyarrow copy", "Parquet -> .idv", ".idv -> Parquet"]
            for r in d["results"]:
                assert r["seconds"] > 0 and r["ratio"] > 0 and r["output_bytes"] > 0
                assert r["peak_rss"] >= r["rss_after_imports"] > 0
        return
    if script == "bench_torch.py":
        assert report["rows"] == 100_000 and report["batch"] == 4096
        assert set(report["figures"]) == {
            "idv_iterable_rows_s", "parquet_iterable_rows_s", "idv_map_rows_s",
            "numpy_map_rows_s", "iterable_vs_parquet", "map_vs_numpy"}
        assert all(v > 0 for v in report["figures"].values())
        return
    if script == "bench_scale.py":
        assert list(report["take"]) == ["default", "rows_per_block=1024"]
        for r in report["take"].values():
            assert {"pyarrow", "floor"} <= set(r["ratios"]) and r["seconds"]["idv"] > 0
            assert 0 < r["blocks_hit"] <= r["blocks"]
        assert report["take"]["rows_per_block=1024"]["rows_per_block"] == 1024
        assert set(report["wide"]["ratios"]) == {"open", "one column", "one column filtered",
                                                 "all"}
        assert report["many_files"]["files"] == 50 and report["many_files"]["ratio"] > 0
        for kind in ("forms", "forms_text", "forms_key"):
            forms = report["many_files"][kind]
            assert list(forms) == ["to_arrow", "stream", "to_pandas"]
            assert all(r["ratio"] > 0 and r["seconds"]["idv"] > 0 for r in forms.values())
        assert list(report["curves"]) == ["rows", "columns", "files", "width"]
        for points in report["curves"].values():
            assert len(points) >= 2 or points[0]["shape"] == 100_000
            assert all(p["ratio"] > 0 and p["seconds"]["idv"] > 0 for p in points)
        return
    if script == "bench_read.py":
        assert report["figures"] and report["targets"]
        assert ("mlnet_numeric_deflate" in report["figures"]) == (oracle is not None)
        assert [r["rows"] for r in report["long"]] == [100_000]
        assert report["long"][0]["vs_floor"] > 0 and report["long"][0]["vs_pyarrow"] > 0
    else:
        assert [r["dataset"] for r in report["results"]] == ["numeric", "mixed", "text"]
        for r in report["results"]:
            writers = {x["writer"] for x in r["results"]}
            assert ("ML.NET" in writers) == (oracle is not None), r["errors"]
            assert {"idv zlib", "idv"} <= writers
            assert r["checks"]["floor_s"] > 0 and r["checks"]["default_vs_floor"] > 0
