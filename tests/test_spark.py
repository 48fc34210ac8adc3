"""idv.spark on Spark local[2] (the test session's, conftest.py): ML.NET-written files read through
the data source ``idv`` equal idv's own read (count, sum, a filter on a sorted column, a
projection); a folder of small files is a few tasks, its rows in order; filters Spark pushes
skip the partitions statistics rule out and give the rows idv.read's filter gives, those it
cannot push still give Spark's rows, with or without pushdown; files written through it load
in ML.NET (the oracle) and read back equal; a job whose task fails, or that is killed, leaves
nothing idv.dataset would pick up.
"""
from __future__ import annotations

import os
import shutil

import json

import numpy as np
import pytest

import idv
from expected import assert_column_equal, assert_equal_reads, column_index, expected_column
from reference import fixture, sidecar

pytest.importorskip("pyspark", reason="Spark tests need pyspark 4 (pip install 'idv[spark]')")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark tests need Java 17 or newer (java on PATH or JAVA_HOME)",
                allow_module_level=True)
import idv.spark  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

MIXED = ["mixed_default", "mixed_deflate", "mixed_none", "mixed_smallblocks_deflate"]
SCALARS = ["Id", "F32", "F64", "B", "Txt", "Key", "DT"]


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory):
    """The MIXED files in one directory, in their order."""
    d = tmp_path_factory.mktemp("mixed")
    for i, name in enumerate(MIXED):
        shutil.copy(fixture(name), d / f"{i}-{name}.idv")
    return d


def test_count_sum_filter_and_projection_equal_idv_read(spark):
    path = str(fixture("multiblock_200k_deflate"))
    df = spark.read.format("idv").option("blocksPerPartition", 5).load(path)
    f = idv.open(path)
    want = f.read(["Id", "X"])
    assert df.rdd.getNumPartitions() == -(-f["Id"].num_blocks // 5) > 1
    assert df.count() == 200_000
    assert df.agg(F.sum("Id")).first()[0] == int(want["Id"].sum())
    ids = want["Id"]
    assert np.all(np.diff(ids) >= 0)          # a sorted column
    got = df.where((F.col("Id") >= 12_345) & (F.col("Id") < 54_321)).select("X", "Id")
    rows = got.orderBy("Id").collect()
    keep = (ids >= 12_345) & (ids < 54_321)
    assert [r.Id for r in rows] == ids[keep].tolist()
    assert np.array_equal(np.array([r.X for r in rows], np.float32), want["X"][keep],
                          equal_nan=True)
    assert got.columns == ["X", "Id"]


def test_small_files_share_partitions_row_ranges_and_rows_in_order(spark, tmp_path):
    """A folder of small files is a few Spark tasks, one share of the files per core (a task's
    fixed cost dwarfs a small file), each task reading its files' rows end to end in order."""
    n, k = 40, 1000
    x = np.random.default_rng(0).random(n * k)
    for i in range(n):
        idv.write(tmp_path / f"{i:03d}.idv",
                  {"Id": np.arange(i * k, (i + 1) * k), "X": x[i * k:(i + 1) * k]})
    whole = [(i, 0, k) for i in range(n)]
    with idv.dataset(str(tmp_path)) as ds:
        def ranges(workers, per=None):
            return [[(p.part, p.start, p.stop) for p, _ in task.value]
                    for task in idv.spark._partitions(ds, ["Id", "X"], per, workers=workers)]
        assert ranges(2) == [whole[:20], whole[20:]]
        assert ranges(3) == [whole[:14], whole[14:27], whole[27:]]
        assert ranges(64) == [[w] for w in whole]                   # a core for each file
        assert ranges(1, per=3) == [whole[a:a + 3] for a in range(0, n, 3)]   # 3 blocks each
        planned = ranges(None)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert len(planned) == min(n, cores)           # the cores the planning process may use
    df = spark.read.format("idv").load(str(tmp_path))
    sizes = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert sizes == [sum(b - a for _, a, b in task) for task in planned]
    rows = df.collect()
    assert [r.Id for r in rows] == list(range(n * k))
    assert np.array_equal(np.array([r.X for r in rows]), x)


def test_pushed_filters_skip_partitions_and_give_the_rows_of_idv_read(spark, tmp_path):
    n = 100_000                 # Id sorted, X with NaNs (Spark's largest double), Name text
    ids = np.arange(n)
    x = np.where(ids % 11 == 0, np.nan, ids % 7 * 1.5)
    names = np.array([f"n{i % 13:02d}" for i in range(n)], object)
    path = str(tmp_path / "sorted.idv")
    idv.write(path, {"Id": ids, "X": x, "Name": names}, rows_per_block=5_000)

    def load():
        return spark.read.format("idv").option("blocksPerPartition", 2).load(path)

    in_range = (F.col("Id") >= 12_000) & (F.col("Id") < 31_000)
    got = load().where(in_range)
    assert load().rdd.getNumPartitions() == 10
    assert got.rdd.getNumPartitions() == 3          # blocks 2..6 of 20: partitions 1..3
    want = idv.read(path, filter=[("Id", ">=", 12_000), ("Id", "<", 31_000)])
    rows = got.orderBy("Id").collect()
    assert [r.Id for r in rows] == want["Id"].tolist()
    assert [r.Name for r in rows] == want["Name"].tolist()
    assert load().where(F.col("Id") > n).count() == 0

    # Spark keeps what is not pushed: a prefix, and X > 3 (NaN above every double to Spark)
    mixed = in_range & F.col("Name").startswith("n1") & (F.col("X") > 3.0) & \
        F.col("Name").isin("n10", "n12", "n03") & (F.col("Id") != 20_000)
    keep = (ids >= 12_000) & (ids < 31_000) & np.isin(names, ["n10", "n12"]) & \
        (np.isnan(x) | (x > 3.0)) & (ids != 20_000)
    assert sorted(r.Id for r in load().where(mixed).collect()) == ids[keep].tolist()
    # without the session's pushdown: every partition read, the same rows
    spark.conf.set(idv.spark.PUSHDOWN_CONF, "false")
    try:
        idv.spark.register(spark)
        assert load().where(in_range).rdd.getNumPartitions() == 10
        assert sorted(r.Id for r in load().where(mixed).collect()) == ids[keep].tolist()
    finally:
        spark.conf.set(idv.spark.PUSHDOWN_CONF, "true")
        idv.spark.register(spark, pushdown=True)


def test_pushed_filters_on_keys_times_text_and_floats_give_spark_s_rows(spark, mixed_dir):
    df = spark.read.format("idv").option("columns", "Id,F32,B,Txt,Key,DT").load(str(mixed_dir))
    every = df.collect()
    key, t = every[3].Key, every[3].DT
    for where, test in [
            (F.col("Key") == key, lambda r: r.Key == key),
            (F.col("Key").isin(0, key), lambda r: r.Key in (0, key)),    # 0: a missing key
            (F.col("DT") <= t, lambda r: r.DT <= t),
            (~F.col("B") & (F.col("Txt") < "t3"), lambda r: not r.B and r.Txt < "t3"),
            (F.col("F32") < 0.5, lambda r: r.F32 < 0.5),
            (F.col("F32") >= 0.5, lambda r: not r.F32 < 0.5)]:           # NaN: Spark's largest
        want = sorted(r.Id for r in every if test(r))
        assert 0 < len(want) < len(every), where
        assert sorted(r.Id for r in df.where(where).collect()) == want, where


def test_written_files_load_in_ml_net_and_read_back_equal(spark, oracle, mixed_dir, tmp_path):
    df = spark.read.format("idv").load(str(mixed_dir))
    assert df.schema["Key"].metadata["idv.type"] == "Key<UInt32, 7>"
    out = tmp_path / "out"
    df.coalesce(2).write.format("idv").mode("overwrite").save(str(out))
    written = sorted(str(out / n) for n in os.listdir(out) if n != idv._storage.staging.MANIFEST)
    assert len(written) == 2 and all(p.endswith(".idv") for p in written)
    assert [f.path for f in idv.dataset(str(out)).files] == written    # as its manifest says
    with idv.dataset(written) as back, idv.dataset(str(mixed_dir)) as src:
        assert back.schema.fields == src.schema.fields
        got, want = back.read(), src.read()
    for name in src.column_names:
        assert_equal_reads(got[name], want[name])
    docs = oracle.dump_many(written)
    assert all("error" not in doc for doc in docs.values()), docs
    for name in SCALARS:
        mlnet = np.concatenate([expected_column(docs[p], column_index(docs[p], name))
                                for p in written])
        for i, src in enumerate(MIXED):
            want = expected_column(sidecar(src), column_index(sidecar(src), name))
            assert_column_equal(mlnet[i * 100:(i + 1) * 100], want,
                                f"{src} {name}, through Spark and ML.NET")


def test_a_failed_or_killed_job_leaves_nothing(spark, mixed_dir, tmp_path):
    out = tmp_path / "out"

    def fail_late(batches):
        for b in batches:
            if int(b.column("Id").to_numpy().max()) >= 50:
                raise RuntimeError("a task fails mid-write")
            yield b

    df = spark.read.format("idv").option("columns", "Id,F32").load(str(mixed_dir))
    with pytest.raises(Exception, match="mid-write"):
        df.mapInArrow(fail_late, df.schema).write.format("idv").mode("append").save(str(out))
    assert not out.exists()         # nor the directory the job made
    # a killed job never aborts: what it staged is no .idv, and idv.dataset sees none of it
    staging = idv._storage.staging.Staging(out)
    staging.start()
    idv.write(staging.staged("part-00000.idv"), {"Id": np.arange(3, dtype=np.int32)})
    with pytest.raises(FileNotFoundError, match="no .idv files"):
        idv.dataset(str(out))


def test_spark_reads_the_parquet_idv_convert_writes_by_default(spark, tmp_path):
    """idv convert's Parquet (timestamps in microseconds by default) is what Spark reads: the
    same rows and the same instants as idv's own read of the .idv."""
    src = idv.sample_path()
    idv.convert(src, tmp_path / "sample.parquet")
    df = spark.read.parquet(str(tmp_path / "sample.parquet")).orderBy("Id")
    got = idv.read(src, ["Id", "Listed", "Price"], datetime="us")
    rows = df.select("Id", F.unix_micros("Listed").alias("us"), "Price").collect()
    order = np.argsort(got["Id"], kind="stable")
    assert [r["Id"] for r in rows] == got["Id"][order].tolist()
    assert [r["us"] for r in rows] == got["Listed"][order].astype("int64").tolist()
    assert [r["Price"] for r in rows] == got["Price"][order].tolist()


def test_a_file_replaced_after_planning_is_refused_not_read(spark, tmp_path):
    path = tmp_path / "f.idv"
    idv.write(path, {"x": np.arange(20_000, dtype=np.int64)}, rows_per_block=1000)
    df = spark.read.format("idv").option("blocksPerPartition", 5).load(str(path))
    idv.write(path, {"x": np.arange(40_000, dtype=np.int64) + 10**9}, rows_per_block=1000)
    # Spark gives the worker's error as its own PythonException, the IdvFormatError's text in
    with pytest.raises(Exception, match="IdvFormatError: .*f.idv.*changed since the dataset"):
        df.collect()
    assert spark.read.format("idv").load(str(path)).count() == 40_000      # planned anew


def test_options_are_idvs_or_refused(spark, tmp_path):
    """An option the source does not take is an error naming those it takes (Spark passed
    it unread: a 'filter' option read every row), and checksums=false is taken: a file whose
    checksum no longer matches is read as idv.open(..., checksums=False) reads it."""
    path = tmp_path / "c.idv"
    idv.write(path, {"a": np.arange(6)}, compression="none")
    data = bytearray(path.read_bytes())
    data[bytes(data).index(np.int64(4).tobytes())] = 40
    path.write_bytes(bytes(data))
    for key, value, said in [("filter", "a > 2", "not one of idv's reading options .*where"),
                             ("bogus", "1", "'bogus' is not one of idv's reading options")]:
        with pytest.raises(Exception, match=said):
            spark.read.format("idv").option(key, value).load(str(path)).count()
    with pytest.raises(Exception, match="checksum|CRC"):
        spark.read.format("idv").load(str(path)).collect()
    rows = spark.read.format("idv").option("checksums", "false").load(str(path)).collect()
    assert sorted(r["a"] for r in rows) == [0, 1, 2, 3, 5, 40]


def test_schema_and_bad_files_are_options_as_in_every_reader(spark, tmp_path):
    """schema=common and onBadFile=skip mean what idv.dataset's schema and on_bad_file do;
    without them, the errors name the Spark options that change them."""
    d = tmp_path / "d"
    d.mkdir()
    idv.write(d / "a.idv", {"x": np.arange(3), "y": np.arange(3.0)})
    idv.write(d / "b.idv", {"x": np.arange(3, 5)})
    with pytest.raises(Exception, match=r'\.option\("schema", "common"\)'):
        spark.read.format("idv").load(str(d)).count()
    rows = spark.read.format("idv").option("schema", "common").load(str(d)).collect()
    assert sorted(r["x"] for r in rows) == [0, 1, 2, 3, 4] and rows[0].asDict().keys() == {"x"}
    (d / "c.idv").write_bytes(b"not an idv file" * 30)
    with pytest.raises(Exception, match=r'c\.idv.*\.option\("onBadFile", "skip"\)'):
        spark.read.format("idv").option("schema", "common").load(str(d)).count()
    read = spark.read.format("idv").option("schema", "common").option("onBadFile", "skip")
    assert read.load(str(d)).count() == 5


def test_a_file_of_no_rows_reads_as_no_rows_with_its_schema(spark, tmp_path):
    """As every other reader gives it (Spark read a partition of None and failed)."""
    path = tmp_path / "empty.idv"
    idv.write(path, {"x": np.zeros(0, np.int64), "t": np.array([], object)})
    df = spark.read.format("idv").load(str(path))
    assert df.count() == 0 and df.collect() == []
    assert df.columns == ["x", "t"]
    assert spark.read.format("idv").load(str(path)).where("x > 1").count() == 0


def test_a_write_without_rows_leaves_one_file_of_its_columns(spark, tmp_path):
    """A DataFrame whose rows a filter removed, and one made without rows, each write one
    file of their columns (as Spark's Parquet writer does), their ML.NET types kept: the
    directory reads back as the columns and no rows, where its empty list failed to read."""
    src = tmp_path / "u.idv"
    idv.write(src, {"u": np.array([1, 2], np.uint32), "t": np.array(["a", "b"], object)})
    for n, df in enumerate([spark.read.format("idv").load(str(src)).where("u > 5"),
                            spark.createDataFrame([], "x long, s string")]):
        out = tmp_path / f"out{n}"
        df.write.format("idv").mode("overwrite").save(str(out))
        assert json.loads((out / "_idv_files.json").read_text())["files"] == [
            f.name for f in out.glob("*.idv")] and len(list(out.glob("*.idv"))) == 1
        with idv.dataset(str(out)) as ds:
            assert ds.num_rows == 0
            assert {c: str(ds.schema[c].type) for c in ds.column_names} == \
                [{"u": "UInt32", "t": "Text"}, {"x": "Int64", "s": "Text"}][n]
        assert spark.read.format("idv").load(str(out)).columns == df.columns


def test_unsigned_integers_written_back_keep_their_types(spark, tmp_path):
    """Spark widens unsigned integers (Byte to short ... UInt64 to decimal(20, 0)); a frame
    read from .idv and written back gets each one's type and values back, 2**64 - 1 and a
    fixed vector of UInt64 included (UInt64 was refused, the others written signed)."""
    src = tmp_path / "u.idv"
    top = np.array([0, 1, 2**64 - 1], np.uint64)
    want = {"b": np.array([0, 7, 255], np.uint8), "u16": np.array([0, 1, 65535], np.uint16),
            "u32": np.array([0, 1, 2**32 - 1], np.uint32), "u64": top,
            "vec": np.stack([top, top[::-1]], axis=1), "i": np.arange(3)}
    idv.write(src, want)
    out = tmp_path / "out"
    spark.read.format("idv").load(str(src)).write.format("idv").mode("overwrite") \
        .save(str(out))
    with idv.dataset(str(out)) as ds:
        assert {n: str(ds.schema[n].type) for n in want} == {
            "b": "Byte", "u16": "UInt16", "u32": "UInt32", "u64": "UInt64",
            "vec": "Vector<UInt64, 2>", "i": "Int64"}
        got = ds.read()
    order = np.argsort(got["i"])
    for name, values in want.items():
        assert np.array_equal(got[name][order], values), name


def test_the_memory_limit_is_an_option_in_spark_words(spark, tmp_path):
    """Spark plans and reads in Python processes of its own, where idv.set_memory_limit does
    not hold: .option("memoryLimit", N) is the limit (memory_limit=), and a read over it is
    refused in Spark's words."""
    path = tmp_path / "m.idv"
    idv.write(path, {"x": np.arange(200_000, dtype=np.int64)}, rows_per_block=100_000)
    read = spark.read.format("idv").option("memoryLimit", 100_000)
    with pytest.raises(Exception, match=r'over idv.s memory limit.*\.option\("memoryLimit", N\)'):
        read.load(str(path)).collect()
    assert spark.read.format("idv").option("memoryLimit", 10**9).load(str(path)).count() == \
        200_000
    with pytest.raises(Exception, match="takes a number of bytes"):
        spark.read.format("idv").option("memoryLimit", "lots").load(str(path)).count()
