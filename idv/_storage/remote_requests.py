"""Which requests a set of byte ranges of a remote file becomes (idv._storage.remote): ranges
that touch or nearly touch are fetched as one, within a waste allowance and a size cap
(docs/remote.md gives the measurements behind the figures).
"""
from __future__ import annotations

import numpy as np

HOLE_BYTES = 8 << 10        # ranges this close are fetched as one (docs/remote.md) ...
WASTE_DIVISOR = 16          # ... while the gaps fetched stay under 1/16 of the bytes wanted
MAX_REQUEST = 8 << 20       # bytes per request at most (larger runs are split, fetched at once)


def coalesce(starts, stops, hole=HOLE_BYTES, waste_divisor=WASTE_DIVISOR,
             max_request=MAX_REQUEST):
    """Requests [(start, stop)] covering the ranges [starts[i], stops[i]): ranges that overlap
    or touch are merged, and so are those a gap of at most `hole` bytes apart as long as the
    gaps merged stay within 1/`waste_divisor` of the bytes the request carries for the ranges;
    a request grows to at most `max_request` bytes unless one range is larger."""
    order = np.argsort(starts, kind="stable")
    out = []
    cur_s = cur_e = useful = waste = None
    done = -1                       # the end of the requests made: no byte is asked twice
    for i in order.tolist():
        s, e = max(int(starts[i]), done), int(stops[i])
        if e <= s:
            continue
        if cur_s is not None:
            gap = s - cur_e
            new_e = max(cur_e, e)
            if new_e - cur_s <= max_request:
                if gap <= 0:
                    useful += new_e - cur_e
                    cur_e = new_e
                    continue
                if gap <= hole and (waste + gap) * waste_divisor <= useful + (e - s):
                    useful += e - s
                    waste += gap
                    cur_e = e
                    continue
            out.append((cur_s, cur_e))
            done = cur_e
            if gap < 0:               # overlaps, but the request is full: fetch the rest only
                s = cur_e
                if e <= s:
                    cur_s = None
                    continue
        cur_s, cur_e, useful, waste = s, e, e - s, 0
    if cur_s is not None:
        out.append((cur_s, cur_e))
    return out
