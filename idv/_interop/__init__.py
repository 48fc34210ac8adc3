"""The reading side's conversions: Arrow, pandas, delimited text, a notebook's view."""
