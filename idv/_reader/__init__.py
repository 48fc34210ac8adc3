"""Open files and datasets as sources, their columns and schema, which columns and rows a read
covers, and the reads written once over a source."""
