"""Round trips through pandas keep the ML.NET schema: ``idv.write(p, idv.read_pandas(x))``
gives back the types, metadata and values ML.NET read from ``x``.

Ground truth is ML.NET on both ends: the sidecar of each sample fixture (what ML.NET read from
it) and the oracle's dump of the file written back from the DataFrame.
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import idv
from expected import assert_same_schema_and_values, has_sub_microsecond, visible_columns
from reference import fixture, sidecar

pd = pytest.importorskip("pandas", reason="the pandas round trip needs pandas")

# fixtures whose every type a DataFrame can carry back: vectors of every item, keys with and
# without KeyValues (Text and Single), multi-dimensional vectors, RowId, times, annotations
ROUND_TRIP = ["mixed_default", "keys", "vectors_fixed", "vectors_misc", "vector_multidim",
              "pipeline_keys", "annotations_custom", "scalars_rowid", "vectors_variable",
              "scalars_datetime", "empty_rows", "pipeline_multiclass_scored"]


def _mode(doc):
    """The datetime mode that reads a fixture's times exactly: "auto" unless they carry
    100-ns digits beside years outside nanoseconds' range, then "ticks"."""
    return "ticks" if has_sub_microsecond(doc) else "auto"


def _exact_columns(doc, mode):
    """The visible columns a frame read in `mode` holds exactly: in "ticks" mode a
    DateTimeOffset is its UTC ticks alone (the offsets are not in the frame)."""
    return [c for c in visible_columns(doc)
            if mode != "ticks" or "DateTimeOffset" not in c["type_string"]]


def _written(tmp_path, name):
    """The fixture read into pandas (in the mode that is exact for it) and written back."""
    mode = _mode(sidecar(name))
    df = idv.read_pandas(fixture(name), datetime=mode)
    out = tmp_path / f"{name}.idv"
    idv.write(out, df)
    return out, mode


def test_mlnet_reads_the_same_schema_and_values_back(tmp_path, oracle):
    outs = {name: _written(tmp_path, name) for name in ROUND_TRIP}
    dumps = oracle.dump_many([out for out, _ in outs.values()])
    for name, (out, mode) in outs.items():
        doc = dumps[str(out)]
        assert "error" not in doc, f"{name}: {doc.get('error')}"
        want = sidecar(name)
        names = [c["name"] for c in _exact_columns(want, mode)]
        assert_same_schema_and_values(doc, want, names, f"{name} through pandas")


def _schema_strings(path):
    with idv.open(path) as f:
        return [(c.name, str(c.type)) for c in f.columns]


def test_the_schema_is_json_and_survives_parquet(tmp_path):
    """pandas writes attrs into Parquet as JSON: the frame read back still writes Vector and
    key columns."""
    pytest.importorskip("pyarrow", reason="Parquet needs pyarrow")
    df = idv.read_pandas(fixture("mixed_default"))
    json.loads(df.attrs[idv.SCHEMA_ATTR])
    df.to_parquet(tmp_path / "k.parquet")
    back = pd.read_parquet(tmp_path / "k.parquet")
    idv.write(tmp_path / "k.idv", back)
    assert _schema_strings(tmp_path / "k.idv") == _schema_strings(fixture("mixed_default"))


def test_without_the_schema_frames_write_as_they_are(tmp_path):
    df = idv.read_pandas(fixture("mixed_default"))
    df.attrs.clear()
    idv.write(tmp_path / "plain.idv", df)
    got = dict(_schema_strings(tmp_path / "plain.idv"))
    assert "Vec" not in got and got["Vec.a"] == "Single"
    assert got["Key"] == "Key<UInt32, 7>"      # a Categorical is a key by itself


def test_columns_the_schema_no_longer_describes_are_written_as_they_are(tmp_path):
    df = idv.read_pandas(fixture("mixed_default"))
    assert [c for c in df.columns if c.startswith("Vec.")] == \
        ["Vec.a", "Vec.b", "Vec.c", "Vec.d"]
    df = df.drop(columns=["Vec.b"])                   # a slot gone: no vector any more
    df["Key"] = df["Key"].cat.add_categories(["new"])  # other categories: a key of 8
    df["F32"] = df["F32"].astype(np.float64)           # another dtype: Double
    df["Extra"] = np.arange(len(df), dtype=np.int16)    # a new column: typed as ever
    idv.write(tmp_path / "changed.idv", df)
    got = dict(_schema_strings(tmp_path / "changed.idv"))
    assert "Vec" not in got and got["Vec.a"] == "Single" and got["Vec.d"] == "Single"
    assert got["Key"] == "Key<UInt32, 8>"
    assert got["F32"] == "Double" and got["Extra"] == "Int16"
    with idv.open(tmp_path / "changed.idv") as f, idv.open(fixture("mixed_default")) as src:
        assert f["Key"].metadata["KeyValues"].tolist() == \
            src["Key"].metadata["KeyValues"].tolist() + ["new"]


def test_a_subset_of_rows_and_columns_keeps_its_types(tmp_path):
    df = idv.read_pandas(fixture("vectors_fixed"), ["VecF32", "VecI32", "VecKey"])
    part = df[[c for c in df.columns if c.startswith(("VecKey.", "VecF32."))]].iloc[2:5]
    idv.write(tmp_path / "part.idv", part)
    assert _schema_strings(tmp_path / "part.idv") == [
        ("VecF32", "Vector<Single, 3>"), ("VecKey", "Vector<Key<UInt32, 10>, 3>")]
    with idv.open(tmp_path / "part.idv") as f, idv.open(fixture("vectors_fixed")) as src:
        np.testing.assert_array_equal(f["VecKey"].read(), src["VecKey"].read()[2:5])
        assert f["VecF32"].metadata["SlotNames"].tolist() == \
            src["VecF32"].metadata["SlotNames"].tolist()


def test_a_schema_that_is_not_ours_names_the_key(tmp_path):
    df = pd.DataFrame({"a": [1, 2]})
    df.attrs[idv.SCHEMA_ATTR] = "not json"
    with pytest.raises(ValueError, match=r"attrs\['idv.schema'\].*delete it"):
        idv.write(tmp_path / "x.idv", df)


def test_ticks_frames_write_times_back(tmp_path):
    """datetime="ticks" gives int64 .NET ticks; the schema writes them back as DateTime and
    TimeSpan, scalars and vectors, expanded or not."""
    for vectors in ("expand", "object"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            df = idv.read_pandas(fixture("vectors_fixed"), datetime="ticks", vectors=vectors)
        out = tmp_path / f"{vectors}.idv"
        idv.write(out, df)
        with idv.open(out) as f, idv.open(fixture("vectors_fixed")) as src:
            for name in ("VecDT", "VecTS"):
                assert f[name].type == src[name].type
                np.testing.assert_array_equal(f[name].read(), src[name].read())
