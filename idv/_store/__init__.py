"""The block store: runs of blocks fetched, checked, inflated and decoded in threads, one file or
many files at once."""
