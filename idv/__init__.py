"""Read and write ML.NET binary dataview (.idv) files with numpy, no .NET needed.

    >>> import idv
    >>> with idv.open(idv.sample_path()) as f:     # the small ML.NET file idv ships
    ...     print(f.schema)
    ...     features = f["Features"][100:200]      # rows 100-199 as a numpy array
    Id: Int64
    Listed: DateTime
    City: Key<UInt32, 5>
      -- metadata: KeyValues: Vector<Text, 5>
    Bedrooms: Int32
    Area: Single
    Price: Double
    Sold: Boolean
    Title: Text
    Features: Vector<Single, 4>
      -- metadata: SlotNames: Vector<Text, 4>
    >>> features.shape, features.dtype
    ((100, 4), dtype('float32'))
"""
from idv._version import __version__
from idv._resources.budget import MemoryLimitError, set_memory_limit
from idv.errors import (IdvFormatError, IdvWarning, MissingDependencyError,
                        UnsupportedCodecError)
from idv.errors import RemoteError, RemoteTimeoutError
from idv._reader.reader import Column, IdvFile, open, read
from idv._reader.schema import Field, Schema
from idv.types import (Boolean, Byte, DataViewType, DateTime, DateTimeOffset, Double, Int16,
                       Int32, Int64, Key, PrimitiveType, RowId, SByte, Single, Text, TimeSpan,
                       UInt16, UInt32, UInt64, Vector)
from idv._storage.sample import sample_path
from idv._values.vectors import Ragged, Sparse

__all__ = [
    "__version__", "open", "read", "sample_path", "IdvFile", "Column", "Schema", "Field", "Ragged",
    "IdvFormatError", "UnsupportedCodecError", "IdvWarning", "MissingDependencyError",
    "MemoryLimitError", "set_memory_limit", "RemoteError", "RemoteTimeoutError",
    "DataViewType", "PrimitiveType", "Key", "Vector",
    "SByte", "Byte", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Single", "Double",
    "Boolean", "Text", "DateTime", "DateTimeOffset", "TimeSpan", "RowId",
]

from idv._reader.checker import Finding, VerifyReport, verify  # noqa: E402
from idv._reader.listing import ZipEntry, zip_entries  # noqa: E402
from idv._writer import Writer, write  # noqa: E402

__all__ += ["verify", "VerifyReport", "Finding", "write", "Writer", "Sparse", "zip_entries",
            "ZipEntry"]

# the Python data stack: pandas and pyarrow are imported only when these are called
from idv._interop.arrow import arrow_schema, record_batch_reader, to_arrow  # noqa: E402
from idv.formats import convert  # noqa: E402
from idv._interop.pandas import SCHEMA_ATTR, read_pandas, to_pandas  # noqa: E402
from idv._writer.arrow import from_arrow  # noqa: E402
from idv._writer.pandas import from_pandas  # noqa: E402

# many files as one table (idv.dataset); Dask lives in the submodule idv.dask, imported on use
from idv._reader.dataset import Dataset, dataset  # noqa: E402
from idv._engines.arrow_dataset import arrow_dataset  # noqa: E402 - pyarrow imported when called
from idv._reader.dataset_files import DatasetFile  # noqa: E402
from idv._reader.block_stats import add_statistics  # noqa: E402

__all__ += ["dataset", "Dataset", "DatasetFile", "add_statistics", "arrow_dataset"]
__all__ += ["to_pandas", "read_pandas", "from_pandas", "to_arrow", "from_arrow",
            "record_batch_reader", "arrow_schema", "convert", "SCHEMA_ATTR"]
