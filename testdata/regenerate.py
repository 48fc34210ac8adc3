#!/usr/bin/env python3
"""Rebuild the ML.NET-written test fixtures in this folder through the ML.NET oracle.

The oracle's sample (shared/oracle/fixtures-sample) covers one block per column almost
everywhere. These fixtures cover what it does not: many small blocks of variable-size vectors
mixing dense, sparse and empty rows; text and Boolean vectors whose items cross block and byte
boundaries; DateTimeOffset / TimeSpan / DateTime / RowId vectors with extreme ticks (incl.
long.MinValue); keys over UInt64 with huge counts, key vectors with KeyValues; annotation types
the sample lacks; and the same data with compression None and Deflate.

For each fixture NAME (defined below, in FIXTURES) this writes:

    NAME.spec.json   the oracle's write-spec input (built here)
    NAME.idv         written by ML.NET (mlnet_oracle.py write-spec, with the save options)
    NAME.json        the sidecar: ML.NET's dump of NAME.idv (schema, annotations, values, TOC)

and manifest.json (name -> description, save options, files). Run it with no arguments:

    python3 testdata/regenerate.py [--shared PATH] [--only NAME ...]

The shared folder is $IDV_SHARED, else <repo>/../shared; the oracle must be set up
(bash <shared>/oracle/setup.sh). ML.NET's block order is not deterministic, so the .idv bytes
change from run to run; the values do not. Keep each file well under 100 KB.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MAX_BYTES = 100_000

I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1
U64_MAX = 2 ** 64 - 1
DT_MAX = 3155378975999999999          # DateTime.MaxValue.Ticks
TICKS_2020 = 637134336000000000       # 2020-01-01
TICKS_1970 = 621355968000000000
TICKS_PER_MINUTE = 600000000


def sp(length, pairs):
    """A sparse vector cell: explicit (index, value) pairs, everything else default."""
    return {"length": length, "indices": [i for i, _ in pairs], "values": [v for _, v in pairs]}


# ---- fixture specs --------------------------------------------------------------------------

def vectors_blocks():
    """29 rows (in blocks of 4, the last of one row): every vector block layout the writer
    has."""
    n = 29
    f32 = []
    i64 = []
    f64 = []
    keys = []
    u8 = []
    mat = []
    var3 = []
    for r in range(n):
        b = r // 4
        if b == 2:        # one block where every vector has length 3: size = 3, no lengths
            f32.append([r, -r, 0.5])
            i64.append([r, I64_MIN, I64_MAX])
        elif b == 3:      # one block of empty vectors only: size 0 and a lengths array of 0s
            f32.append([])
            i64.append([])
        elif b == 4:      # one block of sparse rows only, one of them with no items
            f32.append(sp(5 + r, [(0, 1.0), (4 + r, "NaN")]) if r % 2 else sp(3, []))
            i64.append(sp(r, [(r - 1, -r)]))
        else:
            k = r % 6
            f32.append([[], [1.5], sp(7, [(1, "-0.0"), (6, "Infinity")]),
                        ["NaN", "-0.0", 3.4028234663852886e+38, 1.401298464324817e-45], sp(4, []),
                        [float(r)] * (r % 9)][k])
            i64.append([[r, -r], [], sp(9, [(0, I64_MIN), (8, I64_MAX)]), [0] * 5, [r],
                        sp(2, [(1, 7)])][k])
        # fixed Vector<Double, 6>: dense, sparse, all-default sparse; block 5 is all sparse
        if b == 5 or r % 3 == 1:
            f64.append(sp(6, [(r % 6, r / 7.0)] if r % 2 else []))
        elif r % 3 == 2:
            f64.append(sp(6, [(0, "-0.0"), (5, 5e-324)]))
        else:
            f64.append([r, -r, 0.1, "NaN", "-Infinity", 1.7976931348623157e+308])
        # variable key vector over UInt16 with count 300: 0 = missing, 300 = the last key
        keys.append([[], [1, 300, 0], sp(10, [(2, 300), (9, 1)]), [r + 1] * (r % 4), sp(1, []),
                     [0]][r % 6])
        u8.append([r, 255, 0] if r % 2 else sp(3, [(1, r)]))
        # a 2x3 matrix per row, dense or sparse; and a [3, *] shape with a variable dimension
        if r % 3 == 0:
            mat.append([r, 1, 2, 3, 4, "-0.0"])
        else:
            mat.append(sp(6, [(r % 6, r), (5, 0.25)][:1 + r % 2] if r % 6 != 5 else [(5, r)]))
        var3.append([[], [r, r + 1, r + 2], sp(6, [(5, -r)]), [7] * 9][r % 4])
    return {"rows": n, "columns": [
        {"name": "Id", "type": "Int32", "values": list(range(n))},
        {"name": "VarF32", "type": "Single", "vector": 0, "values": f32},
        {"name": "VarI64", "type": "Int64", "vector": 0, "values": i64},
        {"name": "FixF64", "type": "Double", "vector": 6, "values": f64},
        {"name": "VarKey", "type": "Key", "key_raw": "UInt16", "key_count": 300, "vector": 0,
         "values": keys},
        {"name": "FixU8", "type": "Byte", "vector": 3, "slot_names": ["a", "", "c"], "values": u8},
        {"name": "Mat2x3", "type": "Single", "vector": [2, 3], "values": mat},
        {"name": "Var3xN", "type": "Int32", "vector": [3, 0], "values": var3},
    ]}


TEXTS = ["", "a", "\u00e9t\u00e9", "\U0001F600", "\u65e5\u672c\u8a9e", "x\ty\nz", "\x00",
         "\U0001F468\u200d\U0001F469", "long " * 20, "\ud7ff\ue000"]


def text_bool_vectors():
    """23 rows in blocks of 5: text items across blocks, Boolean bits across vectors."""
    n = 23
    var_text, fix_text, var_bool, fix_bool = [], [], [], []
    for r in range(n):
        k = r % 5
        var_text.append([[], [TEXTS[r % 10]], [TEXTS[(r + j) % 10] for j in range(r % 7)],
                         sp(4, [(1, TEXTS[3]), (3, "end")]), sp(2, [])][k])
        fix_text.append([TEXTS[r % 10], TEXTS[(r + 3) % 10], str(r)] if r % 3
                        else sp(3, [(2, TEXTS[(r + 4) % 10])]))
        # lengths 0..12, none a multiple of 8 in a row: bits of one vector straddle bytes
        length = (r * 5) % 13
        var_bool.append(sp(length, [(length - 1, True)]) if r % 4 == 3 and length > 1
                        else [(r + j) % 3 == 0 for j in range(length)])
        fix_bool.append([(r >> j) & 1 == 1 for j in range(5)] if r % 4
                        else sp(5, [(0, True), (4, True)] if r % 8 else []))
    return {"rows": n, "columns": [
        {"name": "VarText", "type": "Text", "vector": 0, "values": var_text},
        {"name": "FixText", "type": "Text", "vector": 3, "slot_names": ["one", "two", "three"],
         "values": fix_text},
        {"name": "VarBool", "type": "Boolean", "vector": 0, "values": var_bool},
        {"name": "FixBool", "type": "Boolean", "vector": 5, "values": fix_bool},
        {"name": "Bool", "type": "Boolean", "values": [r % 3 == 1 or r == n - 1 for r in range(n)]},
        {"name": "Text", "type": "Text", "values": [TEXTS[(r * 3) % 10] for r in range(n)]},
    ]}


def _dto(ticks, offset_minutes):
    return {"ticks": ticks, "offset_minutes": offset_minutes}


def datetime_vectors():
    """10 rows in blocks of 3: date/time and RowId vectors with extreme values."""
    n = 10
    dto_var = [[_dto(TICKS_2020 + 5, -60)], [], sp(3, [(1, _dto(DT_MAX, 0))]),
               [_dto(TICKS_1970, 840), _dto(TICKS_1970, -840), _dto(840 * TICKS_PER_MINUTE, 840)],
               sp(2, []), [_dto(DT_MAX - 840 * TICKS_PER_MINUTE, -840)],
               [_dto(1, 0), _dto(TICKS_2020 + 1, 330)], [], sp(5, [(4, _dto(TICKS_2020, -480))]),
               [_dto(TICKS_2020, 0)] * 4]
    dto_fix = [[_dto(TICKS_2020 + r * TICKS_PER_MINUTE, r * 60 - 300), _dto(0, 0)]
               if r % 3 else sp(2, [(1, _dto(TICKS_1970 + r, -r))]) for r in range(n)]
    ts_var = [[I64_MIN], [I64_MAX, I64_MIN, 0], [], sp(4, [(2, I64_MIN)]), [-1, 1],
              sp(3, []), [864000000000 * r for r in range(5)], [I64_MIN] * 3, [0], [I64_MAX]]
    ts_fix = [[I64_MIN, r, I64_MAX] if r % 2 else sp(3, [(0, I64_MIN)]) for r in range(n)]
    dt_var = [[0, DT_MAX], [], sp(3, [(2, DT_MAX)]), [TICKS_1970], [1, 2, 3], sp(1, []),
              [TICKS_2020 + r for r in range(6)], [DT_MAX - 1], [], [0]]
    rid_var = [[0, 1], [2 ** 128 - 1], [], sp(3, [(1, 2 ** 64)]), [2 ** 64 - 1, 2 ** 64 + 1],
               [0x0123456789ABCDEF_FEDCBA9876543210], sp(2, []), [5] * 3, [], [2 ** 127]]
    return {"rows": n, "columns": [
        {"name": "VarDTO", "type": "DateTimeOffset", "vector": 0, "values": dto_var},
        {"name": "FixDTO", "type": "DateTimeOffset", "vector": 2, "values": dto_fix},
        {"name": "VarTS", "type": "TimeSpan", "vector": 0, "values": ts_var},
        {"name": "FixTS", "type": "TimeSpan", "vector": 3, "values": ts_fix},
        {"name": "VarDT", "type": "DateTime", "vector": 0, "values": dt_var},
        {"name": "VarRowId", "type": "RowId", "vector": 0, "values": rid_var},
        # scalars across blocks; TimeSpan long.MinValue is ML.NET's old NA
        {"name": "TS", "type": "TimeSpan",
         "values": [I64_MIN, 0, I64_MAX, -1, I64_MIN, 1, 864000000000, I64_MIN + 1, I64_MIN, 7]},
        {"name": "DTO", "type": "DateTimeOffset",
         "values": [_dto(TICKS_2020 + r, (r * 173) % 1681 - 840) for r in range(n)]},
        {"name": "DT", "type": "DateTime",
         "values": [0, DT_MAX, TICKS_1970, 1, TICKS_2020, DT_MAX - 1, 2, 3, 4, 5]},
        {"name": "RID", "type": "RowId",
         "values": [0, 2 ** 128 - 1, 2 ** 64, 2 ** 64 - 1, 1, 2 ** 127, 3, 4, 5, 6]},
    ]}


def mixed_dates():
    """48 rows in blocks of 16: the DateTimes of real ML.NET data. 'Created' mixes
    default(DateTime) (year 1, ticks 0) with DateTime.Now-style values (100-ns digits): no
    unit but .NET ticks holds it exactly. 'Updated' has 100-ns digits within 1677-2262
    (nanoseconds hold it), 'Day' whole days back to year 1 (microseconds hold it), 'Elapsed'
    TimeSpans with 100-ns digits."""
    n = 48
    now = [TICKS_2020 + 2_000_000_000_000 + r * 86_400_123_456_7 + (r * 7919) % 10_000_000
           for r in range(n)]
    return {"rows": n, "columns": [
        {"name": "Id", "type": "Int32", "values": list(range(n))},
        {"name": "Created", "type": "DateTime",
         "values": [0 if r % 5 == 0 else now[r] for r in range(n)]},
        {"name": "Updated", "type": "DateTime", "values": [t + 3 for t in now]},
        {"name": "Day", "type": "DateTime",
         "values": [0 if r % 7 == 0 else (r * 86_400 * 10_000_000 * 1000) for r in range(n)]},
        {"name": "Elapsed", "type": "TimeSpan", "values": [r * 12_345_671 for r in range(n)]},
    ]}


def keys_wide():
    """9 rows in blocks of 4: keys at the limits of their raw types, key vectors with KeyValues."""
    n = 9
    return {"rows": n, "columns": [
        {"name": "U64Max", "type": "Key", "key_raw": "UInt64", "key_count": U64_MAX,
         "values": [0, 1, U64_MAX, 2 ** 63, 2 ** 63 - 1, U64_MAX - 1, 2 ** 32, 0, U64_MAX]},
        {"name": "U64Big", "type": "Key", "key_raw": "UInt64", "key_count": 2 ** 63 + 5,
         "values": [2 ** 63 + 5, 0, 1, 2 ** 63, 2, 3, 4, 5, 6]},
        {"name": "U16Max", "type": "Key", "key_raw": "UInt16", "key_count": 65535,
         "values": [65535, 0, 1, 65534, 2, 3, 65535, 4, 5]},
        {"name": "U32Max", "type": "Key", "key_raw": "UInt32", "key_count": 2 ** 32 - 1,
         "values": [2 ** 32 - 1, 0, 1, 2 ** 31, 2, 3, 4, 5, 2 ** 32 - 2]},
        # Byte key vector with KeyValues: fixed, dense and sparse rows
        {"name": "ByteKeyVec", "type": "Key", "key_raw": "Byte", "key_count": 6, "vector": 4,
         "key_values": ["xs", "s", "m", "l", "xl", "\u00e9"],
         "values": [[1, 2, 3, 4], sp(4, [(2, 6)]), [0, 0, 0, 0], [6, 5, 4, 3], sp(4, []),
                    [1, 1, 1, 1], sp(4, [(0, 1), (3, 6)]), [2, 0, 2, 0], [3, 3, 3, 3]]},
        # Byte key at the Byte limit, variable-size, with numeric KeyValues
        {"name": "ByteKeyVar", "type": "Key", "key_raw": "Byte", "key_count": 255, "vector": 0,
         "key_values": {"type": "Double", "values": [i / 4.0 for i in range(254)] + ["NaN"]},
         "values": [[255], [], [1, 2, 3], sp(6, [(5, 255)]), [0], [128] * 7, sp(2, []), [254, 255],
                    []]},
        {"name": "U64KeyVec", "type": "Key", "key_raw": "UInt64", "key_count": U64_MAX,
         "vector": 2,
         "values": [[U64_MAX, 0], sp(2, [(1, 2 ** 63)]), [1, 2], [0, 0], sp(2, []),
                    [3, U64_MAX - 1], [4, 5], [6, 7], [8, 9]]},
    ]}


def annotations_more():
    """Annotation types and values the sample does not have."""
    n = 2
    return {"rows": n, "columns": [
        {"name": "A", "type": "Single", "vector": 3, "values": [[1, 2, 3], sp(3, [(1, 5)])],
         "annotations": [
             {"kind": "KeyU64Max", "type": "Key", "key_raw": "UInt64", "key_count": U64_MAX,
              "value": U64_MAX},
             {"kind": "DTOVec", "type": "DateTimeOffset", "vector": 2,
              "value": [_dto(TICKS_2020, -480), _dto(DT_MAX, 0)]},
             {"kind": "DTO", "type": "DateTimeOffset", "value": _dto(TICKS_1970, 840)},
             {"kind": "TSMin", "type": "TimeSpan", "value": I64_MIN},
             {"kind": "TSVec", "type": "TimeSpan", "vector": 0, "value": [I64_MIN, I64_MAX, 0]},
             {"kind": "RowId", "type": "RowId", "value": 2 ** 128 - 1},
             {"kind": "BoolVec", "type": "Boolean", "vector": 0,
              "value": [True, False, True, True, False, False, False, True, True, True, False]},
             {"kind": "TextSparse", "type": "Text", "vector": 5,
              "value": sp(5, [(1, "\U0001F600"), (4, "")])},
             {"kind": "Matrix", "type": "Double", "vector": [2, 3],
              "value": [1, "-0.0", "NaN", "Infinity", 5e-324, -1]},
             {"kind": "SByteVec", "type": "SByte", "vector": 3, "value": [-128, 0, 127]},
             {"kind": "EmptyVec", "type": "Int32", "vector": 0, "value": []},
             {"kind": "DT", "type": "DateTime", "value": DT_MAX},
             {"kind": "F32NegZero", "type": "Single", "value": "-0.0"},
             {"kind": "F64NaN", "type": "Double", "value": "NaN"},
             {"kind": "U64", "type": "UInt64", "value": U64_MAX},
             {"kind": "Text", "type": "Text", "value": ""},
             {"kind": "False", "type": "Boolean", "value": False},
         ]},
        {"name": "B", "type": "Key", "key_raw": "UInt32", "key_count": 3,
         "key_values": {"type": "DateTime", "values": [0, TICKS_1970, DT_MAX]}, "values": [3, 0]},
        {"name": "C", "type": "Int32", "values": [1, 2],
         "annotations": [{"kind": "IsNormalized", "type": "Boolean", "value": True}]},
    ]}


def sample():
    """The sample bundled with the package (idv/data/sample.idv): 240 house listings in 4
    blocks, every common type, as an ML.NET pipeline would leave them."""
    import random
    rnd = random.Random(20261123)
    cities = ["Seattle", "Redmond", "Bellevue", "Kirkland", "Tacoma"]
    words = ["Bright", "Quiet", "Sunny", "Cosy", "Spacious", "Modern", "Classic", "Renovated"]
    kinds = ["flat", "house", "studio", "loft", "townhouse", "maisonette"]
    places = ["near the lake", "by the park", "in the centre", "close to the caf\u00e9",
              "with a view of Mt. Rainier", "on a calm street", "\u2014 no agents", ""]
    second = 10_000_000
    start = TICKS_1970 + 1_704_067_200 * second          # 2024-01-01T00:00:00
    rows = 240
    cols = {k: [] for k in ("Id", "Listed", "City", "Bedrooms", "Area", "Price", "Sold",
                            "Title", "Features")}
    for i in range(rows):
        bedrooms = rnd.randint(0, 5)
        area = round(rnd.uniform(25, 60) + 22 * bedrooms, 1)
        city = rnd.randint(1, len(cities))
        age = rnd.randint(0, 90)
        distance = round(rnd.uniform(0.2, 25.0), 2)
        price = round(area * rnd.uniform(3500, 9000) / (1 + distance / 40), -2)
        cols["Id"].append(100_000 + 17 * i)
        cols["Listed"].append(start + rnd.randint(0, 300 * 86400) * second)
        cols["City"].append(city)
        cols["Bedrooms"].append(bedrooms)
        cols["Area"].append(area)
        cols["Price"].append(price)
        cols["Sold"].append(rnd.random() < 0.4)
        cols["Title"].append(" ".join(filter(None, [rnd.choice(words),
                             f"{bedrooms}-bedroom" if bedrooms else "", rnd.choice(kinds),
                             rnd.choice(places)])))
        cols["Features"].append([float(bedrooms), area / 100, age / 10, distance])
    types = {"Id": "Int64", "Listed": "DateTime", "Bedrooms": "Int32", "Area": "Single",
             "Price": "Double", "Sold": "Boolean", "Title": "Text"}
    columns = [{"name": n, "type": types[n], "values": cols[n]} for n in
               ("Id", "Listed")]
    columns.append({"name": "City", "type": "Key", "key_raw": "UInt32",
                    "key_count": len(cities), "key_values": cities, "values": cols["City"]})
    columns += [{"name": n, "type": types[n], "values": cols[n]} for n in
                ("Bedrooms", "Area", "Price", "Sold", "Title")]
    columns.append({"name": "Features", "type": "Single", "vector": 4,
                    "slot_names": ["Bedrooms", "Area100", "Age10", "DistanceKm"],
                    "values": cols["Features"]})
    return {"rows": rows, "columns": columns}


# name -> (description, spec builder, oracle save options)
FIXTURES = {
    "vectors_blocks_deflate": (
        "variable/fixed vectors in 8 blocks of 4 rows (the last of 1; Deflate): dense, sparse, "
        "empty, all-sparse and equal-length blocks, UInt16 key vectors", vectors_blocks,
        ["--max-rows-per-block", "4", "--compression", "deflate"]),
    "vectors_blocks_none": (
        "the same data as vectors_blocks_deflate, compression None", vectors_blocks,
        ["--max-rows-per-block", "4", "--compression", "none"]),
    "vectors_blocks_rpb1": (
        "the same data as vectors_blocks_deflate, one row per block: every variable-size "
        "vector block stores a common size (0 for an empty vector)", vectors_blocks,
        ["--max-rows-per-block", "1"]),
    "text_bool_vectors": (
        "text and Boolean vectors (variable and fixed, dense and sparse) and scalars over "
        "5 blocks of 5 rows: UTF-16 boundaries, surrogate pairs, bits across vectors",
        text_bool_vectors, ["--max-rows-per-block", "5"]),
    "datetime_vectors": (
        "DateTimeOffset, TimeSpan, DateTime and RowId vectors and scalars over 4 blocks of 3 "
        "rows, with long.MinValue/MaxValue ticks, +-840 minute offsets, 128-bit row ids",
        datetime_vectors, ["--max-rows-per-block", "3"]),
    "keys_wide": (
        "keys over UInt64 with count 2^64-1 and 2^63+5, UInt16/UInt32 at their maxima, Byte key "
        "vectors with text and Double KeyValues, 3 blocks of 4 rows, compression None",
        keys_wide, ["--max-rows-per-block", "4", "--compression", "none"]),
    "annotations_more": (
        "annotation types the sample lacks: UInt64 key, DateTimeOffset (vector), TimeSpan "
        "long.MinValue, RowId, Boolean vector, sparse text vector, 2x3 Double, DateTime KeyValues",
        annotations_more, []),
    "mixed_dates": (
        "DateTimes as in real ML.NET data: default(DateTime) beside 100-ns DateTime.Now-style "
        "values, 100-ns values within 1677-2262, whole days from year 1, 100-ns TimeSpans; 3 "
        "blocks of 16 rows", mixed_dates, ["--max-rows-per-block", "16"]),
    "sample": (
        "the sample bundled with the package (idv.sample_path()): 240 listings in 4 blocks "
        "of 64 rows; Int64, DateTime, a key with KeyValues, Int32, Single, Double, Boolean, "
        "Text and a Vector<Single, 4> with SlotNames",
        sample, ["--max-rows-per-block", "64"]),
}

# fixtures whose .idv goes into the package rather than this folder
PACKAGE_DATA = {"sample": REPO / "idv" / "data" / "sample.idv"}


def shared_dir(arg=None):
    if arg:
        return Path(arg).expanduser().resolve()
    env = os.environ.get("IDV_SHARED")
    return Path(env).expanduser().resolve() if env else (REPO.parent / "shared").resolve()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shared", help="the shared folder (default $IDV_SHARED or <repo>/../shared)")
    p.add_argument("--python", default=os.environ.get("IDV_ORACLE_PYTHON", "python3"),
                   help="interpreter that runs the oracle")
    p.add_argument("--only", nargs="+", choices=sorted(FIXTURES), help="rebuild only these")
    a = p.parse_args(argv)
    oracle = shared_dir(a.shared) / "oracle" / "mlnet_oracle.py"
    if not oracle.exists():
        sys.exit(f"regenerate.py: no oracle at {oracle} (use --shared or IDV_SHARED)")
    manifest_path = HERE / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest = {k: v for k, v in manifest.items() if k in FIXTURES}
    for name in a.only or FIXTURES:
        description, build, options = FIXTURES[name]
        spec_path = HERE / f"{name}.spec.json"
        idv_path = PACKAGE_DATA.get(name, HERE / f"{name}.idv")
        idv_path.parent.mkdir(exist_ok=True)
        side_path = HERE / f"{name}.json"
        spec_path.write_text(json.dumps(build(), indent=1, ensure_ascii=True) + "\n")
        proc = subprocess.run([a.python, str(oracle), "write-spec", str(spec_path), str(idv_path),
                               "--sidecar", str(side_path), *options],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"regenerate.py: {name}: oracle exited with {proc.returncode}\n"
                     f"{proc.stdout}\n{proc.stderr}")
        result = json.loads(proc.stdout)
        sizes = {p.name: p.stat().st_size for p in (spec_path, idv_path, side_path)}
        too_big = {k: v for k, v in sizes.items() if v > MAX_BYTES}
        if too_big:
            sys.exit(f"regenerate.py: {name}: files over {MAX_BYTES} bytes: {too_big}")
        manifest[name] = {"description": description, "save_options": options,
                          "spec": spec_path.name,
                          "idv": os.path.relpath(idv_path, HERE), "sidecar": side_path.name,
                          "writer": result["writer"], "self_check": result["self_check"]}
        print(f"{name}: {sizes[idv_path.name]} bytes, self-check {result['self_check']}")
    manifest = {k: manifest[k] for k in FIXTURES if k in manifest}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
