"""hypothesis strategies for the writer's property tests: any column of any item type and shape.

hypothesis is optional: without it ``needs_hypothesis`` skips the property tests and the names
below are inert stand-ins, so the test modules still import.
"""
from __future__ import annotations

import numpy as np
import pytest

import idv
from expected import TICKS_PER_MINUTE
from textdump import KINDS
from write_cases import COMPRESSIONS, MAX_TICKS, TS, dto, obj, rowid, ticks_to_dt

sp = pytest.importorskip("scipy.sparse")

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
    needs_hypothesis = pytest.mark.skipif(False, reason="hypothesis is installed")
except ImportError:     # the property tests are then skipped, the rest still run
    needs_hypothesis = pytest.mark.skipif(True, reason="hypothesis is not installed")

    def given(*args, **kwargs):
        return lambda fn: fn

    def settings(**kwargs):
        return lambda fn: fn

    class _Anything:
        def __getattr__(self, name):
            return lambda *a, **k: None
    st = hnp = HealthCheck = _Anything()

NUMERIC = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
           np.float32, np.float64, np.bool_]
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SETTINGS_AND_SKIP = lambda fn: needs_hypothesis(SETTINGS(fn))  # noqa: E731
# write options: compression and rows per block
options = st.fixed_dictionaries({
    "compression": st.sampled_from(COMPRESSIONS),
    "rows_per_block": st.one_of(st.none(), st.integers(1, 40)),
})


# ---- every type, every vector form ----------------------------------------------------------

TICKS_MAX_DTO = MAX_TICKS - 840 * TICKS_PER_MINUTE
ITEM_KINDS = ["R4", "R8", "I1", "U1", "I2", "U2", "I4", "U4", "I8", "U8", "BL", "TX", "DT",
              "TS", "DZ", "UG", "KEY"]
_INT_DTYPES = {"I1": np.int8, "U1": np.uint8, "I2": np.int16, "U2": np.uint16, "I4": np.int32,
               "U4": np.uint32, "I8": np.int64, "U8": np.uint64}


@st.composite
def items_of(draw, kind, k, key=None):
    """k items of one kind, in the form idv reads them back."""
    if kind in ("R4", "R8"):
        dt = np.float32 if kind == "R4" else np.float64
        special = st.sampled_from([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45 if kind == "R4"
                                   else 5e-324, np.finfo(dt).max, -np.finfo(dt).max])
        return draw(hnp.arrays(dt, k, elements=st.one_of(special, hnp.from_dtype(np.dtype(dt)))))
    if kind in _INT_DTYPES:
        dt = _INT_DTYPES[kind]
        info = np.iinfo(dt)
        ends = st.sampled_from([int(info.min), int(info.max), 0, 1])
        return np.array(draw(st.lists(st.one_of(ends, st.integers(int(info.min), int(info.max))),
                                      min_size=k, max_size=k)), dtype=dt)
    if kind == "KEY":
        return np.array(draw(st.lists(st.integers(0, key.count), min_size=k, max_size=k)),
                        dtype=key.raw.dtype)
    if kind == "BL":
        return np.array(draw(st.lists(st.booleans(), min_size=k, max_size=k)), dtype=bool)
    if kind == "TX":   # any text but lone surrogates (.NET writes those as U+FFFD)
        return obj(draw(st.lists(st.text(max_size=6), min_size=k, max_size=k)))
    if kind == "DT":
        ticks = st.one_of(st.sampled_from([0, MAX_TICKS]), st.integers(0, MAX_TICKS))
        return ticks_to_dt(draw(st.lists(ticks, min_size=k, max_size=k)))
    if kind == "TS":
        ticks = st.one_of(st.sampled_from([-(2**63) + 1, 2**63 - 1, 0]),
                          st.integers(-(2**63) + 1, 2**63 - 1))
        return np.array(draw(st.lists(ticks, min_size=k, max_size=k)), np.int64).view(TS)
    if kind == "DZ":
        clock = draw(st.lists(st.integers(840 * TICKS_PER_MINUTE, TICKS_MAX_DTO), min_size=k,
                              max_size=k))
        minutes = draw(st.lists(st.integers(-840, 840), min_size=k, max_size=k))
        return dto(clock, minutes)
    if kind == "UG":
        return rowid(draw(st.lists(st.one_of(st.sampled_from([0, 2**128 - 1, 2**64]),
                                             st.integers(0, 2**128 - 1)),
                                   min_size=k, max_size=k)))
    raise AssertionError(kind)


def _item_type(kind, key):
    return key if kind == "KEY" else KINDS[kind]


@st.composite
def columns_of(draw, n):
    """(type, value) of one column of n rows: any item kind as a scalar, a fixed or
    multi-dimensional vector, a variable-size vector, or sparse vectors (idv.Sparse, or scipy
    for numbers)."""
    kind = draw(st.sampled_from(ITEM_KINDS))
    key = None
    if kind == "KEY":
        raw = draw(st.sampled_from([idv.Byte, idv.UInt16, idv.UInt32, idv.UInt64]))
        top = int(np.iinfo(raw.dtype).max)
        key = idv.Key(raw, draw(st.one_of(st.integers(1, 40), st.just(top))))
    item = _item_type(kind, key)
    shape = draw(st.sampled_from(["scalar", "fixed", "multi", "var", "sparse", "sparse_var"]))
    if shape == "scalar":
        return item, draw(items_of(kind, n, key))
    if shape in ("fixed", "multi"):
        dims = (draw(st.integers(1, 4)),) if shape == "fixed" else \
            (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        flat = draw(items_of(kind, n * int(np.prod(dims)), key))
        return idv.Vector(item, *dims), flat.reshape((n,) + dims)
    if shape == "var":
        lengths = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
        values = draw(items_of(kind, sum(lengths), key))
        return idv.Vector(item), idv.Ragged(values, _offsets_of(lengths))
    # sparse: per row a random subset of the slots (empty and full rows included)
    if shape == "sparse":
        length = draw(st.integers(1, 6))
        lengths = [length] * n
    else:
        lengths = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    indices, counts = [], []
    for L in lengths:
        slots = sorted(draw(st.sets(st.integers(0, L - 1), max_size=L))) if L else []
        indices.extend(slots)
        counts.append(len(slots))
    offsets = _offsets_of(counts)
    values = draw(items_of(kind, len(indices), key))
    if shape == "sparse":
        t = idv.Vector(item, lengths[0] if n else 1)
        if (kind in _INT_DTYPES or kind in ("R4", "R8", "BL")) and draw(st.booleans()):
            return t, sp.csr_matrix((values, np.array(indices, np.int64), offsets),
                                    shape=(n, t.size))
        return t, idv.Sparse(values, indices, offsets, t.size)
    return idv.Vector(item), idv.Sparse(values, indices, offsets, np.array(lengths, np.int64))


def _offsets_of(lengths):
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out
