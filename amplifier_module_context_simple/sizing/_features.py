"""The estimator's text model: the eleven character-class counts of one text segment.

Counted on the segment's UTF-8 bytes (lone surrogates as their three ``surrogatepass`` bytes),
in this order: letters, uppercase letters, words (letter runs), camel humps (a lowercase letter
followed by an uppercase one), digit runs, punctuation runs, punctuation pairs (``..``, counted
without overlap: a run of ``k`` gives ``k // 2``), line breaks, runs of two or more spaces, CJK
characters, other non-ASCII characters. Every byte that is not a letter, digit, space, line
break or byte >= 0x80 is punctuation.

How, and why this way: a whole-history estimate (the first request after a resume) reads every
byte of the history, so its cost is these counts. One ``bytes.translate`` turns each byte into a
hex digit of four flags (``_CODES``: letter, punctuation, digit, space; an uppercase letter sets
letter and space, a line break or a byte >= 0x80 none), ``binascii.a2b_hex`` packs the digits
two to a byte and ``int.from_bytes`` makes them one big integer. Every count is then a few
C-level integer operations over it. With the first byte most significant, the byte after sits
four bits lower, so ``x ^ (x & (x << 4))`` marks where a run ends (a flag set here and not on
the next byte) and runs are counted by their ends; a count is ``(x & mask).bit_count()``; the
line breaks are what the flags' total leaves over; the punctuation pairs come from a carry that
runs from a run's end through the run. That is about four times faster than counting two- and
three-byte patterns with ``bytes.count``, which scans the text once per pattern, and one integer
of four flags a byte costs a fifth less than the two (letters, runs) it replaced, whose
translate, packing and conversion were half the work. A long text is counted in pieces cut after
a line break (which ends every run and starts none, so the pieces' counts add up), so that the
integers of a piece stay in the processor's cache. ``tests/sizing/test_features.py`` checks the
counts against the direct formulation.
"""

from __future__ import annotations

__all__ = ["features", "segments_counts", "segments_features"]

import binascii
import re

# One hex digit of flags per byte. An uppercase letter is LETTER | SPACE (a space is never a
# letter): spaces are the SPACE flag without LETTER, uppercase letters the two together.
_LETTER, _PUNCT, _DIGIT, _SPACE = 1, 2, 4, 8
_UPPER = _LETTER | _SPACE
_BREAKS = b"\n\t\x0b\x0c"
_SPACES = b" \r"  # "\r\n" is one token, so "\r" counts as a space, not a second line break


def _hex_table(default: int, *groups: tuple[bytes | range, int]) -> bytes:
    digits = b"0123456789abcdef"
    table = bytearray([digits[default]] * 256)
    for chars, flags in groups:
        for ch in chars:
            table[ch] = digits[flags]
    return bytes(table)


_CODES = _hex_table(
    _PUNCT,  # every byte not named here is punctuation
    (range(97, 123), _LETTER),
    (range(65, 91), _UPPER),
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

    __slots__ = ("bytes", "fill", "four", "one", "size", "two", "two_even", "two_odd")

    def __init__(self, size: int) -> None:
        self.size = size
        self.bytes = (size + 1) // 2
        self.one = int.from_bytes(b"\x11" * self.bytes, "big")
        self.two, self.four = self.one * 2, self.one * 4
        # For the punctuation pairs: _PUNCT of the even / odd fours (from the low end), and
        # every bit but _PUNCT set.
        self.two_even = int.from_bytes(b"\x02" * self.bytes, "big")
        self.two_odd = self.two_even << 4
        self.fill = int.from_bytes(b"\xdd" * self.bytes, "big")


_PIECE = 1 << 16
"""Texts longer than this are counted a piece of about this size at a time (cut after a line
break): 64 KB of text makes integers of 32 KB, and the dozen that a piece needs at once stay in
the cache; a 2 MB text counted whole costs 1.7 times as much per byte."""
_KEPT_MASK_BYTES = 1 << 20
"""Masks are kept for texts (pieces: a piece without a line break is as long as its line) up
to 1 MiB (six masks of half that size: 3 MB); a longer one builds its own for the one call,
which costs about as much again as counting it."""
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


def _ascii_counts(raw: bytes) -> list[int]:
    """The first nine counts of ``raw``, with the flags' total where the line breaks go
    (``_counts`` turns it into them)."""
    size = len(raw)
    masks = _masks  # one read: another thread may replace it meanwhile
    if size > masks.size:
        masks = _masks_for(size)
    codes = raw.translate(_CODES)
    if size & 1:  # a2b_hex packs pairs of digits; a flagless last one changes no count
        codes += b"0"
    x = int.from_bytes(binascii.a2b_hex(codes), "big")
    one = masks.one
    two = masks.two
    # With the first byte most significant, the byte after sits four bits lower: ``<< 4``
    # puts the next byte's flags on this byte's four bits. Runs are counted by their ends.
    ends = x ^ (x & (x << 4))  # a flag set here and not on the byte after: a run ends
    letters = x & one
    space_bit = (x >> 3) & one  # _SPACE moved onto _LETTER's bit: spaces and uppercase letters
    upper = space_bit & x
    spaces = space_bit ^ upper
    spaces &= spaces << 4  # this byte and the next are spaces...
    # Punctuation pairs without overlap, ``k // 2`` for a run of ``k``, counted from its end: a
    # run ending on an even four (from the low end) pairs its odd fours, and one ending on an
    # odd four its even ones. A carry tells the runs apart: with every other bit set, a bit
    # added at a run's end carries through the whole run and clears its _PUNCT flags.
    punct = x & two
    filled = x | (masks.fill >> (8 * (masks.bytes - len(codes) // 2)))  # as long as ``x``
    ending_odd = punct & (filled + (ends & masks.two_even))
    return [
        letters.bit_count(),
        upper.bit_count(),
        (ends & one).bit_count(),
        # A hump: a letter that is not uppercase before an uppercase one.
        ((letters ^ upper) & (upper << 4)).bit_count(),
        (ends & masks.four).bit_count(),
        (ends & two).bit_count(),
        # Runs ending on an even four count their odd fours (the punctuation there that is not
        # in ``ending_odd``), runs ending on an odd four their even ones.
        (ending_odd ^ (x & masks.two_odd)).bit_count(),
        x.bit_count(),  # every flag: each byte's but a line break's, an uppercase letter's twice
        (spaces ^ (spaces & (spaces << 4))).bit_count(),  # ...and the next two are not
    ]


_BREAKS_AT = 7
"""``features``' index of the line breaks."""
_UPPER_AT = 1


def features(text: str) -> tuple[int, ...]:
    """The character-class counts of ``text``, in the module docstring's order."""
    return tuple(_counts(text))


def _counts(text: str) -> list[int]:
    raw = text.encode("utf-8", "surrogatepass")
    size = len(raw)
    if size <= _PIECE:
        counts = _ascii_counts(raw)
    else:
        counts = [0] * 9
        start = 0
        while start < size:
            cut = raw.find(b"\n", start + _PIECE - 1) + 1 or size  # after a line break
            for i, count in enumerate(_ascii_counts(raw[start:cut])):
                counts[i] += count
            start = cut
    high = cjk = other = 0
    if not text.isascii():
        ascii_chars = len(text.encode("ascii", "ignore"))
        # Every byte of a non-ASCII character (lone surrogates included) is >= 0x80.
        high = size - ascii_chars
        other = len(text) - ascii_chars
        # subn counts matches without materialising them (findall built one string per
        # character: +500 MB for a 5M-character CJK text).
        cjk = _CJK.subn("", text)[1]
        other -= cjk
    # Bytes without a flag are line breaks and bytes >= 0x80; the flags' total counts every
    # other byte once and an uppercase letter twice.
    counts[_BREAKS_AT] = size - high - counts[_BREAKS_AT] + counts[_UPPER_AT]
    counts.append(cjk)
    counts.append(other)
    return counts


_SEPARATOR = "\n"


def segments_features(texts: list[str]) -> tuple[int, ...]:
    """The counts of several segments, each counted on its own, summed."""
    return tuple(segments_counts(texts))


def segments_counts(texts: list[str]) -> list[int]:
    """``segments_features`` as a list (the estimator's form).

    The segments are counted in one pass over them joined by a line break: a line break ends
    every run and starts none, so the only count it changes is the line breaks', by one per
    separator. (One pass instead of one per segment: most segments are short, and then the
    calls cost more than the bytes.)
    """
    if len(texts) == 1:
        return _counts(texts[0])
    counts = _counts(_SEPARATOR.join(texts))
    if len(texts) > 1:
        counts[_BREAKS_AT] -= len(texts) - 1
    return counts
