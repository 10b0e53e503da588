"""The pointwise family's knobs, and which (rows, N) view of the result its kernel walks.

The pointwise kernel (``templates/pointwise.py.tmpl``) walks a (rows, N) row-major view of the
result: N is the product of the result's last ``k`` dims. A CTA is ``threads`` threads of
``vec``-element accesses across a row, ``rows_per_thread`` rows deep; a row shorter than
``threads * vec`` shrinks the CTA to the row (at least one warp), and an N that no wide
access divides reads one element at a time. With ``k`` = 1 (the last dim alone), a result
whose last dim is short (BatchNorm's per-channel affine on a (B, C, 128, 128) bf16 tensor:
rows of 128 values, 16 accesses for a warp of 32 threads) leaves threads idle and CTAs small;
the same kernel over rows of H x W has neither. :func:`view_dims` picks ``k`` from the
result's shape and its operands' shapes: every operand must still be a full tensor, a
per-column or per-row vector, a per-channel one or a single value against the longer rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cutegen.codegen.families.matcher import leaf_kind

#: The pointwise family's (default TUNABLES, TUNABLE_CHOICES).
PW_KNOBS = ({"strategy": "tile", "threads": 128, "rows_per_thread": 4, "vec_bits": 128,
             "ctas_per_sm": 8},
            {"strategy": ["tile", "grid_stride"], "threads": [64, 128, 256, 512],
             "rows_per_thread": [1, 2, 4, 8], "vec_bits": [32, 64, 128],
             "ctas_per_sm": [4, 8, 16]})
#: Threads a Hopper SM holds, and CTAs it holds at most (the CTA count binds small CTAs).
_SM_THREADS = 2048
_SM_CTAS = 32
#: A view scoring at least this (of 1.0) at k = 1 is kept: only clearly wasteful views move.
_GOOD_ENOUGH = 0.75


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def view_score(n_rows: int, n_cols: int, elem_bytes: int, threads: int = PW_KNOBS[0]["threads"],
               rows: int = PW_KNOBS[0]["rows_per_thread"],
               vec_bits: int = PW_KNOBS[0]["vec_bits"]) -> float:
    """The share of the pointwise kernel's lanes, access width and SM occupancy that a
    (n_rows, n_cols) view of ``elem_bytes`` elements keeps busy at the family's default knobs
    (1.0: every thread of full-size CTAs moves full-width accesses of real elements). The
    kernel's own sizing (``_pw_launch``): vec the widest power of two <= vec_bits that divides
    n_cols, threads shrunk to the row (at least 32)."""
    if n_rows < 1 or n_cols < 1:
        return 0.0
    most = max(1, vec_bits // (8 * elem_bytes))
    vec = most
    while vec > 1 and n_cols % vec:
        vec //= 2
    cta = max(32, min(threads, _pow2_at_least(-(-n_cols // vec))))
    width = cta * vec
    lanes = n_cols / (-(-n_cols // width) * width)
    depth = n_rows / (-(-n_rows // rows) * rows)
    occupancy = min(1.0, _SM_CTAS * cta / _SM_THREADS)
    return lanes * depth * occupancy * (vec / most)


def view_dims(frame: Sequence[int], shapes: Sequence[Sequence[int]], elem_bytes: int) -> int:
    """``k``: how many trailing dims of the result ``frame`` make the pointwise kernel's rows,
    for operands of ``shapes`` (every one broadcasts to the frame as a full, per-column,
    per-row, per-channel or single value at k = 1). 1 unless the last dim alone scores under
    _GOOD_ENOUGH (:func:`view_score`); then the fewest dims that score best, among those
    against which every operand keeps a kind the kernel reads as it is."""
    frame = tuple(int(d) for d in frame)
    total = math.prod(frame)
    if len(frame) < 2 or total < 1:
        return 1

    def score(k: int) -> float:
        cols = math.prod(frame[len(frame) - k:])
        return view_score(total // cols, cols, elem_bytes)

    if score(1) >= _GOOD_ENOUGH:
        return 1
    best, best_score = 1, score(1)
    for k in range(2, len(frame) + 1):
        if any(leaf_kind(tuple(s), frame, k) is None for s in shapes):
            break  # a longer row only loses more operands
        if score(k) > best_score + 1e-9:
            best, best_score = k, score(k)
    return best
