"""A batch of columns in read()'s forms as PyTorch tensors, what idv.torch's datasets give
(its docstring says what each column type becomes). Imported by idv.torch alone, with torch."""
from __future__ import annotations

import numpy as np

from idv import types as T
from idv._values import ticks, vectors
from idv.errors import require

torch = require("torch", "idv.torch", "idv[torch]")
# UInt16 and UInt32 values: torch >= 2.3 has their dtypes; older versions take them as int64
_WIDENED = () if hasattr(torch, "uint32") else (np.dtype(np.uint16), np.dtype(np.uint32))


def tensor_form(values, item):
    """Items in their tensor's dtype: times as int64 100-ns counts, keys (and unsigned
    integers torch has no dtype for) as int64."""
    arr = np.asarray(values)
    if item in ticks.TIME_ITEMS:
        return arr.view(np.int64)
    if isinstance(item, T.Key) or arr.dtype in _WIDENED:
        return arr.astype(np.int64)
    return arr


def items(values, item):
    """A flat or rectangular array of items as a tensor (numbers, Booleans: no copy)."""
    arr = tensor_form(values, item)
    if not arr.flags.writeable:       # torch shares the memory, and wants to be allowed to write
        arr = arr.copy()
    return torch.from_numpy(arr)


def padded(ragged, item):
    """A Ragged as a zero-padded (rows, longest) tensor, and its lengths."""
    lengths = ragged.lengths
    width = int(lengths.max()) if len(lengths) else 0
    flat = tensor_form(ragged.values, item)
    out = np.zeros((len(lengths), width), flat.dtype)
    out[np.arange(width) < lengths[:, None]] = flat
    return torch.from_numpy(out), torch.from_numpy(lengths.astype(np.int64))


def to_tensors(values: list, names: list[str], types: list, ragged: str = "padded") -> dict:
    """One batch: read()'s forms of each column as a dict of tensors and lists of str."""
    out = {}
    for name, t, value in zip(names, types, values):
        item = T.item_type(t)
        if item is T.Text:
            out[name] = [list(r) for r in value] if isinstance(value, vectors.Ragged) \
                else value.tolist()
        elif isinstance(value, vectors.Ragged):
            if ragged == "nested":
                out[name] = torch.nested.nested_tensor_from_jagged(
                    items(value.values, item), torch.from_numpy(value.offsets))
            else:
                out[name], out[name + "_lengths"] = padded(value, item)
        else:
            out[name] = items(value, item)
    return one_storage(out)


def one_storage(batch):
    """In a DataLoader's worker, the batch's tensors copied into one storage: the worker hands
    each storage to the main process through a shared-memory segment of its own, whose making,
    passing and mapping cost more than the copy (of 2 columns, 0.66 s an epoch of 2M rows
    rather than 0.93 s)."""
    dense = [k for k, v in batch.items() if isinstance(v, torch.Tensor) and not v.is_nested]
    if len(dense) < 2 or torch.utils.data.get_worker_info() is None:
        return batch
    sizes = [batch[k].numel() * batch[k].element_size() for k in dense]
    room = [-(-n // 64) * 64 for n in sizes]        # each tensor 64-byte aligned
    buf = torch.empty(sum(room), dtype=torch.uint8)
    at = 0
    for k, n, r in zip(dense, sizes, room):
        t = batch[k]
        batch[k] = buf[at:at + n].view(t.dtype).view(t.shape)
        batch[k].copy_(t)
        at += r
    return batch
