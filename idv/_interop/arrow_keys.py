"""A key column labelled by KeyValues that a filter tests, read once for a record batch stream
(idv._interop.arrow): as its key numbers, read()'s form, which the test takes; its converter
(idv._interop.arrow_columns) makes Arrow dictionary arrays of the matching rows alone, rather
than of every row decoded twice, once as numbers for the test and once as a dictionary."""
from __future__ import annotations

from idv import types as T
from idv._scan.checked_keys import CheckedKeys


class KeyNumbers(CheckedKeys):
    """A scan reader of a labelled key column (`conv`: its converter) into its key numbers,
    each checked to have a label as it is decoded, as the converter's arrays of every row
    would be (a key without one is an error however the filter goes)."""

    def __init__(self, conv):
        super().__init__(conv.col)
        self.conv = conv

    def array(self, raw, hits=None):
        """The Arrow dictionary array of key numbers `raw` (checked already), or of their
        rows `hits` (positions, ascending)."""
        return self.conv.array(raw if hits is None else raw[hits])

    def take(self, chunks, hits, seen):
        """take(chunks, positions, as tested) of a TestedReader: the matching rows as one
        dictionary array."""
        return self.array(seen, hits)


def key_numbers(conv):
    """A KeyNumbers of the column of converter `conv` when the converter makes its values
    Arrow dictionaries of its key numbers (a scalar key labelled by KeyValues), else None."""
    return KeyNumbers(conv) if isinstance(conv.type, T.Key) and \
        conv.dictionary is not None else None
