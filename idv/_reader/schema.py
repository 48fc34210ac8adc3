"""A file's (or a dataset's) schema: its columns' names, types and annotations' types,
as ML.NET shows them (hidden columns marked), apart from the columns' data."""
from __future__ import annotations


class Field:
    """One entry of a Schema: a column's name, type and metadata types.

    Attributes: ``index`` (the column's position), ``name``, ``type`` (a DataViewType, None
    when the codec is unknown), ``codec`` (the codec's name in the file), ``metadata_types``
    (dict kind -> type) and ``hidden`` (True when a later column has the same name).
    """

    __slots__ = ("index", "name", "type", "codec", "metadata_types", "hidden")

    def __init__(self, index, name, type_, codec, metadata_types, hidden):
        self.index = index
        self.name = name
        self.type = type_
        self.codec = codec
        self.metadata_types = metadata_types
        self.hidden = hidden

    def __str__(self):
        t = self.type if self.type is not None else f"<unreadable: codec {self.codec!r}>"
        s = f"{self.name}: {t}"
        if self.hidden:
            s += "  (hidden: a later column has the same name)"
        if self.metadata_types:
            meta = ", ".join(f"{k}: {v}" for k, v in self.metadata_types.items())
            s += f"\n  -- metadata: {meta}"
        return s

    def __repr__(self):
        return f"Field({self.name!r}, {self.type})"

    def __eq__(self, other):
        if not isinstance(other, Field):
            return NotImplemented
        return _field_key(self) == _field_key(other)

    __hash__ = None


def _field_key(f):
    return (f.name, f.type if f.type is not None else f"codec {f.codec}", dict(f.metadata_types),
            f.hidden)


class Schema:
    """The columns' names and types, printable like pyarrow's."""

    def __init__(self, fields, num_rows):
        self.fields = list(fields)
        self.num_rows = num_rows
        # a name's field, found in one step (a wide file's callers look up every column);
        # built in file order, a later column of a name replaces an earlier one, as ML.NET
        # shows them
        self._by_name = {f.name: f for f in self.fields}

    @property
    def names(self):
        """The column names, in file order (hidden columns included)."""
        return [f.name for f in self.fields]

    @property
    def types(self):
        """The column types, in file order (None for a column whose codec is unknown)."""
        return [f.type for f in self.fields]

    def __len__(self):
        return len(self.fields)

    def __iter__(self):
        return iter(self.fields)

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._by_name[key]
        return self.fields[key]

    def __contains__(self, name):
        """``'Label' in schema``: whether a column has that name."""
        return isinstance(name, str) and name in self._by_name

    def __eq__(self, other):
        """Schemas are equal when their columns have the same names, types, metadata types and
        hidden flags, in the same order (the row count is not part of a schema)."""
        if not isinstance(other, Schema):
            return NotImplemented
        return [_field_key(f) for f in self.fields] == [_field_key(f) for f in other.fields]

    __hash__ = None

    def __str__(self):
        return "\n".join(str(f) for f in self.fields)

    def _repr_html_(self):
        from idv._interop import display
        return display.schema_html(self)

    def __repr__(self):
        return f"idv.Schema ({len(self.fields)} columns, {self.num_rows} rows)\n{self}"
