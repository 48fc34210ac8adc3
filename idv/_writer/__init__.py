"""The writing API: ``idv.write(dest, data)`` and the streaming ``idv.Writer``.

The package reads top-down: `tables` (idv.write: a whole table into one file or a
hive-partitioned directory), `pipeline` (Writer: batches, the rows-per-block
decision, block encoding in threads, the tables and the header), `inputs` (what data and
schemas are accepted), `pandas` and `arrow` (DataFrames and Arrow tables as columns, types and
metadata: idv.from_pandas, idv.from_arrow), `columns` (one column's checked values, size
estimate and block payload), `values` (checking and converting values into their stored
form), `metadata` (annotation values). Types come from idv.types / idv._values.infer, compression
from idv.compression, the atomic output from idv._storage.sink. Nothing here reads .idv files. """
from idv._writer.pipeline import DEFAULT_MAX_BYTES_PER_BLOCK, DEFAULT_MAX_ROWS_PER_BLOCK, Writer
from idv._writer.tables import write

__all__ = ["Writer", "write", "DEFAULT_MAX_ROWS_PER_BLOCK", "DEFAULT_MAX_BYTES_PER_BLOCK"]
