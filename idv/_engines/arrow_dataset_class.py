"""The ``pyarrow.dataset.Dataset`` subclass behind idv.arrow_dataset: .idv files answering
pyarrow's and DuckDB's calls from idv's scan (idv._engines.arrow_scanner), on a filesystem that
refuses whatever would go to Arrow's C++ scanner instead.

It imports pyarrow as it is imported: idv.arrow_dataset imports it only when called.
"""
from __future__ import annotations

import pyarrow.dataset as pads
import pyarrow.fs as pafs

from idv._interop import arrow
from idv._resources.closing import ClosedOnExit
from idv._engines.arrow_scanner import IdvScanner

# pyarrow's scanner options that change how Arrow's C++ scanner runs, not what it returns
_SCAN_OPTIONS = {"batch_readahead", "fragment_readahead", "fragment_scan_options",
                 "use_threads", "cache_metadata", "memory_pool"}


class _Refusing(pafs.FileSystemHandler):
    """A filesystem whose every call raises: what Arrow's C++ scanner would read."""

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __hash__(self):
        return id(self)

    def get_type_name(self):
        return "idv"

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(
            "Arrow's own scanner cannot read an idv.arrow_dataset (Scanner.from_dataset, "
            "write_dataset): call its scanner(), to_table() or to_batches(), or give "
            "write_dataset ds.scanner().to_reader()")

    get_file_info = get_file_info_selector = create_dir = delete_dir = _refuse
    delete_dir_contents = delete_root_dir_contents = delete_file = move = _refuse
    copy_file = open_input_stream = open_input_file = open_output_stream = _refuse
    open_append_stream = normalize_path = _refuse


def _unsupported(what):
    """A method of pyarrow's Dataset that needs Arrow's own C++ dataset: it raises."""
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{what} is not supported on an idv.arrow_dataset: "
                                  f"call to_table() first, or use scanner().to_reader()")
    method.__name__ = what
    return method


def _options(kwargs, where):
    """TypeError for `kwargs` that are not pyarrow's scanner options (_SCAN_OPTIONS)."""
    unknown = set(kwargs) - _SCAN_OPTIONS
    if unknown:
        raise TypeError(f"{where}() got unexpected arguments: {', '.join(sorted(unknown))}")


_REFUSING = pafs.PyFileSystem(_Refusing())


class IdvArrowDataset(pads.FileSystemDataset, ClosedOnExit):
    """.idv files as a pyarrow Dataset (made by idv.arrow_dataset).

    Beneath it lies a dataset of one file on a filesystem that refuses every call, so
    that what goes to Arrow's C++ scanner directly (``Scanner.from_dataset``,
    ``write_dataset``) raises NotImplementedError instead of reading nothing."""

    def __init__(self, ds, unit, safe):
        schema = arrow.arrow_schema(ds, ds.column_names, datetime=unit)
        fmt = pads.IpcFileFormat()
        pads.FileSystemDataset.__init__(
            self, [fmt.make_fragment("idv.arrow_dataset", filesystem=_REFUSING)], schema,
            fmt, _REFUSING)
        self.idv_dataset = ds
        self._unit, self._safe = unit, safe
        self._schema = schema
        self._types = {fl.name: fl.type for fl in ds.schema.fields}

    @property
    def files(self):
        """The paths of the .idv files."""
        return [f.path for f in self.idv_dataset.files]

    def __repr__(self):
        return (f"<idv.arrow_dataset of {len(self.idv_dataset.files)} file(s), "
                f"{self.idv_dataset.num_rows} rows: {self._schema.names}>")

    def close(self):
        """Close the files of the idv.Dataset beneath."""
        self.idv_dataset.close()

    def __reduce__(self):
        raise TypeError("an idv.arrow_dataset is not picklable: pass its paths and call "
                        "idv.arrow_dataset again")

    @property
    def schema(self):
        """The Arrow schema of every column (as idv.to_arrow gives it)."""
        return self._schema

    def scanner(self, columns=None, filter=None, batch_size=None,
                **options):  # noqa: A002 - pyarrow's name
        """A Scanner of `columns` (names; all by default) and the rows matching
        `filter` (a pyarrow expression), in batches of at most `batch_size` rows (default:
        whole blocks of 131,072 rows or more, up to 16 MiB a batch)."""
        _options(options, "scanner")
        return IdvScanner(self, columns, filter, batch_size)

    def to_table(self, columns=None, filter=None, **options):  # noqa: A002
        """A pyarrow.Table of `columns` and the rows matching `filter`."""
        return self.scanner(columns, filter, **options).to_table()

    def to_batches(self, columns=None, filter=None, batch_size=None,
                   **options):  # noqa: A002
        """An iterator of RecordBatches (see scanner)."""
        return self.scanner(columns, filter, batch_size, **options).to_batches()

    def head(self, num_rows, columns=None, filter=None, **options):  # noqa: A002
        """The first `num_rows` rows (that match `filter`) as a Table, reading no
        further than they need."""
        return self.scanner(columns, filter, **options).head(num_rows)

    def take(self, indices, columns=None, filter=None, **options):  # noqa: A002
        """The rows `indices` (row numbers over the files end to end) as a Table, in
        the order given; only the blocks that hold them are decoded."""
        return self.scanner(columns, filter, **options).take(indices)

    def count_rows(self, filter=None, **options):  # noqa: A002
        """The number of rows matching `filter` (all: from the headers). Blocks whose
        statistics decide the filter are counted without being decoded."""
        return self.scanner(None, filter, **options).count_rows()

    get_fragments = _unsupported("get_fragments")
    filter = _unsupported("filter")  # noqa: A003 - pyarrow's name
    join = _unsupported("join")
    join_asof = _unsupported("join_asof")
    sort_by = _unsupported("sort_by")
    replace_schema = _unsupported("replace_schema")

    @property
    def partition_expression(self):
        """Not supported: .idv files have no partitioning."""
        raise NotImplementedError("an idv.arrow_dataset has no partition expression")
