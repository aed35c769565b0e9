"""The estimator's text model: the eleven character-class counts of one text segment.

Counted on the segment's UTF-8 bytes (lone surrogates as their three ``surrogatepass`` bytes),
in this order: letters, uppercase letters, words (letter runs), camel humps (a lowercase letter
followed by an uppercase one), digit runs, punctuation runs, punctuation pairs (``..``, counted
without overlap: a run of ``k`` gives ``k // 2``), line breaks, runs of two or more spaces, CJK
characters, other non-ASCII characters. Every byte that is not a letter, digit, space, line
break or byte >= 0x80 is punctuation.

How, and why this way: a whole-history estimate (the first request after a resume) reads every
byte of the history, so its cost is these counts. Each byte becomes one flag byte (one
``bytes.translate``), the flag bytes one big integer, and every count is then a few C-level
integer operations over it: a run start is a flag set here and not on the byte before (``x ^
(x & (x << 8))``), a count is ``(x & mask).bit_count()``. That is about three times faster than
counting two- and three-byte patterns with ``bytes.count``, which scans the text once per
pattern. ``tests/test_estimate.py`` checks the counts against that direct formulation.
"""

from __future__ import annotations

__all__ = ["features", "segments_features"]

import re

_LETTER, _UPPER, _LOWER, _DIGIT, _PUNCT, _BREAK, _SPACE, _HIGH = (1 << bit for bit in range(8))


def _flag_table() -> bytes:
    table = bytearray([_PUNCT] * 256)
    groups = (
        (range(97, 123), _LETTER | _LOWER),
        (range(65, 91), _LETTER | _UPPER),
        (b"0123456789", _DIGIT),
        (b" \r", _SPACE),  # "\r\n" is one token, so "\r" counts as a space, not a second break
        (b"\n\t\x0b\x0c", _BREAK),
        (range(128, 256), _HIGH),
    )
    for chars, flags in groups:
        for ch in chars:
            table[ch] = flags
    return bytes(table)


_FLAGS = _flag_table()
_PUNCT_PAIR = bytes((_PUNCT, _PUNCT))  # a punctuation byte's flag byte is _PUNCT alone
_CJK = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


class _Masks:
    """One flag repeated in every byte, for texts of up to ``size`` bytes (``x & mask`` keeps
    that flag of every byte: an ``&`` is as long as its shorter operand)."""

    __slots__ = ("break_", "digit", "high", "letter", "punct", "size", "space", "upper")

    def __init__(self, size: int) -> None:
        self.size = size
        ones = int.from_bytes(b"\x01" * size, "little")
        self.letter = ones * _LETTER
        self.upper = ones * _UPPER
        self.digit = ones * _DIGIT
        self.punct = ones * _PUNCT
        self.break_ = ones * _BREAK
        self.space = ones * _SPACE
        self.high = ones * _HIGH


_KEPT_MASK_BYTES = 1 << 20
"""Masks are kept for texts up to 1 MiB (seven masks of that size: 7 MB); a longer text builds
its own for the one call, which costs about as much again as counting it."""
_masks = _Masks(4096)


def _masks_for(size: int) -> _Masks:
    global _masks
    masks = _masks  # one read: another thread may replace it meanwhile
    if size <= masks.size:
        return masks
    if size > _KEPT_MASK_BYTES:
        return _Masks(size)
    masks = _Masks(min(max(size, 2 * masks.size), _KEPT_MASK_BYTES))
    _masks = masks
    return masks


def features(text: str) -> tuple[int, ...]:
    """The character-class counts of ``text``, in the module docstring's order."""
    raw = text.encode("utf-8", "surrogatepass")
    size = len(raw)
    masks = _masks_for(size)
    flags = raw.translate(_FLAGS)
    x = int.from_bytes(flags, "little")  # byte i at bits 8i..8i+7
    both = x & (x << 8)  # a flag set on this byte and on the one before
    starts = x ^ both  # a flag set on this byte and not on the one before: a run starts
    spaces = both & masks.space  # a space run reached its second byte here...
    cjk = other = 0
    if not text.isascii():
        non_ascii = len(text) - size + (x & masks.high).bit_count()
        # subn counts matches without materialising them (findall built one string per
        # character: +500 MB for a 5M-character CJK text).
        cjk = _CJK.subn("", text)[1]
        other = non_ascii - cjk
    return (
        (x & masks.letter).bit_count(),
        (x & masks.upper).bit_count(),
        (starts & masks.letter).bit_count(),
        # A hump: the lowercase flag (bit 2) of the byte before, moved onto this byte's
        # uppercase flag (bit 1): 8 - 2 + 1 = 7 bits up.
        ((x << 7) & x & masks.upper).bit_count(),
        (starts & masks.digit).bit_count(),
        (starts & masks.punct).bit_count(),
        flags.count(_PUNCT_PAIR),
        (x & masks.break_).bit_count(),
        (spaces ^ (spaces & (spaces << 8))).bit_count(),  # ...and not on the byte before
        cjk,
        other,
    )


_SEPARATOR = "\n"
_BREAKS_AT = 7
"""``features``' index of the line breaks."""


def segments_features(texts: list[str]) -> tuple[int, ...]:
    """The counts of several segments, each counted on its own, summed.

    They are counted in one pass over the segments joined by a line break: a line break ends
    every run and starts none, so the only count it changes is the line breaks', by one per
    separator. (One pass instead of one per segment: most segments are short, and then the
    calls cost more than the bytes.)
    """
    if len(texts) == 1:
        return features(texts[0])
    counts = list(features(_SEPARATOR.join(texts)))
    counts[_BREAKS_AT] -= max(len(texts) - 1, 0)
    return tuple(counts)
