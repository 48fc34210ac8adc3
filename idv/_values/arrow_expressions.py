"""A pyarrow compute Expression read as a tree, with each literal in its Arrow type.

pyarrow offers no way to walk an Expression, and its text is ambiguous: a bytes literal prints
as hex digits in quotes (the text of another string), a duration as a bare count of its unit,
the strings of ``isin()``'s set unescaped. Its pickle is exact: Arrow serializes an
Expression as an Arrow IPC file whose columns are the literals (each in its type) and whose
schema metadata lists the tree in order (``call``/``end`` around a call's arguments,
``field_ref``, ``literal`` and ``options`` naming a column). pyarrow's Python dictionary of
that metadata drops the repeated keys, so the pairs are read from the schema exported through
the Arrow C data interface, whose metadata is the documented list of (key, value) pairs.

``tree(expression)`` gives nested tuples: ``("call", function name, [arguments], options)``,
``("field", name)`` and ``("literal", value)``; values as idv's filters compare them (str,
int, float, bool, bytes, None, numpy datetime64 / timedelta64 in the literal's own unit, a
timestamp with a time zone as its UTC instant), options as a dict. ValueError for what it
cannot read.
"""
from __future__ import annotations

import ctypes

_METADATA_AT = 16      # struct ArrowSchema: format, name, metadata (pointers), ...


def tree(expression):
    """The tree of a pyarrow compute Expression (see the module's docstring)."""
    import pyarrow as pa

    try:
        _, (serialized,) = expression.__reduce__()
        reader = pa.ipc.open_file(serialized)
        literals = reader.read_all()
        pairs = _metadata_pairs(reader.schema)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise ValueError(f"cannot read the pyarrow expression {str(expression)!r}: {e}") \
            from None
    stack = [("call", None, [], None)]
    for key, value in pairs:
        if key == "call":
            stack.append(("call", value, [], None))
        elif key == "end":
            node = stack.pop()
            if len(stack) < 1 or node[1] != value:
                raise ValueError(f"cannot read the pyarrow expression {str(expression)!r}")
            stack[-1][2].append(node)
        elif key == "field_ref":
            stack[-1][2].append(("field", value))
        elif key == "literal":
            stack[-1][2].append(("literal", _value(literals.column(int(value)))))
        elif key == "options":
            kind, name, args, _ = stack.pop()
            stack.append((kind, name, args, _options(literals.column(int(value)))))
        else:          # a nested field reference, or what a later Arrow adds
            raise ValueError(f"the filter {str(expression)!r} holds {key!r}, which idv's "
                             f"filters do not take")
    if len(stack) != 1 or len(stack[0][2]) != 1:
        raise ValueError(f"cannot read the pyarrow expression {str(expression)!r}")
    return stack[0][2][0]


def _metadata_pairs(schema):
    """The (key, value) pairs of `schema`'s metadata, in order, repeated keys kept."""
    capsule = schema.__arrow_c_schema__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    at = ctypes.c_void_p.from_address(get(capsule, b"arrow_schema") + _METADATA_AT).value
    if not at:
        return []
    out = []
    n = ctypes.c_int32.from_address(at).value
    at += 4
    for _ in range(n):
        item = []
        for _ in range(2):
            size = ctypes.c_int32.from_address(at).value
            item.append(ctypes.string_at(at + 4, size).decode())
            at += 4 + size
        out.append(tuple(item))
    del capsule            # releases the exported schema
    return out


def _value(column):
    """The one value of a literal's column, as idv's filters compare it."""
    return _values(column.combine_chunks())[0]


def _values(array):
    import pyarrow as pa

    t = array.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_duration(t):
        if pa.types.is_timestamp(t) and t.tz is not None:
            array = array.cast(pa.timestamp(t.unit))        # its UTC instant
        return list(array.to_numpy(zero_copy_only=False))
    return array.to_pylist()


def _options(column):
    """A call's options (a struct literal) as a dict; a set (``value_set``) as a list."""
    import pyarrow as pa

    struct = column.combine_chunks()
    out = {}
    for i, field in enumerate(struct.type):
        child = struct.field(i)
        if field.name == "value_set":
            out[field.name] = _values(child.flatten()) if pa.types.is_list(field.type) \
                else _values(child)
        elif field.name != "_type_name":
            out[field.name] = child.to_pylist()[0]
    return out
