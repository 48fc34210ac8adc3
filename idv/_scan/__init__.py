"""The one scan: many columns of one file or of many read in step, and the filters that skip
blocks."""
