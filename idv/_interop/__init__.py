"""The reading side's conversions: Arrow, pandas, PyTorch tensors, delimited text, a
notebook's view."""
