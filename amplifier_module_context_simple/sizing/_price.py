"""The estimator's price of a text: tokens per character-class count, per tokenizer family.

BPE tokenizers mostly cut at class boundaries, so a text's tokens are close to a per-family
linear combination of its counts (``_features``). ``COEFFICIENTS`` holds the combinations, and
``float_price`` is the price by definition: the eleven products in order, summed as floats,
rounded up. ``text_price`` reaches the same integer from exact integers, for every family in one
sum (a resume prices every message of the history for three families).
"""

from __future__ import annotations

__all__ = ["COEFFICIENTS", "FAMILIES", "float_price", "text_price"]

import math
from collections.abc import Sequence

FAMILIES: tuple[str, ...] = ("o200k", "claude3", "claude47")

# Tokens per count, per family, in ``_features.features`` order: letters, uppercase letters,
# words (letter runs), camel humps, digit runs, punctuation runs, punctuation pairs, line breaks,
# runs of 2+ spaces, CJK characters, other non-ASCII characters. Fitted on the corpus, then
# raised 2%.
COEFFICIENTS: dict[str, tuple[float, ...]] = {
    "o200k": (0.039, 0.032, 0.86, 0.46, 1.94, 0.69, 0.44, 0.49, 0.97, 0.78, 2.4),
    "claude3": (0.031, 0.12, 0.9, 0.98, 1.64, 1.15, 0.0, 0.86, 1.42, 1.05, 2.7),
    "claude47": (0.21, 0.49, 0.52, 1.29, 1.76, 1.29, 0.0, 0.81, 1.35, 1.02, 2.98),
}


def float_price(counts: Sequence[int], name: str) -> int:
    """The price of a text's counts for one family: the products in order, summed by ``sum``,
    rounded up. This is the definition; ``text_price`` reaches the same integer faster."""
    k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10 = counts
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10 = COEFFICIENTS[name]
    # Three times faster than mapping ``operator.mul``, for the same float result.
    products = (c0 * k0, c1 * k1, c2 * k2, c3 * k3, c4 * k4, c5 * k5, c6 * k6, c7 * k7,
                c8 * k8, c9 * k9, c10 * k10)  # fmt: skip
    return math.ceil(sum(products))


def _exact_scale() -> int:
    """The power of ten that makes every coefficient an integer (the float ``0.039`` is the
    float of 39 / 1000), or 0 if there is none up to a million or a coefficient is negative."""
    coefficients = [c for row in COEFFICIENTS.values() for c in row]
    for digits in range(7):
        scale = 10**digits
        if all(c >= 0 and round(c * scale) / scale == c for c in coefficients):
            return scale
    return 0


_SCALE = _exact_scale()
_WEIGHTS = {name: [round(c * _SCALE) for c in row] for name, row in COEFFICIENTS.items()}
# Every count is at most the UTF-8 length of the text (< 2**63), so a family's sum of eleven
# products stays below 2**67 times its largest weight: that wide, lanes never carry into each
# other.
_LANE = 67 + max(max(row) for row in _WEIGHTS.values()).bit_length()
_LANE_MASK = (1 << _LANE) - 1
_SHIFTS = {name: _LANE * i for i, name in enumerate(FAMILIES)}
_PACKED = tuple(
    sum(_WEIGHTS[name][k] << _SHIFTS[name] for name in FAMILIES)
    for k in range(len(COEFFICIENTS[FAMILIES[0]]))
)
"""Each count's weights for all families in one integer, a lane each: one sum of eleven
products prices the text for every family at once."""
_EXACT_BELOW = 1 << 49
"""The float sum is within 1.4e-15 times the exact value of it (the rounding of the
coefficients, of the products and of ten additions: at most 12 halves of a float's precision),
and below this many weight units that is less than the 1 / _SCALE that separates an exact value
that is not an integer from the nearest integer (1.4e-15 * 2**49 / _SCALE < 1 / _SCALE)."""


def text_price(counts: Sequence[int], families: tuple[str, ...]) -> int:
    """``max(float_price(counts, name) for name in families)``, from exact integers.

    A family's exact price is its sum of weights over ``_SCALE``. When that is not an integer,
    the float sum (within ``_EXACT_BELOW``'s bound of it) rounds up to the same integer, and
    the largest family's price is the largest ceiling (a family whose exact price is an integer
    below the largest one rounds up to the largest one's ceiling at most). When the largest is
    an integer, the float sum may fall on either side of it, so ``float_price`` decides.
    """
    if _SCALE:
        k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10 = counts
        p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10 = _PACKED
        lanes = (k0 * p0 + k1 * p1 + k2 * p2 + k3 * p3 + k4 * p4 + k5 * p5 + k6 * p6
                 + k7 * p7 + k8 * p8)  # fmt: skip
        if k9 or k10:  # non-ASCII text
            lanes += k9 * p9 + k10 * p10
        top = 0
        for name in families:
            lane = (lanes >> _SHIFTS[name]) & _LANE_MASK
            if lane > top:
                top = lane
        if top % _SCALE and top < _EXACT_BELOW:
            return top // _SCALE + 1
        if not top:  # every product is 0.0
            return 0
    return max(float_price(counts, name) for name in families)
