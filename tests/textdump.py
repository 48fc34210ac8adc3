"""ML.NET's text forms: its TextLoader dumps (shared/mlnet-files/*.txt), and how .NET prints
dates and times.

A dump's fields become the oracle's JSON cell encoding (see expected.py), so a dump is checked
with the same code as a sidecar. Written from .NET's documented formats, not from idv's code.
"""
from __future__ import annotations

import datetime as dt
import re

import idv

# TextLoader kind (ML.NET's InternalDataKind) -> idv item type
KINDS = {
    "BL": idv.Boolean, "I1": idv.SByte, "U1": idv.Byte, "I2": idv.Int16, "U2": idv.UInt16,
    "I4": idv.Int32, "U4": idv.UInt32, "I8": idv.Int64, "U8": idv.UInt64, "R4": idv.Single,
    "R8": idv.Double, "TX": idv.Text, "TS": idv.TimeSpan, "DT": idv.DateTime,
    "DZ": idv.DateTimeOffset, "UG": idv.RowId,
}
_COL = re.compile(r"^col=([^:]+):(\w\w)(?:\[(\d+)\])?:(\d+)$")
_TICKS_PER_SECOND = 10_000_000
_DAY0 = dt.datetime(1, 1, 1)


def parse_textloader_dump(path):
    """(columns [(name, idv type)], rows [[text field, ...]]) of an ML.NET text dump.

    The ``#@ TextLoader{ ... }`` header declares the columns (``col=NAME:KIND[:count]:INDEX``;
    ``U4[3]`` is a key of count 3). Rows are tab-separated; ``"..."`` quotes are removed. A
    sparse row is ``LENGTH<tab>i:v<tab>...``: every other field is the default value.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    columns, header, body = [], False, []
    for line in lines:
        if line.startswith("#@"):
            decl = line[2:].strip()
            if decl == "header+":
                header = True
            m = _COL.match(decl)
            if m:
                name, kind, count, index = m.groups()
                t = KINDS[kind]
                if count is not None:
                    t = idv.Key(t, count=int(count))
                assert int(index) == len(columns), f"column {name} is not at index {len(columns)}"
                columns.append((name, t))
        elif line.strip():
            body.append(line)
    if header:
        names = body.pop(0).split("\t")
        assert names == [c[0] for c in columns], f"header line {names} vs {columns}"
    rows = []
    for line in body:
        fields = [unquote(x) for x in line.split("\t")]
        if len(fields) != len(columns) and all(re.match(r"^\d+:", x) for x in fields[1:]):
            assert int(fields[0]) == len(columns), f"sparse row of length {fields[0]}"
            dense = [None] * len(columns)        # None: the default value
            for pair in fields[1:]:
                i, v = pair.split(":", 1)
                dense[int(i)] = v
            fields = dense
        assert len(fields) == len(columns), f"row {line!r} has {len(fields)} fields"
        rows.append(fields)
    return columns, rows


def unquote(s):
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] == '"' else s


def clock_ticks(text):
    """ISO date-time with 7 fractional digits (.NET "o" format) -> .NET ticks."""
    m = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,7}))?$", text)
    assert m, f"unexpected date-time {text!r}"
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    frac = int((m.group(7) or "0").ljust(7, "0"))
    delta = dt.datetime(y, mo, d, h, mi, s) - _DAY0
    return (delta.days * 86400 + delta.seconds) * _TICKS_PER_SECOND + frac


def timespan_ticks(text):
    """.NET TimeSpan "c" format ``[-][d.]hh:mm:ss[.fffffff]`` -> ticks."""
    m = re.match(r"^(-)?(?:(\d+)\.)?(\d\d):(\d\d):(\d\d)(?:\.(\d{1,7}))?$", text)
    assert m, f"unexpected TimeSpan {text!r}"
    sign, days, h, mi, s, frac = m.groups()
    ticks = ((int(days or 0) * 24 + int(h)) * 3600 + int(mi) * 60 + int(s)) * _TICKS_PER_SECOND
    ticks += int((frac or "0").ljust(7, "0"))
    return -ticks if sign else ticks


def text_to_cell(t, text):
    """A TextLoader field -> the oracle's JSON cell encoding (None = default(T))."""
    if isinstance(t, idv.Key):
        return 0 if text is None else int(text)
    name = t.name
    if name == "Text":
        return "" if text is None else text
    if name == "Boolean":
        return text is not None and {"0": False, "1": True, "false": False,
                                     "true": True}[text.lower()]
    if name in ("Single", "Double"):
        return "0.0" if text is None else repr(float(text))
    if name == "TimeSpan":
        return 0 if text is None else timespan_ticks(text)
    if name == "DateTime":
        return 0 if text is None else clock_ticks(text)
    if name == "DateTimeOffset":
        if text is None:
            return {"ticks": 0, "offset_minutes": 0}
        m = re.match(r"^(.*)([+-])(\d\d):(\d\d)$", text)
        assert m, f"unexpected DateTimeOffset {text!r}"
        offset = (int(m.group(3)) * 60 + int(m.group(4))) * (-1 if m.group(2) == "-" else 1)
        return {"ticks": clock_ticks(m.group(1)), "offset_minutes": offset}
    return 0 if text is None else int(text)


def ticks_iso(ticks):
    """.NET ticks -> ISO 8601 at tick precision, trailing zero fraction dropped."""
    d = dt.datetime(1, 1, 1) + dt.timedelta(microseconds=ticks // 10)
    s = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
    frac = f"{d.microsecond:06d}{ticks % 10}".rstrip("0")
    return f"{s}.{frac}" if frac else s


def timespan_str(ticks):
    """.NET TimeSpan "c" format: [-][d.]hh:mm:ss[.fffffff]."""
    sign = "-" if ticks < 0 else ""
    t = abs(ticks)
    days, t = divmod(t, 864_000_000_000)
    secs, frac = divmod(t, 10_000_000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return (f"{sign}{str(days) + '.' if days else ''}{h:02d}:{m:02d}:{s:02d}"
            + (f".{frac:07d}" if frac else ""))
