"""Missing values on the way in. ML.NET has them in Single and Double (NaN), keys (0) and,
read back, Text (an empty string: it writes no missing Text); every other type has none. A
write refuses a missing value where the type has none, saying which types hold one, and
writes a missing Text as the text the caller names (``missing_text=``), whatever form the
data came in: a DataFrame, Arrow data, a list or a numpy array.
"""
from __future__ import annotations

import numpy as np

from idv import _encode, types as T
from idv._values.infer import is_missing

# what a missing value is in the ML.NET types that have one (the others have none)
MISSING_VALUE_TYPES = "Single and Double (NaN), keys (0) and Text (empty)"


def missing_value(place, t, what="null", fill="fill or drop the nulls first"):
    """ValueError: a missing value (`what`) at `place` in a column of type `t`, which has
    none, saying which types hold one and how to write it."""
    if t is T.Text:
        raise ValueError(f"{place}: {what}, but Text has no missing value in ML.NET (it reads an "
                         f"empty string for one): pass missing_text=\"\" to write it as empty "
                         f"text (idv convert: --missing-text ''), or {fill}")
    raise ValueError(f"{place}: {what}, but {t} has no missing value in ML.NET; the types that "
                     f"hold one are {MISSING_VALUE_TYPES}: choose one with types={{column: "
                     f"'Double'}} (idv convert: --types COLUMN=Double), or {fill}")


def ensure_missing_text(text):
    """`text` (None: missing Text is refused), else TypeError."""
    if text is not None and not isinstance(text, str):
        raise TypeError(f"missing_text must be a str (\"\" for ML.NET's empty text), not "
                        f"{type(text).__name__}")
    return text


def filled_values(values, text):
    """A column's Python or numpy values with their missing Text as `text`: None or NaN
    among the strings of a list, tuple or 1-d object array, the masked entries of a masked
    array of strings; any other values as they are (Arrow data has its own way:
    arrow_items.filled_text)."""
    if isinstance(values, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(values)
        data = np.ma.getdata(values)
        if data.ndim != 1 or data.dtype.kind not in "UO" or not mask.any() or \
                not all(isinstance(v, str) for v in data[~mask]):
            return values
        return np.where(mask, np.array(text, dtype=object), data.astype(object))
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1 and \
            _encode.first_non_str(np.ascontiguousarray(values)) < 0:
        return values               # all strings (a batch's usual case): one pass in C
    if isinstance(values, (list, tuple)) or (isinstance(values, np.ndarray) and
                                             values.dtype == object and values.ndim == 1):
        missing = [is_missing(v) for v in values]      # all of them too: a Text column's
        if any(missing) and all(isinstance(v, str) for v, m in zip(values, missing) if not m):
            return [text if m else v for v, m in zip(values, missing)]
    return values
