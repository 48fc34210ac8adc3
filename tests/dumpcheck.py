"""Compare an open idv file with ML.NET's view of it (an oracle sidecar or dump).

Every check takes the IdvFile and the dump dict and fails with the column and value that
differ. Used for the ML.NET-written sample fixtures, our own testdata fixtures and the .idv
entries of model zips.
"""
from __future__ import annotations

import warnings

import numpy as np

import idv
from expected import (LEGACY_CODECS, ExpectedRagged, annotation_expected, assert_arrays_equal,
                      assert_column_equal, assert_value_equal, column_cells, expected_column,
                      expected_type, item_values, our_type_string, parse_type_string, take,
                      visible_columns)

# numeric, Boolean and key items can be read as scipy CSR
SPARSE_ITEMS = {"Single", "Double", "SByte", "Byte", "Int16", "UInt16", "Int32", "UInt32",
                "Int64", "UInt64", "Boolean", "Key"}


def open_quietly(source):
    """idv.open, failing on any warning (ML.NET reads all these files without dropping any
    column or annotation)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return idv.open(source)


# ---- header ---------------------------------------------------------------------------------

def check_header(f, dump):
    h = dump["header"]
    assert h["signature_ok"] and h["tail_signature_ok"], "the dump saw a bad signature"
    assert f.num_rows == dump["row_count"] == h["row_count"], \
        f"num_rows {f.num_rows}, ML.NET: {dump['row_count']} (header {h['row_count']})"
    assert f.version == h["version"], f"version {f.version}, file header: {h['version']}"
    assert f.header.compatible_version_string == h["compatible_version"], \
        f"compatible version {f.header.compatible_version_string}, file: {h['compatible_version']}"
    assert f.num_columns == h["column_count"] == len(dump["columns"]), \
        f"{f.num_columns} columns, ML.NET: {len(dump['columns'])} (header {h['column_count']})"
    assert f.header.toc_offset == h["table_of_contents_offset"]
    assert f.header.tail_offset == h["tail_offset"]
    if "rows" in dump:
        assert len(dump["rows"]) == f.num_rows, \
            f"ML.NET iterated {len(dump['rows'])} rows, we report {f.num_rows}"


# ---- schema ---------------------------------------------------------------------------------

def check_schema(f, dump):
    """Names in order, types, hidden flags, and which column a name selects."""
    dcols = dump["columns"]
    assert f.column_names == [c["name"] for c in dcols], \
        f"columns {f.column_names}, ML.NET: {[c['name'] for c in dcols]}"
    schema = f.schema
    assert len(schema) == len(dcols)
    for col, field, dcol in zip(f.columns, schema, dcols):
        where = f"column {dcol['index']} {dcol['name']!r}"
        assert col.index == dcol["index"], f"{where}: index {col.index}"
        t = expected_type(dcol, where)
        assert col.type == t, f"{where}: type {col.type}, ML.NET: {dcol['type_string']} ({t})"
        assert str(col.type) == our_type_string(dcol["type_string"]), \
            f"{where}: str(type) {str(col.type)!r}, ML.NET: {dcol['type_string']!r}"
        assert field.type == t and field.name == dcol["name"]
        assert field.hidden == dcol["hidden"], \
            f"{where}: hidden={field.hidden}, ML.NET: hidden={dcol['hidden']}"
        assert col.readable, f"{where}: not readable, ML.NET reads it"
    visible = {}
    for dcol in dcols:
        if not dcol["hidden"]:
            assert dcol["name"] not in visible, "ML.NET shows one column per name"
            visible[dcol["name"]] = dcol["index"]
    for name, index in visible.items():
        assert f[name].index == index, \
            f"f[{name!r}] is column {f[name].index}; ML.NET's visible {name!r} is column {index}"
        assert name in f


# ---- table of contents ----------------------------------------------------------------------

def _toc_entry(col):
    return col._entry   # the parsed TOC entry (private: offsets are not public API)


def check_toc(f, dump):
    """Codec load names, compression, rows per block, offsets, from ML.NET's BinaryLoader."""
    toc = dump["table_of_contents"]
    assert not toc.get("dead_columns"), f"ML.NET found dead columns: {toc['dead_columns']}"
    tcols = toc["columns"]
    assert len(tcols) == f.num_columns
    for col, tc in zip(f.columns, tcols):
        where = f"column {col.index} {col.name!r}"
        assert tc["name"] == col.name and tc["column_index"] == col.index
        ours = LEGACY_CODECS.get(col.codec_name, col.codec_name)
        assert ours == tc["codec"], f"{where}: codec {col.codec_name!r}, ML.NET: {tc['codec']!r}"
        assert col.compression == tc["compression"], \
            f"{where}: compression {col.compression}, ML.NET: {tc['compression']}"
        assert col.rows_per_block == tc["rows_per_block"], \
            f"{where}: rows_per_block {col.rows_per_block}, ML.NET: {tc['rows_per_block']}"
        n = f.num_rows
        blocks = 0 if n == 0 else -(-n // tc["rows_per_block"])
        assert col.num_blocks == blocks, f"{where}: {col.num_blocks} blocks, expected {blocks}"
        assert len(col.lookup) == blocks, f"{where}: lookup has {len(col.lookup)} entries"
        entry = _toc_entry(col)
        assert entry.lookup_offset == tc["lookup_offset"], where
        assert entry.metadata_offset == tc["metadata_toc_offset"], where
        ours_meta = [(m.kind, LEGACY_CODECS.get(m.codec_name, m.codec_name),
                      {0: "None", 1: "Deflate"}.get(m.compression, m.compression), m.offset, m.size)
                     for m in col.metadata_entries()]
        theirs = [(m["kind"], m["codec"], m["compression"], m["block_offset"], m["block_size"])
                  for m in tc.get("metadata", [])]
        assert ours_meta == theirs, f"{where}: metadata TOC {ours_meta}, ML.NET: {theirs}"


# ---- metadata -------------------------------------------------------------------------------

def check_metadata(f, dump):
    """Annotation kinds (in order), types and values."""
    for col, dcol in zip(f.columns, dump["columns"]):
        where = f"column {col.index} {col.name!r}"
        anns = dcol["annotations"]
        kinds = [a["kind"] for a in anns]
        assert col.metadata_kinds == kinds, f"{where}: metadata kinds {col.metadata_kinds}, " \
                                            f"ML.NET: {kinds}"
        types = col.metadata_types
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            values = col.metadata
        assert list(values) == kinds, f"{where}: metadata values for {list(values)}"
        for a in anns:
            w = f"{where} metadata {a['kind']!r}"
            assert "value" in a, f"{w}: ML.NET could not read it: {a.get('value_error')}"
            t = expected_type(a, w)
            assert types[a["kind"]] == t, \
                f"{w}: type {types[a['kind']]}, ML.NET: {a['type_string']}"
            assert str(types[a["kind"]]) == our_type_string(a["type_string"]), w
            assert_value_equal(values[a["kind"]], annotation_expected(a), w)


# ---- values ---------------------------------------------------------------------------------

def check_column_values(col, dump):
    """col.read() equals what ML.NET read, value by value."""
    where = f"column {col.index} {col.name!r}"
    expected = expected_column(dump, col.index)
    assert_column_equal(col.read(), expected, where)
    return expected


def check_sparse_read(col, dump):
    """read(sparse=True): a CSR matrix holding exactly the items ML.NET's VBuffers hold
    (dense rows: every slot; sparse rows: their (index, value) pairs), bit for bit."""
    import scipy.sparse as sp
    t = col.type
    where = f"column {col.index} {col.name!r} (sparse=True)"
    cells = column_cells(dump, col.index)
    indptr, indices, items = [0], [], []
    width = t.size
    for c in cells:
        if isinstance(c, dict):
            indices += [int(i) for i in c["indices"]]
            items += c["values"]
            width = max(width, int(c["length"]))
        else:
            indices += range(len(c))
            items += c
            width = max(width, len(c))
        indptr.append(len(indices))
    m = col.read(sparse=True)
    assert sp.issparse(m) and m.format == "csr", f"{where}: got {type(m).__name__}"
    assert m.shape == (len(cells), width), \
        f"{where}: shape {m.shape}, expected {(len(cells), width)}"
    assert m.nnz == len(items), \
        f"{where}: {m.nnz} stored items, ML.NET's VBuffers hold {len(items)}"
    assert_arrays_equal(np.asarray(m.indptr, np.int64), np.array(indptr, np.int64),
                        f"{where} indptr")
    assert_arrays_equal(np.asarray(m.indices, np.int64), np.array(indices, np.int64),
                        f"{where} indices")
    assert_arrays_equal(m.data, item_values(t.item, items), f"{where} data")


def check_access_paths(col, expected):
    """Slices (crossing block boundaries), steps, single rows and iter_blocks agree with the
    full read's expected values."""
    n = col.num_rows
    where = f"column {col.index} {col.name!r}"
    rpb = col.rows_per_block
    # iter_blocks: one part per block, in order
    parts = list(col.iter_blocks())
    assert len(parts) == col.num_blocks, f"{where}: iter_blocks gave {len(parts)} parts"
    start = 0
    for b, part in enumerate(parts):
        stop = min(start + rpb, n)
        assert_column_equal(part, take(expected, range(start, stop)), f"{where} block {b}")
        start = stop
    if n == 0:
        return
    bounds = {0, n, n // 2, max(0, n - 1)}
    for k in (1, 2, 3):
        bounds |= {min(n, k * rpb - 1), min(n, k * rpb), min(n, k * rpb + 1)}
    bounds = sorted(bounds)
    slices = [slice(a, b) for a in bounds for b in bounds if a < b][:40]
    slices += [slice(None, None, 3), slice(1, None, max(1, rpb)), slice(None, None, -1),
               slice(n - 1, 0, -2), slice(-3, None)]
    for s in slices:
        rows = list(range(*s.indices(n)))
        assert_column_equal(col[s], take(expected, rows),
                            f"{where}[{s.start}:{s.stop}:{s.step}]")
    picks = sorted({0, n - 1, n // 2, min(n - 1, rpb), min(n - 1, rpb - 1)})
    for i in picks + [-1, -n]:
        _check_cell(col[i], take(expected, [i % n]), f"{where}[{i}]")


def _check_cell(cell, exp, where):
    """col[i] against the one-row expected part `exp`."""
    if isinstance(exp, ExpectedRagged):
        assert_arrays_equal(cell, exp.values, where)
    elif exp.ndim > 1:
        assert_arrays_equal(cell, exp[0], where)
    elif exp.dtype.kind == "O":
        assert isinstance(cell, str) and cell == exp[0], \
            f"{where}: got {cell!r}, expected {exp[0]!r}"
    else:
        assert isinstance(cell, np.generic), \
            f"{where}: got {type(cell).__name__}, not a numpy scalar"
        assert_arrays_equal(np.array([cell], dtype=exp.dtype), exp, where)


def check_read_dict(f, dump):
    """f.read() gives the visible columns (the last of each name), as ML.NET shows them."""
    visible = [c for c in dump["columns"] if not c["hidden"]]
    data = f.read()
    assert list(data) == [c["name"] for c in visible], \
        f"read() keys {list(data)}, ML.NET's visible columns {[c['name'] for c in visible]}"
    for dcol in visible:
        assert_column_equal(data[dcol["name"]], expected_column(dump, dcol["index"]),
                            f"read()[{dcol['name']!r}] (column {dcol['index']})")
    # by index, every column including hidden ones
    for dcol in dump["columns"]:
        got = f.read(columns=[dcol["index"]])
        assert list(got) == [dcol["name"]]
        assert_column_equal(got[dcol["name"]], expected_column(dump, dcol["index"]),
                            f"read(columns=[{dcol['index']}])")


# ---- all of it ------------------------------------------------------------------------------

def check_file(f, dump):
    """Header, schema, table of contents, metadata and every column's values."""
    check_header(f, dump)
    check_schema(f, dump)
    check_toc(f, dump)
    check_metadata(f, dump)
    for col in f.columns:
        check_column_values(col, dump)


# ---- a file we wrote from an ML.NET file's columns ------------------------------------------

def check_idv_against_dump(path, dump, columns=None):
    """A file we wrote holds the visible columns of an ML.NET file: names, exact types,
    metadata (kinds in order, types, values) and every value."""
    dcols = visible_columns(dump)
    if columns is not None:
        dcols = [c for c in dcols if c["name"] in columns]
    with open_quietly(path) as f:
        assert f.column_names == [c["name"] for c in dcols]
        if dcols:
            assert f.num_rows == dump["row_count"]
        for col, dcol in zip(f.columns, dcols):
            where = f"column {dcol['name']!r}"
            assert col.type == parse_type_string(dcol["type_string"]), \
                f"{where}: {col.type} vs ML.NET {dcol['type_string']}"
            kinds = [a["kind"] for a in dcol["annotations"]]
            assert col.metadata_kinds == kinds, where
            types = col.metadata_types
            for a in dcol["annotations"]:
                assert types[a["kind"]] == parse_type_string(a["type_string"]), where
                assert_value_equal(col.metadata[a["kind"]], annotation_expected(a),
                                   f"{where} metadata {a['kind']}")
            assert_column_equal(col.read(), expected_column(dump, dcol["index"]), where)
