"""Integer codes of raters, cases and cells: distinct values, first
occurrences and dense renumbering, as ``np.unique`` gives them (the same
values and order), by faster routes where the codes allow.
"""

from __future__ import annotations

import numpy as np

_TABLE_BYTES = 40  # bytes per code that a table over the codes' range may take


def unique_codes(codes, return_inverse: bool = False):
    """The sorted distinct values of integer ``codes`` and, with
    ``return_inverse``, each code's position among them: what ``np.unique``
    returns. Non-negative codes in a narrow range (rater, case and cell
    codes) are marked in a table over that range instead of sorted: linear
    time, several times faster on hundreds of thousands of codes. The table
    takes a byte per slot, and four more for the positions, within
    :data:`_TABLE_BYTES` per code (about what sorting takes). Other codes
    are sorted (numpy 2.4's ``np.unique`` without ``return_*`` takes a
    hashing path far slower than sorting wide integers, so not that)."""
    codes = np.asarray(codes, dtype=np.int64).ravel()
    slot_bytes = 5 if return_inverse else 1
    if codes.size and codes.min() >= 0 and codes.max() * slot_bytes < _TABLE_BYTES * codes.size:
        seen = np.zeros(int(codes.max()) + 1, dtype=bool)
        seen[codes] = True
        values = np.flatnonzero(seen)
        if not return_inverse:
            return values
        rank = np.cumsum(seen, dtype=np.int32) - 1
        return values, rank[codes].astype(np.int64)
    if return_inverse:
        values, inverse = np.unique(codes, return_inverse=True)
        return values, inverse.ravel()
    ordered = np.sort(codes)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if ordered.size \
        else ordered


def _first_index(codes) -> np.ndarray:
    """Where each distinct code first occurs, in code order:
    ``np.unique(codes, return_index=True)[1]``, by the same stable sort,
    of 16-bit keys (a radix sort) when the codes fit."""
    codes = np.asarray(codes)
    if codes.size and codes.min() >= 0 and codes.max() < 2**16:
        codes = codes.astype(np.uint16)
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    return order[starts]


def _dense(codes) -> tuple[np.ndarray, int]:
    """Codes renumbered 0..G-1 over the values that occur, and G."""
    values, inverse = unique_codes(codes, return_inverse=True)
    return inverse, values.size
