"""The block statistics' counts of time values that are no whole microsecond (and the first of
each block): what both writers of statistics keep equals numpy's count over the values
written; a read in microseconds warns from them as from the values, without decoding; a
section without them (an idv that did not write them) still reads, and counts no block could
have are refused."""
from __future__ import annotations

import io
import struct
import warnings

import numpy as np
import pytest

import idv
from idv._storage import statistics as S, sub_microseconds

pa = pytest.importorskip("pyarrow")

ROWS, RPB = 1000, 128
NET_EPOCH = 621355968000000000          # .NET ticks at 1970-01-01


def _ticks():
    """100-ns counts (from 1970; TimeSpan's from 0) of each time column, with edge values:
    blocks without a sub-microsecond tick, blocks of nothing else, negatives, int64's
    limits (TimeSpan.MaxValue; numpy's least is NaT, which no TimeSpan is written from)."""
    rng = np.random.default_rng(11)
    when = 17_000_000_000_000_000 + np.arange(ROWS, dtype=np.int64) * 10_000_000
    odd = rng.choice(np.arange(RPB, ROWS), 40, replace=False)
    when[odd] += rng.integers(1, 10, len(odd))
    when[3 * RPB:4 * RPB] += 7                                   # a block of nothing else
    span = rng.integers(-10**12, 10**12, ROWS) * 10
    span[[5, 6, 300, 999]] = [-7, -10, np.iinfo(np.int64).min + 1, np.iinfo(np.int64).max]
    utc = when[::-1].copy()
    return {"when": when, "span": span, "utc": utc}


def _source(t):
    dto = np.zeros(ROWS, [("utc", "datetime64[100ns]"), ("offset_minutes", "i2")])
    dto["utc"] = t["utc"].view("datetime64[100ns]")
    dto["offset_minutes"] = np.arange(ROWS) % 7 * 90 - 300
    when = t["when"].view("datetime64[100ns]")
    ragged = [when[i:i + i % 4] for i in range(ROWS)]            # 0 to 3 items a row
    return {"when": when, "span": t["span"].view("timedelta64[100ns]"), "dto": dto,
            "pair": np.stack([when, when[::-1]], axis=1), "ragged": ragged,
            "n": np.arange(ROWS)}


TYPES = {"dto": idv.DateTimeOffset, "ragged": idv.Vector(idv.DateTime)}


def _expected(t):
    """Each column's (count, first) per block, numpy's, in the statistics' numbers (.NET
    ticks; TimeSpan's as they are)."""
    when, span = t["when"] + NET_EPOCH, t["span"]
    runs = {"when": [when[a:a + RPB] for a in range(0, ROWS, RPB)],
            "span": [span[a:a + RPB] for a in range(0, ROWS, RPB)],
            "dto": [t["utc"][a:a + RPB] + NET_EPOCH for a in range(0, ROWS, RPB)]}
    pair = np.stack([when, when[::-1]], axis=1)
    runs["pair"] = [pair[a:a + RPB].reshape(-1) for a in range(0, ROWS, RPB)]
    runs["ragged"] = [np.concatenate([when[i:i + i % 4] for i in range(a, min(a + RPB, ROWS))])
                      for a in range(0, ROWS, RPB)]
    out = {}
    for name, blocks in runs.items():
        odd = [b[b % 10 != 0] for b in blocks]
        out[name] = ([len(o) for o in odd], [int(o[0]) if len(o) else 0 for o in odd])
    return out


def _written(tmp_path, how):
    """The file, its statistics written by idv.write or added afterwards."""
    p = tmp_path / f"{how}.idv"
    idv.write(p, _source(_ticks()), types=TYPES, rows_per_block=RPB,
              statistics=how == "write")
    if how == "added":
        assert idv.add_statistics(p)
    return p


@pytest.mark.parametrize("how", ["write", "added"])
def test_both_writers_keep_numpys_counts_of_every_time_type(tmp_path, how):
    expected = _expected(_ticks())
    assert any(c for counts, _ in expected.values() for c in counts)
    assert any(not c for counts, _ in expected.values() for c in counts)
    with idv.open(_written(tmp_path, how)) as f:
        for name, (counts, firsts) in expected.items():
            cs = f.column_statistics(f[name].index)
            assert cs.sub_us.tolist() == counts, name
            assert cs.first_sub_us.tolist() == firsts, name
        assert f.column_statistics(f["n"].index).sub_us is None


def _schema_warnings(path):
    """(Arrow schema in microseconds, the warnings' texts, blocks decoded) of a fresh open."""
    with idv.open(path) as f, warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        schema = idv.arrow_schema(f, datetime="auto-us")
        decoded = sum(c.blocks_decoded for c in f.columns)
    return schema, sorted(str(w.message) for w in got), decoded


def test_microseconds_warn_from_the_counts_as_from_the_values(tmp_path, monkeypatch):
    """The warning of each column (its count and first value) is the same from the counts,
    without decoding a block, as from the values; a section without the counts (an idv that
    did not write them) is read, the columns decoded."""
    counted = _written(tmp_path, "write")
    schema, said, decoded = _schema_warnings(counted)
    assert decoded == 0 and len(said) == 5
    odd = int(np.count_nonzero(_ticks()["when"] % 10))
    assert f"'when': {odd} DateTime values" in " ".join(said)
    plain = tmp_path / "plain.idv"
    idv.write(plain, _source(_ticks()), types=TYPES, rows_per_block=RPB, statistics=False)
    assert _schema_warnings(plain)[:2] == (schema, said)
    with monkeypatch.context() as m:
        m.setattr(sub_microseconds, "pack", lambda columns: b"")
        idv.write(tmp_path / "older.idv", _source(_ticks()), types=TYPES, rows_per_block=RPB)
    with idv.open(tmp_path / "older.idv") as f:
        assert f.statistics.columns[0].sub_us is None
    again, said_again, decoded = _schema_warnings(tmp_path / "older.idv")
    assert (again, said_again) == (schema, said) and decoded > 0


def test_a_reader_that_knows_no_counts_finds_the_same_columns(monkeypatch):
    """The counts follow the columns: a reader that stops there (an older idv) parses every
    column's statistics as this one does."""
    buf = io.BytesIO()
    idv.write(buf, _source(_ticks()), types=TYPES, rows_per_block=RPB)
    with idv.open(buf.getvalue()) as f:
        whole = f.statistics
    with monkeypatch.context() as m:
        m.setattr(sub_microseconds, "parse", lambda data, at, nb: {})
        with idv.open(buf.getvalue()) as f:
            older = f.statistics
    assert whole.columns.keys() == older.columns.keys()
    for i, cs in whole.columns.items():
        old = older.columns[i]
        assert old.sub_us is None
        for part in ("present", "missing", "crcs", "low", "high"):
            assert np.array_equal(getattr(cs, part), getattr(old, part)), (i, part)


def _restated(data, change):
    """`data` with its statistics section changed by `change(section, at)` (a bytearray;
    `at`: where the counts begin) and its CRC-32 recomputed, as a hostile tool would."""
    with idv.open(data, checksums=False) as f:
        st = f.statistics
        off, length = st.offset, st.length
    section = bytearray(data[off:off + length])
    section = change(section, section.index(sub_microseconds.MAGIC)) or section
    out = bytearray(data)
    out[off:off + len(section)] = section
    out[S.POINTER_AT:S.POINTER_AT + S.POINTER_SIZE] = S.pointer(bytes(out[:52]), off, section)
    return bytes(out)


NB = 5                                  # blocks a column in the malformed cases' file
LOW1 = NET_EPOCH + RPB * 10             # block 1's least DateTime (.NET ticks) ...
HIGH1 = NET_EPOCH + (2 * RPB - 1) * 10  # ... and greatest


def _put(column, part, block, value):
    """A change setting column `column`'s (of the counts) index, or count or first value of
    `block`."""
    def change(section, at):
        place = at + 16 + column * (8 + 16 * NB)
        place += {"index": 0, "count": 8 + 8 * block, "first": 8 + 8 * NB + 8 * block}[part]
        struct.pack_into("<I" if part == "index" else "<q", section, place, value)
    return change


def _on_a_number(section, at):
    for part, block, value in (("index", 0, 2), ("count", 1, 1), ("first", 1, 131)):
        _put(1, part, block, value)(section, at)      # plausible for n's block 1: 128-255


MALFORMED = {
    "above-present": _put(0, "count", 1, RPB + 1),
    "negative": _put(0, "count", 1, -1),
    "first-whole": _put(0, "first", 1, LOW1),
    "first-outside": _put(0, "first", 1, HIGH1 + 1),
    "first-without-count": _put(0, "first", 0, NET_EPOCH + 3),
    "on-a-number": _on_a_number,
    "twice": _put(1, "index", 0, 0),
    "missing-column": _put(0, "index", 0, 7),
    "on-text": _put(1, "index", 0, 3),
    "truncated": lambda section, at: section[:-8],
}


@pytest.mark.parametrize("change", MALFORMED.values(), ids=MALFORMED.keys())
def test_counts_no_block_could_have_are_refused_and_the_column_decoded(change):
    t = np.arange(NB * RPB, dtype=np.int64) * 10
    t[RPB + 3] += 1                                               # block 1 has one
    when = t.view("datetime64[100ns]")
    buf = io.BytesIO()
    idv.write(buf, {"when": when, "when2": when, "n": np.arange(NB * RPB),
                    "t": np.array(["a", "b"] * (NB * RPB // 2), object)},
              rows_per_block=RPB, checksums=False)
    data = _restated(buf.getvalue(), change)
    with idv.open(data) as f:
        with pytest.raises(idv.IdvFormatError, match="statistics are malformed"):
            f.statistics
    schema, said, decoded = _schema_warnings(data)
    assert len(said) == 2 and "'when': 1 DateTime value (" in said[0] and decoded > 0
    assert ") has 100-ns ticks" in said[0]


def test_a_count_the_values_do_not_give_is_found_by_verify():
    """A count of the right form but not the block's (2 where it holds 1) is read as it is,
    and verify, which decodes every block, names the block."""
    t = np.arange(NB * RPB, dtype=np.int64) * 10
    t[RPB + 3] += 1
    when = t.view("datetime64[100ns]")
    buf = io.BytesIO()
    idv.write(buf, {"when": when, "when2": when, "n": np.arange(NB * RPB)},
              rows_per_block=RPB, checksums=False)
    assert idv.verify(buf.getvalue()).ok
    data = _restated(buf.getvalue(), _put(0, "count", 1, 2))
    report = idv.verify(data)
    assert [(p.column, p.block) for p in report.problems] == [("when", 1)]
    assert "2 with 100-ns ticks" in str(report) and "1 with 100-ns ticks" in str(report)


def test_adding_statistics_completes_an_earlier_idvs_without_the_counts(tmp_path,
                                                                       monkeypatch):
    """Statistics without the counts (an earlier idv's) are computed again by
    add_statistics, which then says so; complete ones are left as they are."""
    p = tmp_path / "older.idv"
    with monkeypatch.context() as m:
        m.setattr(sub_microseconds, "pack", lambda columns: b"")
        idv.write(p, _source(_ticks()), types=TYPES, rows_per_block=RPB)
    assert _schema_warnings(p)[2] > 0                       # decoded to count them
    assert idv.add_statistics(p)
    assert not idv.add_statistics(p)
    with idv.open(p) as f:
        for name, (counts, firsts) in _expected(_ticks()).items():
            cs = f.column_statistics(f[name].index)
            assert (cs.sub_us.tolist(), cs.first_sub_us.tolist()) == (counts, firsts)
        assert np.array_equal(f["when"].read(), _source(_ticks())["when"])
    assert _schema_warnings(p)[2] == 0 and idv.verify(str(p)).ok
    plain = tmp_path / "plain.idv"
    idv.write(plain, {"x": np.arange(10)}, rows_per_block=4)
    assert not idv.add_statistics(plain)                    # no time column: complete
