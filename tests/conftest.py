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


def _keep_compiled_code():
    """Where bytecode is not written (PYTHONDONTWRITEBYTECODE, as in many CI images), every
    pytest-xdist worker would rewrite the test modules again and every child process the tests
    start (``python -m idv``, fuzz replays, valgrind) would compile idv's modules again: about
    8 s a worker and 0.25 s a child. The test session writes it, as Python does by default
    (``__pycache__`` folders, ignored by git), for this process and its children."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


_keep_compiled_code()


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
    """Ray on this machine (2 CPUs), progress bars off, the rows' order kept, aggregates as
    tasks."""
    ray = pytest.importorskip("ray", reason="Ray tests need ray[data] (pip install 'idv[ray]')")
    pytest.importorskip("ray.data", reason="Ray tests need ray[data] (pip install 'idv[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.execution_options.preserve_order = True     # files written in the rows' order
    # aggregates (ds.sum, ds.aggregate) as tasks: the default hash shuffle starts actors that
    # take seconds an aggregate on 2 cores and hold the CPUs a while after it
    context.shuffle_strategy = "sort_shuffle_pull_based"
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
    # builds idv._compression and idv._parts without zlib (about a minute on 2 cores)
    "test_portable.py::test_a_build_without_zlib_writes_and_reads_the_same_bytes":
        {"slow", "subprocess"},
    "test_convert.py::test_jsonl_streams": {"slow"},     # streamed and whole, under tracemalloc
    "test_convert.py::test_reading_into_arrow_and_converting_import_no_pandas": {"subprocess"},
    "test_convert.py::test_scanning_with_polars_imports_no_pandas": {"subprocess"},
    # a docs page whose code forks (DataLoader workers); the pages that start Spark or Ray
    # run on the session's (their tests name the fixture)
    "test_docs_run.py::test_code_blocks_run[docs/training.md]": {"slow", "engine"},
    "test_docs_run.py::test_code_blocks_run[docs/interop.md]": {"slow"},
}
# tests of a second or more on 2 cores (pytest --durations=0), left out of the quick run
# `pytest -m "not slow"`: module -> test names (all their parameters)
SLOW_TESTS = {
    "test_arrow_write.py": {"test_arrow_text_bytes_equal_mlnet",
        "test_cli_convert_level_and_backend", "test_convert_default_deflate",
        "test_convert_parquet_text_equals_write_from_str",
        "test_write_arrow_table_bytes_equal_str", "test_write_pandas_strings_bytes_equal_str"},
    "test_budget.py": {"test_a_one_row_read_of_a_huge_block_is_refused_by_default"},
    "test_changed_underfoot.py": {"test_a_stream_stops_with_an_error_when_its_file_changes"},
    "test_checksums.py": {"test_mlnet_loads_a_checksummed_file_with_the_same_values",
        "test_verify_catches_single_bit_flips_past_the_header"},
    "test_cli.py": {"test_convert_without_pyarrow_names_the_extra",
        "test_progress_asked_for_without_tqdm_says_so"},
    "test_cli_dataset.py": {"test_convert_of_a_dataset_streams_in_bounded_memory"},
    "test_convert.py": {"test_streaming_bounded_memory"},
    "test_convert_blocks.py": {"test_mlnet_reads_every_fixture_copied"},
    "test_corrupt.py": {"test_failing_decoders_do_not_leak", "test_payload_mutations",
        "test_random_byte_flips", "test_text_decoders_do_not_leak"},
    "test_filter_differential.py": {"test_duckdb_over_arrow_dataset_equals_duckdb_in_memory"},
    "test_fork.py": {"test_a_fork_while_another_thread_reads"},
    "test_fuzz.py": {"test_replay_runs_every_seed_without_libfuzzer",
        "test_session_merges_what_it_found_into_the_corpus"},
    "test_huggingface.py": {"test_stream_gives_the_same_rows_in_shards_of_blocks",
        "test_stream_in_dataloader_workers_and_by_node", "test_stream_of_a_url_in_fork_workers"},
    "test_memory.py": {"test_a_container_limit_says_which_file_and_column",
        "test_a_dataset_read_is_checked_as_a_whole",
        "test_a_slice_is_checked_before_allocating",
        "test_a_variable_boolean_vector_is_counted_before_decoding",
        "test_an_annotation_is_counted_against_the_limit",
        "test_convert_parquet_of_a_wide_vector", "test_dask_keeps_a_wide_vector_one_column",
        "test_dvbool_decodes_without_temporaries",
        "test_read_pandas_keeps_a_wide_vector_one_column",
        "test_readers_decode_only_the_annotations_they_use",
        "test_schema_and_verify_survive_a_huge_annotation", "test_slices_with_steps",
        "test_text_rows_are_counted_as_str_objects"},
    "test_memory_matrix.py": {"test_a_small_limit_through_an_engine",
        "test_under_an_address_space_limit"},
    "test_read_paths.py": {"test_every_backend_reads_big_columns_alike"},
    "test_remote.py": {"test_a_caught_ctrl_c_leaves_the_next_read_nothing_to_wait_for",
        "test_a_file_replaced_while_reading_is_refused",
        "test_a_huge_declared_file_fetches_within_the_limit",
        "test_a_remote_take_fetches_each_block_hit_once_in_few_requests",
        "test_a_server_that_stalls_times_out", "test_a_truncated_answer_is_an_error",
        "test_a_whole_read_fetches_its_blocks_in_few_requests",
        "test_checksums_are_checked_over_http",
        "test_cli_storage_options_reach_the_filesystem",
        "test_mlnet_files_over_http_read_as_mlnet_reads_them",
        "test_one_column_of_twelve_transfers_its_blocks_and_the_tables",
        "test_requests_go_out_concurrently", "test_s3_reads_the_version_opened",
        "test_s3_through_s3fs_and_storage_options",
        "test_server_errors_are_not_missing_files",
        "test_storage_options_reach_the_filesystem",
        "test_tables_beyond_the_tail_guess_come_in_one_more_request"},
    "test_roundtrip.py": {"test_mlnet_reads_the_same_schema_and_values_back"},
    "test_row_access.py": {"test_threads_share_the_cache_without_drift",
        "test_whole_column_and_random_rows_in_bounded_memory"},
    "test_statistics.py": {"test_mlnet_loads_files_with_statistics_with_the_same_values"},
    "test_torch.py": {"test_map_style_in_workers_and_by_batch_sampler",
        "test_map_style_shuffled_epoch_decodes_each_block_once",
        "test_nested_ragged_and_drop_last",
        "test_shuffled_epochs_are_permutations_that_differ_and_repeat",
        "test_spawn_workers_give_the_fork_workers_batches"},
    "test_writer.py": {"test_mlnet_reads_other_backends", "test_property_every_type",
        "test_property_vectors"},
}
# fixture -> markers of every test that uses it
FIXTURE_MARKS = {
    "oracle": {"oracle"},
    "spark": {"engine", "slow"}, "ray_runtime": {"engine", "slow"},
    "dask_client": {"engine", "slow"},
    "built_docs": {"slow", "subprocess"},        # test_docs.py: the Sphinx build
}
ENGINE_FIXTURES = ["dask_client", "ray_runtime", "spark"]
# tests that measure this process's memory (tracemalloc, sys.getallocatedblocks): they run in
# the engines' worker before the session's engines start, whose threads allocate meanwhile
QUIET_PROCESS = {
    "test_convert.py": {"test_jsonl_streams", "test_streaming_bounded_memory",
                        "test_arrow_stream_source"},
    "test_corrupt.py": {"test_text_decoders_do_not_leak", "test_big_text_column_does_not_leak",
                        "test_failing_decoders_do_not_leak"},
    "test_dataset.py": {"test_a_whole_read_decodes_numbers_in_place"},
    "test_interop.py": {"test_record_batch_reader_bounded_memory"},
    "test_writer.py": {"test_streaming_memory_stays_near_one_block"},
}
# modules whose module-scoped fixtures take seconds (the filter differential's hypothesis
# sweep): their other tests run in one worker, so that each fixture is made once
ONE_WORKER_MODULES = {"test_filter_differential.py"}
# modules whose tests fork this process (os.fork, fork pools, DataLoader workers)
FORKING_MODULES = {"test_fork.py", "test_reopen_changed.py", "test_torch.py",
                   "test_huggingface.py"}


def _before_engines(item):
    """Whether a test needs a process without the session's engines: it forks, or it
    measures the process's memory."""
    module = item.path.name
    return module in FORKING_MODULES or \
        getattr(item, "originalname", item.name) in QUIET_PROCESS.get(module, ())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark each test by its module, its name and the fixtures it uses: first, so that
    pytest-xdist's own hook (which turns the xdist_group marks into the @group suffix of the
    test ids it schedules by) sees the groups."""
    for item in items:
        module = item.path.name
        name = f"{module}::{getattr(item, 'originalname', item.name)}"
        marks = set(MODULE_MARKS.get(module, ())) | TEST_MARKS.get(name, set()) | \
            TEST_MARKS.get(f"{module}::{item.name}", set())
        if getattr(item, "originalname", item.name) in SLOW_TESTS.get(module, ()):
            marks.add("slow")
        for fixture in getattr(item, "fixturenames", ()):
            marks |= FIXTURE_MARKS.get(fixture, set())
        for marker in sorted(marks):
            item.add_marker(marker)
        # pytest-xdist (addopts): the tests on engines (the session's, or their own: docs
        # pages that start one) and those that fork this process run in one worker, so no
        # worker forks or starts an engine after the session's engines started in it
        if _before_engines(item) or "engine" in marks:
            item.add_marker(pytest.mark.xdist_group("engines"))
        elif module in ONE_WORKER_MODULES:
            item.add_marker(pytest.mark.xdist_group(module))
    # the group first (the longest unit of work, so that one worker starts on it while the
    # others take the rest): the tests that fork, then one engine after the other, each engine
    # started once and after every fork of this process
    def order(item):
        used = [f for f in ENGINE_FIXTURES if f in getattr(item, "fixturenames", ())]
        if used:
            return ENGINE_FIXTURES.index(used[0]) + 1
        grouped = _before_engines(item) or item.get_closest_marker("engine")
        return 0 if grouped else len(ENGINE_FIXTURES) + 1
    items.sort(key=order)       # stable: the order within each group stays
