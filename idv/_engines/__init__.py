"""Many files as one table (idv.dataset), and the engines' internals: the Arrow dataset DuckDB
scans, engine predicates as filters, datasets reopened in every worker."""
