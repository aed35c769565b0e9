"""The estimator's character-class counts (``_features``) against their direct formulation.

``_features`` counts with big-integer bit operations because a whole-history estimate (the
first request after a resume) is bound by them. What it must count is stated here the plain
way, one ``bytes.translate`` per class and ``bytes.count`` per pattern, which is how the
estimator counted before; the two must agree on every text, so no estimate moves.
"""

from __future__ import annotations

from unittest.mock import patch

from hypothesis import example, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple.sizing import _features
from amplifier_module_context_simple.sizing._features import features, segments_features


def _table(default: bytes, *groups: tuple[bytes, bytes]) -> bytes:
    out = bytearray(default * 256)
    for chars, cls in groups:
        for ch in chars:
            out[ch] = cls[0]
    return bytes(out)


_LOWER = bytes(range(97, 123))
_UPPER = bytes(range(65, 91))
_DIGITS = b"0123456789"
_HIGH = bytes(range(128, 256))
_SPACES = b" \r"
_BREAKS = b"\n\t\x0b\x0c"
_CLASSES = _table(
    b".", (_LOWER, b"a"), (_UPPER, b"A"), (_DIGITS, b"0"), (_SPACES, b" "), (_BREAKS, b"\n"),
    (_HIGH, b"u"),
)  # fmt: skip
_LETTERS_ONLY = _table(b" ", (_LOWER + _UPPER, b"a"))
_DIGITS_ONLY = _table(b" ", (_DIGITS, b"0"))
_PUNCT_ONLY = _table(b".", (_LOWER + _UPPER + _DIGITS + _HIGH + _SPACES + _BREAKS, b" "))
_SPACES_ONLY = _table(b"x", (_SPACES, b" "))


def direct(text: str) -> tuple[int, ...]:
    """The counts the plain way: a run starts at each separator-then-member (or at the start)."""
    raw = text.encode("utf-8", "surrogatepass")
    classes = raw.translate(_CLASSES)
    letters = raw.translate(_LETTERS_ONLY)
    punct = raw.translate(_PUNCT_ONLY)
    digits = raw.translate(_DIGITS_ONLY)
    spaces = raw.translate(_SPACES_ONLY)
    cjk = other = 0
    if not text.isascii():
        non_ascii = len(text) - len(raw) + classes.count(b"u")
        cjk = _features._CJK.subn("", text)[1]  # pyright: ignore[reportPrivateUsage]
        other = non_ascii - cjk
    return (
        len(raw) - letters.count(b" "),
        classes.count(b"A"),
        letters.count(b" a") + letters.startswith(b"a"),
        classes.count(b"aA"),
        digits.count(b" 0") + digits.startswith(b"0"),
        punct.count(b" .") + punct.startswith(b"."),
        punct.count(b".."),  # without overlap: a run of k gives k // 2
        classes.count(b"\n"),
        spaces.count(b"x  ") + spaces.startswith(b"  "),
        cjk,
        other,
    )


# Every class, and the boundaries between them: runs, pairs, "\r\n", surrogates, CJK.
_ALPHABET = "aAzZmQ09 5.,;:!?-_()\n\t\r\x0b\x0c\x7f\x00éü中文한글ぁ\ud800\udfff😀"
# Runs of every length of a few classes, so long space and punctuation runs are common.
_RUNS = st.lists(st.sampled_from([" ", "\r", ".", "a", "B", "7", "\n", "中"]), max_size=12).map(
    lambda chars: "".join(c * (1 + i % 5) for i, c in enumerate(chars))
)
TEXTS = st.text(alphabet=_ALPHABET, max_size=200) | st.text(max_size=80) | _RUNS


@settings(max_examples=1500, deadline=None)
@given(TEXTS)
@example("a   b \r\r\r\r  .....x")
@example("aBcD\n\n..;;--  \t12a3")
def test_features_count_what_the_direct_formulation_counts(text: str) -> None:
    assert features(text) == direct(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(TEXTS, max_size=6))
def test_segments_are_counted_each_on_its_own(texts: list[str]) -> None:
    summed = tuple(sum(column) for column in zip(*map(direct, texts), strict=True))
    assert segments_features(texts) == (summed or (0,) * 11)


def test_texts_longer_than_the_kept_masks_count_the_same() -> None:
    # Past 4 KB the kept masks grow; past 1 MiB a text builds masks of its own.
    unit = "Hello, wORLD... 42   x\n\t-- 中文 é!\r\n" * 7
    for repeats in (1, 20, 600, 5_000):
        text = unit * repeats
        assert features(text) == direct(text)
    huge = unit * 40_000  # > 1 MiB of UTF-8
    assert len(huge.encode()) > 1 << 20
    assert features(huge) == direct(huge)


def test_the_end_bytes_of_a_text_just_past_the_kept_masks_are_counted() -> None:
    # A mask shorter than the text would drop the bytes at one end from every count.
    for extra in (1, 3, 8):
        kept = _features._masks.size  # pyright: ignore[reportPrivateUsage]
        text = "Qa9 \n" + "." * (kept - 9) + "aB\n1 " + "Zz9\n\n  ..."[:extra]
        assert features(text) == direct(text)


@settings(max_examples=500, deadline=None)
@given(TEXTS, st.integers(min_value=1, max_value=24))
def test_a_text_counted_in_pieces_counts_what_it_counts_whole(text: str, piece: int) -> None:
    # A long text is cut after line breaks into pieces counted on their own; with tiny pieces
    # every generated text is cut wherever it has a line break.
    with patch.object(_features, "_PIECE", piece):
        assert features(text) == direct(text)


def test_long_lines_and_cuts_at_every_offset_count_the_same() -> None:
    piece = _features._PIECE  # pyright: ignore[reportPrivateUsage]
    line = "Hello, wORLD... 42   x\t-- 中文 é!\r" * (2 * piece // 30)  # longer than a piece
    for text in (line, line + "\n" + line, "ab\n" * piece, "..\n..  " * (piece // 3)):
        assert features(text) == direct(text)
    # A line of more than 1 MiB is one piece, past the kept masks: it builds masks of its own.
    kept = _features._KEPT_MASK_BYTES  # pyright: ignore[reportPrivateUsage]
    long_line = "Hello, wORLD... 42   x\t-- é!\r" * (kept // 30 + 3)
    assert len(long_line.encode()) > kept
    assert features(long_line) == direct(long_line)
    for offset in range(-3, 4):  # a line break just before, at and after the piece size
        text = "A." * ((piece + offset) // 2) + "\n" + "  b.." * 10
        assert features(text) == direct(text)


def test_the_class_table_gives_each_byte_the_hex_digit_of_its_flags() -> None:
    # Built once at import (``_CODES``); built again here, so that a change to the builder
    # shows in a test run and not only in the table the module already holds.
    build = _features._hex_table  # pyright: ignore[reportPrivateUsage]
    table = build(2, (b"ab", 1), (range(48, 50), 4), (b"\n", 0), (b"Z", 15))
    assert len(table) == 256
    named = {ord("a"): b"1", ord("b"): b"1", 48: b"4", 49: b"4", 10: b"0", ord("Z"): b"f"}
    assert all(table[byte : byte + 1] == named.get(byte, b"2") for byte in range(256))
