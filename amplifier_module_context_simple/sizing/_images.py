"""Image sizes and their token allowance, read from the first few KB of base64 data.

Sizes come from the PNG / JPEG / GIF / WebP header; they are priced with OpenAI's high-detail
tiles (o200k) or Anthropic's ``w*h/750`` (Claude). An image whose size cannot be read (a plain
URL, an unknown format) costs the family's maximum price.
"""

from __future__ import annotations

__all__ = ["image_from_url", "image_size", "image_tokens"]

import binascii
import math
import re
from collections.abc import Callable
from typing import Any


def _shrink(width: int, height: int, scale: float) -> tuple[int, int]:
    scale = min(1.0, scale)  # both providers only ever scale down
    return max(1, int(width * scale)), max(1, int(height * scale))


def _openai_image(width: int, height: int) -> int:
    """OpenAI high detail: fit 2048x2048, shortest side <= 768, then 85 + 170 per 512-px tile."""
    width, height = _shrink(width, height, 2048 / max(width, height))
    width, height = _shrink(width, height, 768 / min(width, height))
    return 85 + 170 * -(-width // 512) * -(-height // 512)


def _anthropic_image(width: int, height: int) -> int:
    """Anthropic: long edge <= 1568 px and area <= 1.15 MP, then w*h/750."""
    scale = min(1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    width, height = _shrink(width, height, scale)
    return max(1, round(width * height / 750))


_IMAGE_PRICE: dict[str, Callable[[int, int], int]] = {
    "o200k": _openai_image,
    "claude3": _anthropic_image,
    "claude47": _anthropic_image,
}
# An image of unknown size costs the most any image can cost in that family (a tall 768x2048
# tile grid for OpenAI, a full 1.15 MP square for Anthropic): an unreadable header is never cheap.
_UNKNOWN_IMAGE = {
    family: max(price(768, 2048), price(2048, 2048)) for family, price in _IMAGE_PRICE.items()
}


def image_tokens(size: tuple[int, int] | None, family: str) -> int:
    return _UNKNOWN_IMAGE[family] if size is None else _IMAGE_PRICE[family](*size)


_HEADER_BYTES = 4096  # PNG, GIF and WebP sizes sit in the first 30 bytes; JPEG seeks further
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_WHITESPACE = re.compile(r"\s")


def _b64_slice(data: str, start: int, size: int) -> bytes:
    """Decode bytes [start, start + size) of base64 ``data`` without decoding the rest."""
    group = start // 3  # every 3 decoded bytes are 4 base64 characters
    chunk = data[group * 4 : (start + size + 2) // 3 * 4]
    try:
        raw = binascii.a2b_base64(chunk + "=" * (-len(chunk) % 4))
    except (binascii.Error, ValueError):
        return b""
    offset = start - group * 3
    return raw[offset : offset + size]


def _jpeg_size(data: str, head: bytes) -> tuple[int, int]:
    pos = 2
    compact = False
    for _ in range(256):  # walk the segment chain up to the frame header, skipping EXIF etc.
        if pos + 9 > len(head) and not compact:
            # Past the decoded head, offsets count characters of the whole text: a line break
            # anywhere before them (``image_size`` only looked at the head's stretch) shifts them.
            compact = True
            if _WHITESPACE.search(data):
                data = "".join(data.split())
        seg = head[pos : pos + 9] if pos + 9 <= len(head) else _b64_slice(data, pos, 9)
        if len(seg) < 4 or seg[0] != 0xFF:
            break
        marker = seg[1]
        if marker in _SOF_MARKERS:
            if len(seg) < 9:
                break  # the data ends inside the frame header: part of a size is no size
            return int.from_bytes(seg[7:9], "big"), int.from_bytes(seg[5:7], "big")
        if marker in (0xD9, 0xDA):  # end of image or start of scan: no frame header
            break
        if marker == 0xFF:  # fill byte
            pos += 1
        elif marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            pos += 2
        else:
            pos += 2 + int.from_bytes(seg[2:4], "big")
    return 0, 0


def _webp_size(head: bytes) -> tuple[int, int]:
    chunk = head[12:16]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        return (
            int.from_bytes(head[26:28], "little") & 0x3FFF,
            int.from_bytes(head[28:30], "little") & 0x3FFF,
        )
    if chunk == b"VP8L" and head[20:21] == b"\x2f" and len(head) >= 25:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
    if chunk == b"VP8X" and len(head) >= 30:
        return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
    return 0, 0


def image_size(data: str) -> tuple[int, int] | None:
    """Pixel size from the header of base64 image data, or None when it cannot be read."""
    if _WHITESPACE.search(data, 0, _HEADER_BYTES * 2):
        data = "".join(data.split())  # line-wrapped base64: byte offsets need a compact string
    head = _b64_slice(data, 0, _HEADER_BYTES)
    width = height = 0
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    elif head[:6] in (b"GIF87a", b"GIF89a"):
        width, height = int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    elif head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        width, height = _webp_size(head)
    elif head[:2] == b"\xff\xd8":
        width, height = _jpeg_size(data, head)
    return (width, height) if width > 0 and height > 0 else None


def image_from_url(url: Any) -> tuple[int, int] | None:
    if isinstance(url, str) and url.startswith("data:"):
        return image_size(url.partition(",")[2])
    return None  # a remote URL: size unknown


# ---------------------------------------------------------------- message walk
