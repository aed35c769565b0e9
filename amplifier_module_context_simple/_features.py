"""The estimator's text model: the eleven character-class counts of one text segment.

Counted on the segment's UTF-8 bytes (lone surrogates as their three ``surrogatepass`` bytes),
in this order: letters, uppercase letters, words (letter runs), camel humps (a lowercase letter
followed by an uppercase one), digit runs, punctuation runs, punctuation pairs (``..``, counted
without overlap: a run of ``k`` gives ``k // 2``), line breaks, runs of two or more spaces, CJK
characters, other non-ASCII characters. Every byte that is not a letter, digit, space, line
break or byte >= 0x80 is punctuation.

How, and why this way: a whole-history estimate (the first request after a resume) reads every
byte of the history, so its cost is these counts. Each byte becomes two four-bit sets of flags
(two ``bytes.translate`` into hex digits, which ``binascii.a2b_hex`` packs two to a byte), each
set one big integer, and every count is then a few C-level integer operations over it: a run
starts where a flag is set and not on the byte before (``x ^ (x & (x >> 4))``: with the first
byte most significant, the byte before sits four bits higher), a count is ``(x &
mask).bit_count()``, and the punctuation pairs come from a carry (``_punct_pairs``). That is
about four times faster than counting two- and three-byte patterns with ``bytes.count``, which
scans the text once per pattern; four flags to a set halve the integers that eight flags to a
byte would need. ``tests/test_features.py`` checks the
counts against that direct formulation.
"""

from __future__ import annotations

__all__ = ["features", "segments_features"]

import binascii
import re

_LOWER = range(97, 123)
_UPPER = range(65, 91)
_BREAKS = b"\n\t\x0b\x0c"
_SPACES = b" \r"  # "\r\n" is one token, so "\r" counts as a space, not a second line break
# The letters set: letter, uppercase, lowercase, line break.
_LETTER, _UPPER_CASE, _LOWER_CASE, _BREAK = 1, 2, 4, 8
# The runs set: digit, punctuation, space (every byte not named here is punctuation).
_DIGIT, _PUNCT, _SPACE = 1, 2, 4


def _hex_table(default: int, *groups: tuple[bytes | range, int]) -> bytes:
    digits = b"0123456789abcdef"
    table = bytearray([digits[default]] * 256)
    for chars, flags in groups:
        for ch in chars:
            table[ch] = digits[flags]
    return bytes(table)


_LETTERS = _hex_table(
    0,
    (_LOWER, _LETTER | _LOWER_CASE),
    (_UPPER, _LETTER | _UPPER_CASE),
    (_BREAKS, _BREAK),
)
_RUNS = _hex_table(
    _PUNCT,
    (_LOWER, 0),
    (_UPPER, 0),
    (b"0123456789", _DIGIT),
    (_SPACES, _SPACE),
    (_BREAKS, 0),
    (range(128, 256), 0),
)
_CJK = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)


class _Masks:
    """One flag repeated in every four bits, for texts of up to ``size`` bytes (``x & mask``
    keeps that flag of every byte: an ``&`` is as long as its shorter operand, and the
    masks are periodic, so their low end fits any text)."""

    __slots__ = ("bytes", "eight", "fill", "four", "one", "size", "two", "two_even", "two_odd")

    def __init__(self, size: int) -> None:
        self.size = size
        self.bytes = (size + 1) // 2
        ones = int.from_bytes(b"\x11" * self.bytes, "big")
        self.one, self.two, self.four, self.eight = ones, ones * 2, ones * 4, ones * 8
        # For the punctuation pairs: _PUNCT of the even / odd fours (from the low end), and
        # every bit but _PUNCT set.
        self.two_even = int.from_bytes(b"\x02" * self.bytes, "big")
        self.two_odd = self.two_even << 4
        self.fill = int.from_bytes(b"\xdd" * self.bytes, "big")


_KEPT_MASK_BYTES = 1 << 20
"""Masks are kept for texts up to 1 MiB (seven masks of half that size: 3.5 MB); a longer text
builds its own for the one call, which costs about as much again as counting it."""
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
    masks = _masks_for(len(raw))
    letters_hex = raw.translate(_LETTERS)
    runs_hex = raw.translate(_RUNS)
    if len(raw) & 1:  # a2b_hex packs pairs of digits; a flagless last one changes no count
        letters_hex += b"0"
        runs_hex += b"0"
    # Byte i of the text is the i-th four bits from the top: the byte before is 4 bits higher.
    letters = int.from_bytes(binascii.a2b_hex(letters_hex), "big")
    runs = int.from_bytes(binascii.a2b_hex(runs_hex), "big")
    before = letters >> 4
    word_starts = letters ^ (letters & before)
    runs_before = runs >> 4
    run_starts = runs ^ (runs & runs_before)
    spaces = runs & runs_before & masks.four  # a space run reached its second byte here...
    pairs = _punct_pairs(runs, masks, len(runs_hex) // 2)
    cjk = other = 0
    if not text.isascii():
        # Every byte of a non-ASCII character (lone surrogates included) is >= 0x80.
        other = len(text) - len(text.encode("ascii", "ignore"))
        # subn counts matches without materialising them (findall built one string per
        # character: +500 MB for a 5M-character CJK text).
        cjk = _CJK.subn("", text)[1]
        other -= cjk
    return (
        (letters & masks.one).bit_count(),
        (letters & masks.two).bit_count(),
        (word_starts & masks.one).bit_count(),
        # A hump: the byte before's lowercase flag (4) moved onto this byte's uppercase (2).
        ((before >> 1) & letters & masks.two).bit_count(),
        (run_starts & masks.one).bit_count(),
        (run_starts & masks.two).bit_count(),
        pairs,
        (letters & masks.eight).bit_count(),
        (spaces ^ (spaces & (spaces >> 4))).bit_count(),  # ...and not on the byte before
        cjk,
        other,
    )


def _punct_pairs(runs: int, masks: _Masks, size: int) -> int:
    """Punctuation pairs without overlap: ``k // 2`` for a run of ``k``, counted from its end.

    A run ending on an even four (from the low end) pairs its odd fours and one ending on an
    odd four its even ones. The runs are told apart by a carry: with every other bit set, a
    bit added at a run's end carries through the whole run and clears its _PUNCT flags.
    """
    punct = runs & masks.two
    ends = punct ^ (punct & (punct << 4))  # the next byte (four bits lower) is not punctuation
    filled = runs | (masks.fill >> (8 * (masks.bytes - size)))  # ``size`` bytes, like ``runs``
    ending_odd = punct & (filled + (ends & masks.two_even))
    ending_even = punct ^ ending_odd
    # The two sets sit on different fours: one count for both.
    return ((ending_even & masks.two_odd) | (ending_odd & masks.two_even)).bit_count()


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
