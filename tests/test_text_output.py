"""CSV, TSV and JSON Lines written from an .idv (idv.convert and the writers of ``idv cat``),
formatted a column at a time: the same text however many rows a write holds, over every item
type, its limits and edge values (NaN, -0.0, infinities, subnormals, the float forms' switch to
exponents, random float bits), text to quote and escape, keys with and without labels, vectors
of every kind, no rows; quoted as Python's csv module quotes; JSON that Python's json reads
back the same whether escaped to ASCII or not."""
from __future__ import annotations

import csv
import io
import json
import warnings

import numpy as np
import pytest

import idv
from idv._interop import delimited
from idv._interop.delimited import DelimitedWriter, JsonLinesWriter
from idv._values import cells
from write_cases import CASES, TS, dto, obj, rowid, ticks_to_dt, write_case

FORMATS = ("csv", "tsv", "jsonl")


def edges():
    """Text to quote and escape, missing and unlabelled keys, float and integer forms."""
    n = 12
    text = obj(["", "a,b", 'say "hi"', "line\nbreak", "cr\r\nlf", "tab\there", " pad ", "é日😀",
                "\\back\\slash", "\x00\x1f\x7f", "\u2028\u2029", "'"])
    f64 = np.array([1e16, 9999999999999998.0, 1e-4, 9.999999999999999e-05, 1e-5, 123456789.0,
                    1e22, 1.5e300, 2.2250738585072014e-308, -1e-310, 0.1 + 0.2, 100.0])
    f32 = np.array([1e16, 9.999999e15, 1e-4, 9.999999e-05, 1e-5, 123456789.0, 1e22,
                    1.1754944e-38, 1e-40, 0.3, 100.0, 16777216.0], np.float32)
    return {"data": {
        "Text": text,
        "R8": f64, "R4": f32,
        "I8": np.array([-2**63, 2**63 - 1, 0, -1] * 3, np.int64),
        "U8": np.array([2**64 - 1, 0, 1, 2**63] * 3, np.uint64),
        "Key": np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3], np.uint32),
        "KeyVec": (np.arange(n * 2) % 4).astype(np.uint8).reshape(n, 2),
        "KeyRag": idv.Ragged.from_list([[i % 4] * (i % 3) for i in range(n)], dtype=np.uint8),
        "TextVec": obj([f"{t},{i}" for i, t in enumerate(text) for _ in range(2)]).reshape(n, 2),
        "TextRag": idv.Ragged(obj(list(text[:6]) + ['"q"']), [0, 2, 2, 3, 5, 6, 7] + [7] * 6),
        "Floats": np.array([[np.nan, -0.0, np.inf, -np.inf]] * n, np.float32),
        "FloatRag": idv.Ragged.from_list([[np.nan, -0.0, 0.1, np.inf, -np.inf, 1e-45][:i % 7]
                                          for i in range(n)], dtype=np.float32),
        "Dt": ticks_to_dt([0, 1, 3155378975999999999] + [637134336000000000 + i for i in
                                                        range(n - 3)]),
        "Ts": np.array([-(2**63) + 1, 2**63 - 1, -1, 0] * 3, np.int64).view(TS),
        "Dto": dto([637134336000000000 + i * 10**7 + i for i in range(n)],
                   [-840, 840, 0, 1, -1, 59, -59, 61, 90, -90, 600, 0]),
        "Rid": rowid([0, 2**128 - 1, 2**64, 1] * 3),
    }, "types": {"Key": idv.Key(idv.UInt32, 3),
                 "KeyVec": idv.Vector(idv.Key(idv.Byte, 3), 2),
                 "KeyRag": idv.Vector(idv.Key(idv.Byte, 3))},
        "metadata": {"Key": {"KeyValues": ["x,y", 'q"', "é"]},
                     "KeyVec": {"KeyValues": ["p", "", "r"]},
                     "KeyRag": {"KeyValues": ["p", "q", "r"]},
                     "TextVec": {"SlotNames": ["a,1", "b\"2"]}},
        "options": {"rows_per_block": 5}}


def floats():
    """Random float bits of every exponent, in blocks of 300 rows."""
    rng = np.random.default_rng(20)
    bits64 = rng.integers(0, 2**64, 1000, dtype=np.uint64)
    bits32 = rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32)
    return {"data": {"R8": bits64.view(np.float64), "R4": bits32.view(np.float32),
                     "R8r": rng.random(1000).round(4), "R4r": rng.random(1000, np.float32)},
            "options": {"rows_per_block": 300}}


def wide():
    """A vector too wide to expand: one CSV cell of a JSON array."""
    return {"data": {"Wide": (np.arange(10_001) % 7 == 0).astype(np.uint8).reshape(1, -1),
                      "I": np.array([1], np.int32)}}


def one_text():
    """One Text column: CSV quotes an empty record's one cell."""
    return {"data": {"T": obj(["", "a", "", "b,c", ""])}}


EXTRA = {"edges": edges, "floats": floats, "one_text": one_text, "wide": wide}
NAMES = sorted(set(CASES) - {"multiblock"}) + sorted(EXTRA)


def source(name, path):
    """The .idv of case `name` at `path`."""
    if name in CASES:
        write_case(name, path, "none")
        return
    fx = EXTRA[name]()
    idv.write(path, fx["data"], types=fx.get("types"), metadata=fx.get("metadata"),
              compression="none", **fx.get("options", {}))


def _written(src, chunk_rows, monkeypatch):
    """{format: text} of the writers over file `src`, a write's rows formatted `chunk_rows` at
    a time."""
    monkeypatch.setattr(delimited, "_CHUNK_ROWS", chunk_rows)
    outs = {s: io.StringIO() for s in ("csv", "tsv", "jsonl", "ascii.jsonl")}
    with idv.open(src) as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", idv.IdvWarning)        # wide(), kept whole
        cols, values = f.columns, f.read()
        for w in [DelimitedWriter(outs["csv"], cols), DelimitedWriter(outs["tsv"], cols, "\t"),
                  JsonLinesWriter(outs["jsonl"], cols),
                  JsonLinesWriter(outs["ascii.jsonl"], cols, ensure_ascii=True)]:
            if cols:
                w.write([values[c.name] for c in cols])
            else:
                w.write_rows_without_columns(f.num_rows)
    return {k: v.getvalue() for k, v in outs.items()}


@pytest.mark.parametrize("name", NAMES)
def test_the_text_is_the_same_however_many_rows_a_write_formats_at_once(name, tmp_path,
                                                                         monkeypatch):
    """Rows formatted 7 at a time or 100,000 at a time give the same text; JSON Lines for a
    stream that is not UTF-8 escapes non-ASCII text, and reads back as the UTF-8 form."""
    src = tmp_path / "in.idv"
    source(name, src)
    small, large = _written(src, 7, monkeypatch), _written(src, 100_000, monkeypatch)
    assert small == large
    assert large["ascii.jsonl"].isascii()
    lines = {k: large[k].split("\n")[:-1] for k in ("ascii.jsonl", "jsonl")}   # not U+2028
    assert [json.loads(x) for x in lines["ascii.jsonl"]] == [json.loads(x) for x in lines["jsonl"]]


def test_csv_quotes_cells_as_the_csv_module_of_this_python_does(tmp_path):
    """Quotes where csv.writer puts them (a lone carriage return too, which Python 3.12 and
    later quote and earlier versions do not), in a header, a text column and a one-column file."""
    texts = ["a\rb", "", 'q"', "c,d", "e\tf", "g\nh", "plain", "\r"]
    src = tmp_path / "t.idv"
    idv.write(src, {"T,\r": obj(texts), "N": np.arange(len(texts), dtype=np.int32)})
    for delimiter in (",", "\t"):
        for names in (["T,\r", "N"], ["T,\r"]):
            expected = io.StringIO()
            w = csv.writer(expected, delimiter=delimiter, lineterminator="\n")
            w.writerow(names)
            w.writerows(zip(texts, map(str, range(len(texts))))
                        if len(names) == 2 else ([t] for t in texts))
            got = io.StringIO()
            with idv.open(src) as f:
                w = DelimitedWriter(got, [f[n] for n in names], delimiter)
                w.write([f.read()[n] for n in names])
            assert got.getvalue() == expected.getvalue(), (delimiter, names)


def test_json_lines_format_numbers_and_text_a_column_at_a_time(tmp_path, monkeypatch):
    """No Python call per number or text value: item_json (one value) is not called."""
    src = tmp_path / "n.idv"
    idv.write(src, {"I": np.arange(5), "F": np.ones(5, np.float32), "T": obj(["a"] * 5),
                    "V": np.zeros((5, 3))})

    def one_value(*args):
        raise AssertionError("a value formatted on its own")
    monkeypatch.setattr(cells, "item_json", one_value)
    out = io.StringIO()
    with idv.open(src) as f:
        JsonLinesWriter(out, f.columns).write(list(f.read().values()))
    assert out.getvalue().splitlines()[0] == \
        '{"I": 0, "F": 1.0, "T": "a", "V": [0.0, 0.0, 0.0]}'
