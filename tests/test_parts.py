"""The one-pass checks of a file in memory (idv._parts through idv._storage.layout.read_checked)
against the checks part by part (idv._storage.layout.read_tables and the reader's), which name what
is wrong: every sound file takes the one pass, with the same tables; a file the one pass accepts is
one the checks part by part accept; a damaged file gets the same error either way."""
from __future__ import annotations

import random

import numpy as np
import pytest

import idv
from idv import _compression, _parts
from idv._storage import checksums, layout
from corrupt_cases import CASES, FIXTURE_FILES, MISSING, fixture_file_params

# idv's own files: checksums and statistics, metadata (key values), several blocks, vectors
WRITTEN = {
    "numbers": dict(columns={"x": np.arange(5000, dtype=np.float32),
                             "k": np.arange(5000, dtype=np.int64) % 7},
                    rows_per_block=1024),
    "keys_text": dict(columns={"c": np.arange(1200, dtype=np.uint32) % 3,
                               "t": ["one", "two", "", "four"] * 300},
                      types={"c": idv.Key(idv.UInt32, count=3)},
                      metadata={"c": {"KeyValues": ["a", "b", "c"]}}),
    "stored": dict(columns={"x": np.arange(3000, dtype=np.int32)}, compression="none",
                   rows_per_block=700),
    "vectors": dict(columns={"v": np.arange(4000, dtype=np.float64).reshape(1000, 4)}),
}


def _written(name, tmp_path):
    options = dict(WRITTEN[name])
    path = tmp_path / f"{name}.idv"
    idv.write(str(path), options.pop("columns"), **options)
    return path.read_bytes()


def _open_both(data, monkeypatch):
    """(what idv.open gives in one pass, what it gives part by part): per way, the tables'
    facts, or the error's text."""
    def outcome():
        try:
            with idv.open(data) as f:
                t = f.tables
                return ([t.lookup(c.index).tobytes() for c in f.columns],
                        [[(m.kind, m.offset, m.size) for m in t.metadata(c.index)]
                         for c in f.columns if c.readable],
                        None if t.sizes_ok is None else t.sizes_ok.tolist(),
                        t.regions.starts.tolist(), t.regions.stops.tolist(),
                        [None if not f.has_checksums else
                         f.store.expected_crcs(c.blocks).tolist()
                         for c in f.columns if c.readable])
        except idv.IdvFormatError as e:
            return str(e)
    fast = outcome()
    with monkeypatch.context() as m:
        m.setattr(layout, "read_checked", lambda *a, **k: None)
        slow = outcome()
    return fast, slow


def _took_one_pass():
    """(a list, a stand-in for layout.read_checked that notes in it whether each file took the
    one pass)."""
    taken = []
    original = layout.read_checked

    def spy(*args, **kwargs):
        tables = original(*args, **kwargs)
        taken.append(tables is not None)
        return tables
    return taken, spy


@pytest.mark.parametrize("name", fixture_file_params())
def test_every_fixture_opens_in_one_pass_with_the_same_tables(name, monkeypatch):
    data = next(p for p in FIXTURE_FILES if p.name == name).read_bytes()
    taken, spy = _took_one_pass()
    monkeypatch.setattr(layout, "read_checked", spy)
    fast, slow = _open_both(data, monkeypatch)
    assert fast == slow
    with idv.open(data) as f:
        blocks = f.num_rows > 0 and f.num_columns > 0
    assert taken[0] is blocks     # a file of no rows or no columns: part by part


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_idv_files_open_in_one_pass_with_the_same_tables(name, tmp_path, monkeypatch):
    data = _written(name, tmp_path)
    taken, spy = _took_one_pass()
    monkeypatch.setattr(layout, "read_checked", spy)
    fast, slow = _open_both(data, monkeypatch)
    assert fast == slow and not isinstance(fast, str)
    assert taken == [True]       # the checksums and statistics too: one pass


@pytest.mark.skipif(not FIXTURE_FILES, reason=MISSING)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_damaged_file_gets_the_same_error_either_way(name, monkeypatch):
    data, _ = CASES[name]()
    fast, slow = _open_both(data, monkeypatch)
    assert fast == slow


@pytest.mark.filterwarnings("ignore::idv.IdvWarning")       # a codec's name damaged
@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_random_damage_to_the_tables_gets_the_same_outcome_either_way(name, tmp_path,
                                                                      monkeypatch):
    """Bytes changed where the checks look (the header, the table of contents, the lookup and
    checksum tables), with checksums and without (the header's pointer to them cleared)."""
    data = _written(name, tmp_path)
    with idv.open(data) as f:
        starts = f.tables.regions.starts
        stops = f.tables.regions.stops
        blocks = {int(o) for c in f.columns for o in c.lookup["offset"]}
    tables = [(int(a), int(b)) for a, b in zip(starts, stops) if int(a) not in blocks]
    rng = random.Random(name)
    refused = 0
    for trial in range(150):
        buf = bytearray(data)
        if trial % 2:
            buf[52:60] = bytes(8)          # no checksums: damage the checks must see alone
        for _ in range(rng.choice((1, 1, 2, 4))):
            a, b = rng.choice(tables)
            buf[rng.randrange(a, b)] = rng.randrange(256)
        fast, slow = _open_both(bytes(buf), monkeypatch)
        assert fast == slow, trial
        refused += isinstance(fast, str)
    assert refused > 50            # the damage was seen (checksummed trials all refused)


def test_max_ratio_is_the_one_decompression_uses():
    blocks = np.zeros((1, 1), idv._lookup.ENTRY)
    blocks["disk"], blocks["raw"] = 10, 10 * _compression.MAX_RATIO + 64
    assert _parts.possible_sizes(blocks, [int(blocks["raw"][0, 0])], [False], 1,
                                 1).tolist() == [True]
    blocks["raw"] += 1
    assert _parts.possible_sizes(blocks, [int(blocks["raw"][0, 0])], [False], 1,
                                 1).tolist() == [False]


def test_parts_that_share_bytes_are_refused_and_empty_ones_take_none():
    none = np.zeros(0, np.int64)

    def check(frame, queries=none, **sums):
        return _parts.check_parts(frame, none, 0, None, none, none, 400, queries, **sums)
    frame = [(0, 256), (300, 20), (320, 0), (320, 10)]
    assert check(frame) is not None
    assert check(frame + [(329, 2)]) is None
    assert check(frame, np.array([0, 300, 330], np.int64)).tolist() == [300, 320, -1]



def _reference_check(frame, queries):
    """check_parts' answer for `frame` alone, by sorting in Python: None when two non-empty
    parts share a byte, else per query the start of the first part after it."""
    parts = sorted((a, a + n) for a, n in frame if n > 0)
    if any(b[0] < a[1] for a, b in zip(parts, parts[1:])):
        return None
    return [next((a for a, _ in parts if a > q), -1) for q in queries]


@pytest.mark.parametrize("seed", range(40))
def test_parts_in_any_order_are_checked_as_sorted(seed):
    """Parts come in runs already in order (checked by merging them) or in any order: the
    answer is the one of sorting them."""
    rng = random.Random(seed)
    n = rng.choice([1, 2, 5, 40, 300])
    starts = sorted(rng.sample(range(256, 20_000), n))
    frame = [(a, rng.choice([0, 1, 3, 7, 40])) for a in starts]
    order = rng.choice(["sorted", "reversed", "runs", "shuffled"])
    if order == "reversed":
        frame.reverse()
    elif order == "runs":                    # a few runs, each in order, as the file's kinds
        cuts = [0, *sorted(rng.sample(range(1, n), min(n - 1, 3))), n]
        runs = [frame[a:b] for a, b in zip(cuts, cuts[1:])]
        rng.shuffle(runs)
        frame = [p for r in runs for p in r]
    elif order == "shuffled":
        rng.shuffle(frame)
    if rng.random() < 0.5 and n > 1:         # a part that enters another
        a, k = frame[rng.randrange(n)]
        frame.insert(rng.randrange(n), (a + rng.choice([0, max(k - 1, 0)]), 5))
    queries = np.array(sorted(rng.sample(range(0, 21_000), 20)), np.int64)
    none = np.zeros(0, np.int64)
    got = _parts.check_parts(frame, none, 0, None, none, none, 30_000, queries)
    want = _reference_check(frame, queries.tolist())
    assert (None if got is None else got.tolist()) == want
    if want is not None:           # each part's checksum found, by one walk of both
        data = bytes(30_000)
        sums = _sums(sorted((a, k) for a, k in frame if k > 0), data)
        ok = _parts.check_parts(frame, none, 0, None, none, none, 30_000, none, sums=sums,
                                data=data)
        assert ok is not None
        if len(sums) > 1:
            gone = np.delete(sums, rng.randrange(len(sums)))
            assert _parts.check_parts(frame, none, 0, None, none, none, 30_000, none,
                                      sums=gone, data=data) is None

def _sums(parts, data, kind=checksums.TABLE):
    return np.array([(a, n, checksums.crc(data[a:a + n]), kind) for a, n in parts],
                    checksums.ENTRY)


def test_every_part_has_its_checksum_and_every_table_matches_it():
    none = np.zeros(0, np.int64)
    data = bytes(range(256)) * 2
    frame = [(0, 256), (300, 20), (320, 10)]

    def check(sums, skip=(), checked=()):
        return _parts.check_parts(frame, none, 0, None, none, none, 400, none, sums=sums,
                                  skip=skip, data=data, checked=checked)
    sums = _sums([(0, 256), (300, 20), (320, 10)], data)
    assert check(sums) is not None
    assert check(sums[1:]) is None                        # a part without its checksum ...
    assert check(sums[1:], skip=(0,)) is not None         # ... but one checked elsewhere
    assert check(sums[::-1].copy()) is None               # a table out of order: not trusted
    bad = sums.copy()
    bad["crc"][1] ^= 1
    assert check(bad) is None                             # a table that changed
    assert check(bad, checked=(300,)) is not None         # ... checked elsewhere
    bad["kind"][1] = checksums.BLOCK
    assert check(bad) is not None                         # blocks: checked when read
