"""pytest fixtures shared by the test files: the reference folder, the ML.NET oracle and the
engines (one Spark session, one Ray runtime, one Dask cluster per test session); and the
markers, given here by module, test name and fixture use (pyproject.toml registers them):
``slow`` (left out by the quick run ``pytest -m "not slow"``), ``engine``, ``oracle`` and
``subprocess``.

Plain helper functions live in importable modules next to this file (tests/README.md lists
them); this file only makes them importable and holds the fixtures and markers.
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent

# the helper modules next to this file (reference.py, expected.py, ...) import as top-level
# modules whatever pytest's import mode is
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from reference import Oracle, find_oracle, shared_dir  # noqa: E402

# the .NET runtime of every ML.NET oracle the tests and benchmarks start makes no diagnostic
# pipes (it leaves two files in /tmp for each process otherwise)
os.environ.setdefault("COMPlus_EnableDiagnostics", "0")


@pytest.fixture(scope="session")
def shared() -> Path:
    """The shared reference folder; skips when it is missing."""
    d = shared_dir()
    if not d.is_dir():
        pytest.skip(f"shared reference folder missing: {d} (set IDV_SHARED)")
    return d


@pytest.fixture(scope="session")
def oracle() -> Oracle:
    """The real ML.NET, through mlnet_oracle.py; skips (with the reason) when it cannot run."""
    found, reason = find_oracle()
    if found is None:
        pytest.skip(reason)
    return found


# ---- the engines: each started once per test session, by the first test that needs it -------

@pytest.fixture(scope="session")
def spark():
    """A SparkSession on local[2] with idv's data source registered and filter pushdown on."""
    pytest.importorskip("pyspark", reason="Spark tests need pyspark 4 (pip install 'idv[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark tests need Java 17 or newer (java on PATH or JAVA_HOME)")
    import idv.spark
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("idv-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config(idv.spark.PUSHDOWN_CONF, "true").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    idv.spark.register(session, pushdown=True)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def ray_runtime():
    """Ray on this machine (2 CPUs), progress bars off, the rows' order kept."""
    ray = pytest.importorskip("ray", reason="Ray tests need ray[data] (pip install 'idv[ray]')")
    pytest.importorskip("ray.data", reason="Ray tests need ray[data] (pip install 'idv[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.execution_options.preserve_order = True     # files written in the rows' order
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def dask_client():
    """A distributed.Client of a LocalCluster of 2 worker processes (one thread each)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=40)
    client = distributed.Client(cluster, timeout=60)
    try:
        yield client
    finally:
        client.close()
        cluster.close(timeout=30)


def pytest_sessionfinish(session, exitstatus):
    """The oracle's long-lived process ends with the session."""
    from reference import find_oracle
    if find_oracle.cache_info().currsize:
        found, _ = find_oracle()
        if found is not None:
            found.close()


# ---- markers ---------------------------------------------------------------------------------

# module -> markers of every test in it
MODULE_MARKS = {
    "test_benchmarks.py": {"slow", "subprocess"},
    "test_spark.py": {"slow", "engine"},
    "test_ray.py": {"slow", "engine"},
    "test_dask.py": {"engine"},
    "test_torch.py": {"engine"},
    "test_huggingface.py": {"engine"},
    "test_fuzz.py": {"subprocess"},
    "test_hostile.py": {"subprocess"},
    "test_memory.py": {"subprocess"},
    "test_error_hints.py": {"subprocess"},
}
# "module::test name" (all its parameters) or "module::test name[parameters]" -> markers
TEST_MARKS = {
    "test_fuzz.py::test_fuzz_session_finds_nothing": {"slow"},
    "test_corrupt.py::test_valgrind_read_loop": {"slow", "subprocess"},
    "test_convert.py::test_jsonl_streams": {"slow"},          # 200,000 rows under tracemalloc
    # docs pages whose code starts an engine of its own (Spark, Ray)
    "test_docs_run.py::test_code_blocks_run[docs/spark.md]": {"slow", "engine"},
    "test_docs_run.py::test_code_blocks_run[docs/ray.md]": {"slow", "engine"},
    "test_docs_run.py::test_code_blocks_run[docs/training.md]": {"slow", "engine"},  # workers
    "test_docs_run.py::test_code_blocks_run[docs/interop.md]": {"slow"},
}
# fixture -> markers of every test that uses it
FIXTURE_MARKS = {
    "oracle": {"oracle"},
    "spark": {"engine", "slow"}, "ray_runtime": {"engine", "slow"},
    "dask_client": {"engine", "slow"},
    "built_docs": {"slow", "subprocess"},        # test_docs.py: the Sphinx build
}
ENGINE_FIXTURES = ["dask_client", "ray_runtime", "spark"]
# modules whose tests fork this process (os.fork, fork pools, DataLoader workers)
FORKING_MODULES = {"test_fork.py", "test_reopen_changed.py", "test_torch.py",
                   "test_huggingface.py"}


def pytest_collection_modifyitems(config, items):
    """Mark each test by its module, its name and the fixtures it uses."""
    for item in items:
        module = item.path.name
        name = f"{module}::{getattr(item, 'originalname', item.name)}"
        marks = set(MODULE_MARKS.get(module, ())) | TEST_MARKS.get(name, set()) | \
            TEST_MARKS.get(f"{module}::{item.name}", set())
        for fixture in getattr(item, "fixturenames", ()):
            marks |= FIXTURE_MARKS.get(fixture, set())
        for marker in sorted(marks):
            item.add_marker(marker)
        # pytest-xdist (addopts): the tests on engines and those that fork this process run
        # in one worker, so no worker forks after an engine has started threads in it
        if module in FORKING_MODULES or any(f in ENGINE_FIXTURES
                                            for f in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("engines"))
    # the group first (the longest unit of work, so that one worker starts on it while the
    # others take the rest): the tests that fork, then one engine after the other, each engine
    # started once and after every fork of this process
    def order(item):
        used = [f for f in ENGINE_FIXTURES if f in getattr(item, "fixturenames", ())]
        if used:
            return ENGINE_FIXTURES.index(used[0]) + 1
        return 0 if item.path.name in FORKING_MODULES else len(ENGINE_FIXTURES) + 1
    items.sort(key=order)       # stable: the order within each group stays
