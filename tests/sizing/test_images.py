"""Image headers and prices at their edges: where each reader stops, what it skips, which
bytes it trusts, and the price formulas where a pixel or a tile changes the figure.

``test_estimate.py`` reads one well-formed header of each format and prices three sizes; these
tests walk the JPEG segment chain over every kind of segment a frame header can follow, put the
frame header on both sides of the first decoded block, and feed the readers headers that only
look like an image.
"""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.sizing._images import image_size

from .test_estimate import b64, data_url, image_message, png, webp_vp8, webp_vp8l, webp_vp8x

# Start-of-frame markers carry the size; C4 (Huffman tables), C8 (reserved) and CC (arithmetic
# coding conditioning) share the range but are ordinary segments.
FRAME_MARKERS = [m for m in range(0xC0, 0xD0) if m not in (0xC4, 0xC8, 0xCC)]
# Markers that stand alone, with no length after them: TEM, the restart markers and SOI.
BARE_MARKERS = [0x01, *range(0xD0, 0xD9)]


def segment(marker: int, body: bytes) -> bytes:
    return bytes((0xFF, marker)) + struct.pack(">H", len(body) + 2) + body


def frame(marker: int, width: int, height: int) -> bytes:
    return segment(marker, struct.pack(">BHHB", 8, height, width, 3) + bytes(9))


def jpeg_with(before: list[bytes], width: int, height: int, marker: int = 0xC0) -> bytes:
    """A JPEG whose frame header follows the ``before`` pieces (segments, bare markers, fill)."""
    body = b"".join(before) + frame(marker, width, height)
    return b"\xff\xd8" + body + segment(0xDA, b"\3" + bytes(9)) + b"\0" * 16 + b"\xff\xd9"


PIECES = st.one_of(
    st.just(b"\xff"),  # a fill byte before the next marker
    st.sampled_from(BARE_MARKERS).map(lambda m: bytes((0xFF, m))),
    st.builds(
        segment,
        st.sampled_from([0xE0, 0xE1, 0xE2, 0xDB, 0xC4, 0xDD, 0xFE]),
        st.integers(0, 6_000).map(lambda n: b"\x5a" * n),
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(PIECES, max_size=12),
    width=st.integers(1, 65_535),
    height=st.integers(1, 65_535),
    marker=st.sampled_from(FRAME_MARKERS),
)
def test_the_jpeg_walk_reaches_the_frame_header_past_every_kind_of_segment(
    before: list[bytes], width: int, height: int, marker: int
) -> None:
    assert image_size(b64(jpeg_with(before, width, height, marker))) == (width, height)


@pytest.mark.parametrize("offset", range(4_080, 4_100))
def test_a_frame_header_across_the_first_decoded_block_is_read_whole(offset: int) -> None:
    # The header reader decodes the first 4096 bytes at once and slices further on demand; a
    # frame header starting anywhere near that edge is read from the right bytes.
    app_body = offset - 2 - 4  # SOI, then the APP1 marker and length, then its body
    image = jpeg_with([segment(0xE1, b"\x5a" * app_body)], 1_234, 567)
    assert image.index(b"\xff\xc0") == offset
    assert image_size(b64(image)) == (1_234, 567)


@pytest.mark.parametrize(
    "end",
    [
        b"\xff\xd9",
        b"\xff\xd9\x00\x02",  # what would read as a length after it leads to the frame header
        segment(0xDA, b"\3" + bytes(9)),
    ],
    ids=["end-of-image", "end-of-image-then-bytes", "start-of-scan"],
)
def test_a_jpeg_that_ends_or_starts_its_scan_before_any_frame_header_has_no_size(
    end: bytes,
) -> None:
    # Whatever follows the end of the image or the compressed scan is not a segment chain.
    image = b"\xff\xd8" + end + frame(0xC0, 640, 480)
    assert image_size(b64(image)) is None


@pytest.mark.parametrize("cut", range(1, 7))
def test_a_frame_header_cut_short_has_no_size(cut: int) -> None:
    # The data ends inside the frame header's size fields (in base64 with or without its
    # padding, which decodes to the bytes that are there and no more): a width read from one
    # byte of two would price a 640-pixel image as a 2-pixel one.
    image = b"\xff\xd8" + frame(0xC0, 640, 480)[: 2 + cut]
    assert image_size(b64(image)) is None
    assert image_size(b64(image).rstrip("=")) is None
    whole = b"\xff\xd8" + frame(0xC0, 640, 480)[:9]
    assert image_size(b64(whole).rstrip("=")) == (640, 480)


def test_the_jpeg_walk_gives_up_after_256_segments() -> None:
    # A bound on the walk: a chain of 255 segments before the frame header is read, one of
    # 256 is not (an unreadable header costs the most an image can cost, never less).
    bare = bytes((0xFF, 0xD0))
    assert image_size(b64(jpeg_with([bare] * 255, 800, 600))) == (800, 600)
    assert image_size(b64(jpeg_with([bare] * 256, 800, 600))) is None


def test_webp_headers_that_only_look_like_one_have_no_size() -> None:
    lossy = bytearray(webp_vp8(800, 600))
    lossy[23:26] = b"\0\0\0"  # no VP8 start code
    assert image_size(b64(bytes(lossy))) is None
    lossy[20] = 0x2F  # and the byte a lossless header starts with, in the lossy chunk
    assert image_size(b64(bytes(lossy))) is None
    unknown = bytearray(webp_vp8x(800, 600))
    unknown[12:16] = b"ALPH"  # a chunk that carries no size, 30 bytes long
    assert len(unknown) >= 30 and image_size(b64(bytes(unknown))) is None


def test_webp_sizes_are_read_from_their_own_bytes_only() -> None:
    # A lossless header cut right after its size bits is read; an extended header followed by
    # the image's next chunk reads its 24-bit sizes without the bytes after them.
    assert image_size(b64(webp_vp8l(300, 200)[:25])) == (300, 200)
    extended = webp_vp8x(4_000, 3_000) + b"ICCP" + struct.pack("<I", 4) + b"\xff" * 4
    assert image_size(b64(extended)) == (4_000, 3_000)


@pytest.mark.parametrize("exif", [1_000, 4_500, 9_000])
def test_a_line_wrapped_header_far_into_the_data_is_read(exif: int) -> None:
    # Line-wrapped data is compacted before any offset is computed, whether the frame header
    # lies inside the first decoded block, past it in a short text or far into a long one.
    image = jpeg_with([segment(0xE1, b"\x5a" * exif)], 321, 123)
    assert image_size(base64.encodebytes(image).decode()) == (321, 123)
    assert image_size("\n" + b64(image)) == (321, 123), "a line break first, and no other"
    # A single stray line break past the stretch the header reader looks at, before a frame
    # header that lies further on, shifts nothing either.
    data = b64(image)
    stray = data[:10_000] + "\n" + data[10_000:]
    assert image_size(stray) == (321, 123)


def test_sizes_use_every_byte_of_their_fields() -> None:
    # PNG sizes are 32-bit: a side past 16,777,215 pixels needs the field's first byte.
    assert image_size(b64(png(2**24 + 5, 3))) == (2**24 + 5, 3)
    assert image_size(b64(png(3, 2**24 + 5))) == (3, 2**24 + 5)
    # Both GIF versions carry the same header; the byte after the size is no part of it.
    for version in (b"GIF87a", b"GIF89a"):
        header = version + struct.pack("<HHBBB", 320, 200, 0xF7, 0, 0)  # a colour table flag
        assert image_size(b64(header)) == (320, 200)
    assert image_size(b64(png(640, 1))) == (640, 1)


def test_headers_with_a_side_of_zero_or_another_container_have_no_size() -> None:
    assert image_size(b64(png(0, 480))) is None
    assert image_size(b64(png(640, 0))) is None
    assert image_size(b64(b"RIFX" + webp_vp8(800, 600)[4:])) is None, "RIFF, not RIFX"


def test_a_png_needs_both_its_signature_and_its_header_chunk() -> None:
    image = bytearray(png(640, 480))
    unsigned = bytes(image[:1]) + b"X" + bytes(image[2:])
    assert image_size(b64(unsigned)) is None
    image[12:16] = b"IDAT"
    assert image_size(b64(bytes(image))) is None


# ---------------------------------------------------------------- prices at their edges
# OpenAI high detail: fit in 2048x2048, then the short side to 768, then 85 + 170 per 512-px
# tile. Anthropic: the long edge to 1568 and the area to 1.15 MP, then round(w * h / 750).
@pytest.mark.parametrize(
    ("size", "price"),
    [
        ((1_024, 1_024), 85 + 170 * 4),  # OpenAI's own worked example: 765
        ((2_048, 4_096), 85 + 170 * 6),  # and its other one: 1024x2048, then 768x1536: 1105
        ((512, 512), 85 + 170),  # exactly one tile
        ((513, 512), 85 + 170 * 2),  # one pixel more: two
        ((512, 513), 85 + 170 * 2),
        ((1_025, 700), 85 + 170 * 3 * 2),  # three tiles across, not two
        ((700, 1_025), 85 + 170 * 2 * 3),
        ((4_096, 1_000), 85 + 170 * 4),  # 2048x500: the fit comes first, no short-side step
        ((8_192, 1_000), 85 + 170 * 4),  # 2048x250: four tiles, not five
    ],
)
def test_openai_tiles_at_their_edges(size: tuple[int, int], price: int) -> None:
    message = image_message(data_url(png(*size)))
    assert estimate_message_tokens(message, family="o200k") == 4 + price


@pytest.mark.parametrize(
    ("size", "price"),
    [
        ((3_000, 100), round(1_568 * 52 / 750)),  # the long edge binds: 1568x52
        ((3_136, 1_000), round(1_568 * 500 / 750)),  # scale one half exactly: 1568x500
        ((1_152, 1_000), round(1_150 * 999 / 750)),  # the area binds: sqrt(1324800) < 1151
        ((1, 4_000), round(1 * 1_568 / 750)),  # a side scaled below one pixel stays one
        ((4_000, 1), round(1_568 * 1 / 750)),
        ((1, 1), 1),  # the smallest image costs one token, not zero
    ],
)
def test_anthropic_sizes_at_their_edges(size: tuple[int, int], price: int) -> None:
    message = image_message(data_url(png(*size)))
    assert estimate_message_tokens(message, family="claude3") == 4 + price
