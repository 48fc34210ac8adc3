"""Where bytes live: sources (maps, buffers, file objects, URLs, zips), the paths a dataset names,
output that appears whole, a job's files committed together, and the parts of a file (layout,
checksums, statistics)."""
