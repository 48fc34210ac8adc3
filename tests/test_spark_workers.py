"""idv.spark.register checks that the Python a local session's workers run can import idv, and
says how to make it so (a venv not activated: Spark's workers run python3 from PATH)."""
from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("pyspark", reason="needs pyspark")
spark_module = pytest.importorskip("idv.spark")


def _session(master, exe):
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master, pythonExec=exe))


def test_workers_without_idv_are_refused_with_the_fix(tmp_path, monkeypatch):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=120)
    bare = str(tmp_path / "bare" / "bin" / "python")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with pytest.raises(ImportError, match="cannot import idv.*spark.pyspark.python.*"
                                          "PYSPARK_PYTHON"):
        spark_module.check_workers(_session("local[2]", bare))
    spark_module.check_workers(_session("local[2]", sys.executable))    # this one: fine
    spark_module.check_workers(_session("spark://elsewhere:7077", bare))  # not checked
    assert os.path.exists(bare)


def test_workers_with_idv_but_without_pyarrow_are_refused_with_the_fix(tmp_path,
                                                                       monkeypatch):
    """The workers need pyarrow too (a data source's batches are Arrow's): a Python that
    imports idv but not pyarrow is refused when the session registers idv, not at its first
    query with a hint to install pyarrow in this process."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['pyarrow'] = None\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    spark_module._imports_idv.cache_clear()
    try:
        with pytest.raises(ImportError, match="cannot import idv and pyarrow.*"
                                              "spark.pyspark.python"):
            spark_module.check_workers(_session("local[2]", sys.executable))
    finally:
        spark_module._imports_idv.cache_clear()
