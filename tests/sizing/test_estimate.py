"""Per-message token estimator: what is counted, image headers and prices, robustness, accuracy."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple.sizing._estimate import (
    FAMILIES,
    REDACTED_THINKING_TOKENS,
    estimate_message_tokens,
    family_for_model,
)
from amplifier_module_context_simple.sizing._images import image_size
from amplifier_module_context_simple.sizing._price import float_price, text_price
from amplifier_module_context_simple.vocabulary._messages import MAX_DEPTH, TEXT_BLOCK_TYPES

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
FAMILIES_AND_NONE: tuple[str | None, ...] = (*FAMILIES, None)


# ---------------------------------------------------------------- hand-built image headers
def png(width: int, height: int, pad: int = 0) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    idat = zlib.compress(b"\0" * 64) + b"\0" * pad  # pad: a large body after the header
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def jpeg(width: int, height: int, exif_bytes: int = 0) -> bytes:
    def segment(marker: int, body: bytes) -> bytes:
        return bytes((0xFF, marker)) + struct.pack(">H", len(body) + 2) + body

    out = b"\xff\xd8" + segment(0xE0, b"JFIF\0\1\1\0\0\1\0\1\0\0")
    if exif_bytes:  # a big APP1 pushes the frame header past the first decoded kilobytes
        out += segment(0xE1, b"Exif\0\0" + b"\x5a" * exif_bytes)
    out += segment(0xDB, b"\0" + bytes(64))  # quantisation table
    frame = struct.pack(">BHHB", 8, height, width, 3) + bytes(9)  # progressive SOF2
    out += b"\xff" + segment(0xC2, frame)  # with a fill byte before the marker
    return out + segment(0xDA, b"\3" + bytes(9)) + b"\0" * 32 + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HHBBB", width, height, 0, 0, 0) + b";"


def webp_vp8(width: int, height: int) -> bytes:
    frame = b"\x10\x02\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + bytes(8)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(frame))
        + b"WEBPVP8 "
        + struct.pack("<I", len(frame))
        + frame
    )


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | (height - 1) << 14
    body = b"\x2f" + struct.pack("<I", bits) + bytes(8)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(body))
        + b"WEBPVP8L"
        + struct.pack("<I", len(body))
        + body
    )


def webp_vp8x(width: int, height: int) -> bytes:
    body = b"\x10\0\0\0" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(body))
        + b"WEBPVP8X"
        + struct.pack("<I", len(body))
        + body
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{b64(data)}"


def image_message(url: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}


@pytest.mark.parametrize(
    ("image", "size"),
    [
        (png(1298, 614), (1298, 614)),
        (png(1, 65535), (1, 65535)),
        (gif(320, 200), (320, 200)),
        (jpeg(1920, 1080), (1920, 1080)),
        (jpeg(640, 480, exif_bytes=20_000), (640, 480)),
        (webp_vp8(800, 600), (800, 600)),
        (webp_vp8l(1000, 16000), (1000, 16000)),
        (webp_vp8x(4000, 3000), (4000, 3000)),
    ],
    ids=["png", "png-tall", "gif", "jpeg", "jpeg-big-exif", "webp-vp8", "webp-vp8l", "webp-vp8x"],
)
def test_header_readers_find_the_pixel_size(image: bytes, size: tuple[int, int]) -> None:
    assert image_size(b64(image)) == size
    # MIME-style line-wrapped base64 is read the same way.
    assert image_size(base64.encodebytes(image).decode()) == size


@pytest.mark.parametrize("garbage", ["", "!!!!", b64(b"not an image at all"), b64(png(5, 5)[:20])])
def test_unreadable_headers_give_no_size(garbage: str) -> None:
    assert image_size(garbage) is None


# ---------------------------------------------------------------- image prices
# o200k: fit 2048x2048, shortest side <= 768, 85 + 170 per 512-px tile.
# claude: long edge <= 1568 and area <= 1.15 MP, then round(w*h/750).
@pytest.mark.parametrize(
    ("size", "o200k", "claude"),
    [
        ((1298, 614), 85 + 170 * 3 * 2, round(1298 * 614 / 750)),  # no resize for either
        ((60, 72), 85 + 170, round(60 * 72 / 750)),  # tiny: one tile, 6 tokens
        # 4000x3000 -> 2048x1536 -> 1024x768: 2x2 tiles; Anthropic scale sqrt(1.15e6/1.2e7)
        # gives 1238x928.
        ((4000, 3000), 85 + 170 * 4, round(1238 * 928 / 750)),
    ],
)
def test_image_price_per_family(size: tuple[int, int], o200k: int, claude: int) -> None:
    message = image_message(data_url(png(*size)))
    expected = {"o200k": o200k, "claude3": claude, "claude47": claude, None: max(o200k, claude)}
    for family, price in expected.items():
        assert estimate_message_tokens(message, family=family) == 4 + price


def test_base64_megabyte_png_costs_its_pixels_not_its_length() -> None:
    url = data_url(png(1298, 614, pad=1_000_000))
    assert len(url) > 1_300_000  # about 330k tokens if it were read as text
    message = image_message(url)
    assert estimate_message_tokens(message, family="o200k") == 4 + 1105
    assert estimate_message_tokens(message, family="claude3") == 4 + 1063
    anthropic = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    anthropic["source"]["data"] = b64(png(1298, 614, pad=1_000_000))
    assert estimate_message_tokens({"role": "user", "content": [anthropic]}, family="claude3") == (
        4 + 1063
    )


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAAAAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {"type": "image", "source": {"type": "base64", "data": "%%%% not base64"}},
        {"type": "image"},
    ],
)
def test_unreadable_image_costs_the_family_maximum(block: dict[str, Any]) -> None:
    message = {"role": "user", "content": [block]}
    # The largest each formula can produce: a 768x2048 tile grid, a 1.15 MP square.
    largest = {"o200k": 85 + 170 * 2 * 4, "claude3": 1532, "claude47": 1532, None: 1532}
    for family, price in largest.items():
        assert estimate_message_tokens(message, family=family) == 4 + price


# ---------------------------------------------------------------- what counts as text
def test_cjk_text_costs_about_a_token_per_character() -> None:
    text = "在資訊科技快速發展的今天開發及測試軟體的速度是不容忽視的課題" * 4
    message = {"role": "user", "content": text}
    for family in ("claude3", "claude47", None):
        assert estimate_message_tokens(message, family=family) - 4 >= len(text)
    # o200k merges common Han pairs: about 0.75 tokens per character on the corpus.
    assert estimate_message_tokens(message, family="o200k") - 4 >= 0.7 * len(text)


ARGS = {"command": "grep -rn 'def main' src/ | head -20", "timeout": 30, "flags": ["-x", "-y"]}


@pytest.mark.parametrize("family", FAMILIES_AND_NONE)
def test_dict_arguments_count_like_their_json_string(family: str | None) -> None:
    openai = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps(ARGS)},
            }
        ],
    }
    amplifier = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "tool": "bash", "arguments": ARGS}],
    }
    block = {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": "c1", "name": "bash", "input": ARGS}],
    }
    anthropic = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": ARGS}],
    }
    counts = {
        estimate_message_tokens(m, family=family) for m in (openai, amplifier, block, anthropic)
    }
    assert max(counts) - min(counts) <= 1
    assert min(counts) > 4 + 4 + 10  # message + call framing + a real argument payload
    # Arguments logged as compact JSON lose only the spaces after separators.
    compact = json.loads(json.dumps(openai))
    compact["tool_calls"][0]["function"]["arguments"] = json.dumps(ARGS, separators=(",", ":"))
    assert 0.8 * max(counts) <= estimate_message_tokens(compact, family=family) <= max(counts)


def test_call_stored_both_in_tool_calls_and_as_block_is_counted_once() -> None:
    calls = [{"id": "c1", "tool": "bash", "arguments": ARGS}]
    block = {"type": "tool_call", "id": "c1", "name": "bash", "input": ARGS}
    alone = estimate_message_tokens({"role": "assistant", "tool_calls": calls}, family="o200k")
    both = {"role": "assistant", "tool_calls": calls, "content": [block]}
    assert estimate_message_tokens(both, family="o200k") == alone


def test_metadata_ids_and_signatures_are_not_counted() -> None:
    base = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Check the file first.", "signature": "s"},
            {"type": "text", "text": "Reading it now."},
        ],
        "tool_calls": [{"id": "c1", "tool": "read", "arguments": {"path": "a.py"}}],
    }
    noisy = json.loads(json.dumps(base))
    noisy["metadata"] = {"source": "x" * 200_000, "nested": [{"k": "v" * 1000}] * 50}
    noisy["id"] = "msg_" + "z" * 5000
    noisy["timestamp"] = "2026-01-01T00:00:00Z"
    noisy["content"][0]["signature"] = "EqQB" * 10_000
    noisy["tool_calls"][0]["id"] = "call_" + "q" * 5000
    noisy["tool_call_id"] = "toolu_" + "w" * 5000
    for family in FAMILIES_AND_NONE:
        assert estimate_message_tokens(noisy, family=family) == estimate_message_tokens(
            base, family=family
        )


def test_a_thinking_block_is_read_for_its_thought_alone() -> None:
    # The providers send a thought and its signature; any other field of the block is the
    # host's own, and never reaches them. Alone, or beside a block only the general walk
    # reads.
    thought = {"type": "thinking", "thinking": "Check the file first.", "signature": "s"}
    extra = {**thought, "note": "kept by the host " * 200}
    for family in FAMILIES_AND_NONE:
        for beside in ([], [{"type": "annotation", "text": "see the log"}]):
            counts = {
                estimate_message_tokens(
                    {"role": "assistant", "content": [block, *beside]}, family=family
                )
                for block in (thought, extra)
            }
            assert len(counts) == 1


def test_redacted_thinking_costs_a_flat_amount_per_block() -> None:
    # Its data is opaque state, whatever its length; each block adds the same amount.
    def cost(*data: str) -> int:
        blocks = [{"type": "redacted_thinking", "data": d} for d in data]
        return estimate_message_tokens(
            {"role": "assistant", "content": [*blocks, {"type": "text", "text": "Done."}]}
        )

    assert cost("abc") == cost("EqQB" * 5_000)
    assert cost("a", "b") - cost("a") == REDACTED_THINKING_TOKENS
    assert cost("a") - cost() == REDACTED_THINKING_TOKENS


def test_a_reasoning_block_is_read_for_its_summary_and_content_alone() -> None:
    # OpenAI's reasoning items: the summary and the reasoning text are read; the encrypted
    # state is opaque, and a field of the host's own never reaches the provider.
    summary = "Weighed two fixes; the smaller one is safer."
    content = "First the parser, then the printer, which shares its tables."
    reasoning = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}],
        "content": [{"type": "reasoning_text", "text": content}],
        "encrypted_content": "gAAAAB" * 2_000,
        "note": "kept by the host " * 200,
    }
    as_text = [{"type": "text", "text": summary}, {"type": "text", "text": content}]
    for family in FAMILIES_AND_NONE:
        costs = {
            estimate_message_tokens({"role": "assistant", "content": blocks}, family=family)
            for blocks in ([reasoning], as_text)
        }
        assert len(costs) == 1


def test_tool_results_in_every_shape_are_counted() -> None:
    body = "line one of the output\nline two: 42 files changed\n" * 20
    plain = estimate_message_tokens({"role": "tool", "tool_call_id": "t", "content": body})
    anthropic = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": body}]}
        ],
    }
    amplifier = {
        "role": "tool",
        "content": [{"type": "tool_result", "tool_call_id": "t", "output": body}],
    }
    assert estimate_message_tokens(anthropic) == plain
    assert estimate_message_tokens(amplifier) == plain
    assert plain > 200


def test_typed_blocks_count_like_their_dicts() -> None:
    message_models = pytest.importorskip("amplifier_core.message_models")
    blocks = [
        message_models.ThinkingBlock(
            thinking="Plan: list files, then read main.py.", signature="sig"
        ),
        message_models.TextBlock(text="Listing the repository now."),
        message_models.ToolCallBlock(id="c1", name="bash", input={"command": "ls -la"}),
        message_models.RedactedThinkingBlock(data="opaque" * 100),
    ]
    typed = {"role": "assistant", "content": blocks}
    plain = {"role": "assistant", "content": [b.model_dump() for b in blocks]}
    for family in FAMILIES_AND_NONE:
        assert estimate_message_tokens(typed, family=family) == estimate_message_tokens(
            plain, family=family
        )
    whole = message_models.Message(role="user", content="Hello there, general Kenobi.")
    assert estimate_message_tokens(whole) == estimate_message_tokens(whole.model_dump())


def test_mappings_that_are_not_dicts_count_like_dicts() -> None:
    # Dicts take a fast path past the Mapping check; any other mapping must count the same.
    call = {"id": "c1", "function": {"name": "bash", "arguments": {"command": "ls -la"}}}
    plain: dict[str, Any] = {
        "role": "assistant",
        "tool_calls": [call],
        "content": [
            {"type": "text", "text": "Listing the repository now."},
            {"type": "tool_result", "tool_call_id": "c0", "output": {"rows": [1, 2, 3]}},
        ],
    }
    frozen = MappingProxyType(
        {
            **plain,
            "tool_calls": [
                MappingProxyType({**call, "function": MappingProxyType(call["function"])})
            ],
            "content": [MappingProxyType(block) for block in plain["content"]],
        }
    )
    for family in FAMILIES_AND_NONE:
        assert estimate_message_tokens(frozen, family=family) == estimate_message_tokens(
            plain, family=family
        )


def test_unknown_family_is_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="gpt4"):
        estimate_message_tokens({"role": "user", "content": "hi"}, family="gpt4")


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o", "o200k"),
        ("gpt-4o-mini-2024-07-18", "o200k"),
        ("gpt-4.1", "o200k"),
        ("gpt-5.1-codex", "o200k"),
        ("o3-mini", "o200k"),
        ("openai/o4-mini", "o200k"),
        ("gpt-4-turbo", None),
        ("gpt-3.5-turbo", None),
        ("llama-3.1-70b", None),
        (None, None),
        ("claude-3-5-haiku", "claude3"),
        ("claude-3-opus-20240229", "claude3"),
        ("anthropic/claude-3.7-sonnet", "claude3"),
        ("claude-opus-4-20250514", "claude3"),  # 4.0: the date is not a minor version
        ("claude-opus-4-1-20250805", "claude3"),
        ("claude-sonnet-4-5-20250929", "claude3"),
        ("claude-opus-4-6", "claude3"),
        ("claude-opus-4-7", "claude47"),
        ("us.anthropic.claude-opus-4-7-v1:0", "claude47"),
        ("claude-opus-4-8", "claude47"),
        ("claude-4-7-sonnet", "claude47"),  # the version first, as the 3.x names have it
        ("claude-4.6-haiku", "claude3"),
        ("claude-sonnet-5", "claude47"),
        ("claude-next", "claude47"),  # a Claude of unreadable version: the family counting more
    ],
)
def test_family_for_model(model: str | None, family: str | None) -> None:
    assert family_for_model(model) == family


# ---------------------------------------------------------------- properties
_IMAGE_URLS = st.builds(
    lambda w, h, kind: data_url(kind(w, h)),
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.sampled_from([png, gif, jpeg, webp_vp8x]),
)
_PART = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text()),
    st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, _IMAGE_URLS),
)
_CALL = st.builds(
    lambda name, args: {
        "id": "c",
        "type": "function",
        "function": {"name": name, "arguments": args},
    },
    st.text(max_size=20),
    st.text(),
)
MESSAGES = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(st.none(), st.text(), st.lists(_PART, max_size=4)),
    },
    optional={"tool_calls": st.lists(_CALL, max_size=3), "reasoning_content": st.text()},
)


@settings(max_examples=150, deadline=None)
@given(MESSAGES)
def test_conservative_mode_never_counts_less_than_any_family(message: dict[str, Any]) -> None:
    conservative = estimate_message_tokens(message)
    for family in FAMILIES:
        assert conservative >= estimate_message_tokens(message, family=family)


_KEYS = st.sampled_from(
    ["type", "text", "content", "tool_calls", "function", "name", "arguments", "input", "id",
     "image_url", "url", "source", "data", "thinking", "summary", "output", "tool", "role"]
)  # fmt: skip
_ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**5000, max_value=10**5001),  # too long for str()
    st.floats(),
    st.text(),
    st.binary(max_size=20),
    st.sampled_from(
        ["text", "image", "image_url", "tool_call", "tool_use", "tool_result", "thinking",
         "redacted_thinking", "reasoning", "data:image/png;base64,iVBORw0KGgo", "data:,",
         "data:image/jpeg;base64,/9j/4AAQ", "\ud800 lone surrogate"]
    ),
)  # fmt: skip
GARBAGE = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(_KEYS, st.text(max_size=5)), inner, max_size=6),
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(GARBAGE, st.sampled_from(FAMILIES_AND_NONE))
def test_never_raises_on_hostile_shapes(value: Any, family: str | None) -> None:
    for message in (
        value,
        {"role": "user", "content": value},
        {"role": "assistant", "tool_calls": value},
    ):
        count = estimate_message_tokens(message, family=family)
        assert isinstance(count, int)
        assert count >= 0


@pytest.mark.parametrize("wrap", [lambda v: [v], lambda v: {"k": v}], ids=["lists", "dicts"])
def test_deep_nesting_does_not_overflow(wrap: Any) -> None:
    deep: Any = "word " * 2_000
    for _ in range(5000):
        deep = wrap(deep)
    # Walked without recursion past the hostile depth, and its text still counts in full.
    flat = estimate_message_tokens({"role": "user", "content": "word " * 2_000})
    assert estimate_message_tokens({"role": "user", "content": [deep]}) >= flat
    cyclic: list[Any] = ["text"]
    cyclic.append(cyclic)
    assert (
        estimate_message_tokens({"role": "assistant", "tool_calls": [{"arguments": cyclic}]}) >= 8
    )


# ---------------------------------------------------------------- the lean walk, exact prices
# A dict message of the common shapes takes a lean walk; any other mapping the general one,
# which reads a dict and a read-only view of it the same way. So the two must agree on every
# message: the shapes the lean walk accepts and those it hands on.
class _Str(str):
    """A str subclass: the general walk reads it as a string wherever it checks isinstance."""


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=30),
    st.sampled_from(["", "x", "Hello, World... 42"]),
    st.integers(-5, 10**12),
    st.floats(allow_nan=False),
    st.builds(_Str, st.text(max_size=10)),
    st.lists(st.text(max_size=5), max_size=2),
    st.builds(lambda t: {"text": t}, st.text(max_size=5)),
)
_IDS = st.one_of(
    st.sampled_from(["c1", "c2", ""]),
    st.none(),
    st.integers(0, 2),
    st.builds(_Str, st.just("c2")),
    st.just(["c1"]),  # unhashable: never looked up in a set
)
_ARGUMENTS = st.one_of(
    _VALUES,
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(st.integers(), st.text(max_size=10), st.none(), st.lists(st.integers())),
        max_size=3,
    ),
    st.just({(1, 2): "a tuple key: no JSON text"}),
    st.just({"set": {1, 2}, "nested": {"deep": [1, "two"]}}),  # a set: JSON falls back to str
    st.just(float("nan")),
)
_FUNCTION_KEYS = {"name": _VALUES, "arguments": _ARGUMENTS, "input": _ARGUMENTS}
_CALLS = st.fixed_dictionaries(
    {},
    optional={
        "id": _IDS,
        "type": st.just("function"),
        "function": st.one_of(
            st.none(), st.fixed_dictionaries({}, optional=_FUNCTION_KEYS), st.text(max_size=3)
        ),
        "tool": _VALUES,
        **_FUNCTION_KEYS,
    },
)
_BLOCKS = st.one_of(
    st.builds(lambda kind, text: {"type": kind, "text": text},
              st.sampled_from(sorted(TEXT_BLOCK_TYPES)), _VALUES),
    st.builds(lambda text: {"type": "thinking", "thinking": text, "signature": "sig"}, _VALUES),
    st.builds(lambda kind, call_id, args: {"type": kind, "id": call_id, "name": "bash",
                                            "input": args},
              st.sampled_from(["tool_call", "tool_use", "function_call"]), _IDS, _ARGUMENTS),
    st.builds(lambda body: {"type": "tool_result", "tool_use_id": "c1", "content": body}, _VALUES),
    st.builds(lambda text: {"type": "redacted_thinking", "data": text}, st.text(max_size=5)),
    st.builds(lambda url: {"type": "image_url", "image_url": {"url": url}}, _IMAGE_URLS),
    st.builds(lambda kind: {"type": kind, "text": "typeless"},
              st.one_of(st.none(), st.integers(0, 2), st.just(["a list"]))),
    _VALUES,
)  # fmt: skip
COMMON_AND_ODD_MESSAGES = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"])},
    optional={
        "content": st.one_of(_VALUES, st.lists(_BLOCKS, max_size=5), st.tuples(_BLOCKS)),
        "tool_calls": st.one_of(
            st.lists(_CALLS, max_size=3), st.tuples(_CALLS), st.none(), st.text(max_size=2)
        ),
        "function_call": st.one_of(st.none(), _CALLS, st.text(max_size=2)),
        "reasoning_content": _VALUES,
        "reasoning": _VALUES,
        "thinking": _VALUES,
    },
)


@settings(max_examples=1500, deadline=None)
@given(COMMON_AND_ODD_MESSAGES)
def test_the_lean_walk_counts_what_the_general_walk_counts(message: dict[str, Any]) -> None:
    general = MappingProxyType(message)
    for family in FAMILIES_AND_NONE:
        assert estimate_message_tokens(message, family=family) == estimate_message_tokens(
            general, family=family
        )


_TEXT = st.one_of(
    st.text(max_size=30), st.sampled_from(["", "x"]), st.builds(_Str, st.text(max_size=5))
)
_NAME = st.one_of(st.none(), _TEXT)
_LEAN_ARGUMENTS = st.one_of(
    st.none(),
    _TEXT,
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), _TEXT), max_size=3),
    st.lists(st.integers(), max_size=2),
    st.just({(1, 2): "a tuple key: no JSON text"}),
)


@st.composite
def lean_messages(draw: st.DrawFn) -> dict[str, Any]:
    """Messages of the shapes the lean walk reads (and a few it hands on: a call block of an id
    no ``tool_calls`` entry has, a call whose arguments have no JSON text)."""
    calls = []
    for call_id in draw(st.lists(st.one_of(_IDS, st.builds(_Str, st.just("c1"))), max_size=3)):
        spec = draw(
            st.fixed_dictionaries(
                {}, optional={"name": _NAME, "arguments": _LEAN_ARGUMENTS, "input": _LEAN_ARGUMENTS}
            )
        )
        if draw(st.booleans()):
            call = {"id": call_id, "type": "function", "function": spec}
            if draw(st.booleans()):
                call["tool"] = draw(_NAME)
        else:
            call = {"id": call_id, "tool": draw(_NAME), **spec}
        calls.append(call)
    blocks = st.one_of(
        st.builds(
            lambda kind, text: {"type": kind, "text": text},
            st.sampled_from(sorted(TEXT_BLOCK_TYPES)),
            _NAME,
        ),
        st.builds(lambda text: {"type": "thinking", "thinking": text, "signature": "s"}, _NAME),
        st.builds(
            lambda kind, call_id: {"type": kind, "id": call_id, "input": {"a": 1}},
            st.sampled_from(["tool_call", "tool_use", "function_call"]),
            _IDS,
        ),
        _NAME,
    )
    message: dict[str, Any] = {
        "role": "assistant",
        "content": draw(st.one_of(_NAME, st.lists(blocks, max_size=4))),
    }
    if calls or draw(st.booleans()):
        message["tool_calls"] = calls
    for key in draw(st.lists(st.sampled_from(["reasoning_content", "reasoning", "thinking"]))):
        message[key] = draw(st.one_of(_NAME, st.integers()))
    return message  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(lean_messages())
def test_the_lean_walk_reads_its_shapes_as_the_general_walk(message: dict[str, Any]) -> None:
    general = MappingProxyType(message)
    for family in FAMILIES_AND_NONE:
        assert estimate_message_tokens(message, family=family) == estimate_message_tokens(
            general, family=family
        )


def test_the_lean_walk_reads_a_session_as_the_general_walk() -> None:
    from amplifier_module_context_simple.replay.recordings.example_session import (
        generate_session,
    )

    for message in generate_session(400, seed=3):
        assert estimate_message_tokens(message) == estimate_message_tokens(
            MappingProxyType(message)
        )


def test_the_lean_walk_takes_the_common_shapes() -> None:
    from amplifier_module_context_simple.sizing import _estimate

    calls = [
        {"id": "c1", "tool": "bash", "arguments": {"command": "ls"}},
        {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}},
    ]
    common: list[dict[str, Any]] = [
        {"role": "user", "content": "Hi."},
        {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": "a\nb"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "assistant", "content": "", "reasoning_content": "Hm.", "tool_calls": calls},
        {
            "role": "assistant",
            "tool_calls": calls,
            "content": [
                {"type": "thinking", "thinking": "Plan.", "signature": "s"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_call", "id": "c1", "name": "bash", "input": {"command": "ls"}},
            ],
        },
    ]
    for message in common:
        assert _estimate._lean(message) is not None, message  # pyright: ignore[reportPrivateUsage]


_COUNTS = st.tuples(*[st.integers(0, 2_000)] * 11) | st.tuples(*[st.integers(0, 10**12)] * 11)


@settings(max_examples=2000, deadline=None)
@given(_COUNTS, st.sampled_from([FAMILIES, *((family,) for family in FAMILIES)]))
def test_exact_prices_are_the_float_prices(counts: tuple[int, ...], families: Any) -> None:
    assert text_price(counts, families) == max(float_price(counts, name) for name in families)


def test_an_exact_integer_price_is_rounded_as_the_float_sum_rounds_it() -> None:
    # 0.81 * 300 is 243 exactly but 243.00000000000003 as floats: the price is 244, as ever.
    for k, count in ((7, 300), (8, 180), (7, 100), (0, 1000), (2, 50), (6, 0)):
        counts = tuple(count if i == k else 0 for i in range(11))
        for families in (FAMILIES, *((family,) for family in FAMILIES)):
            assert text_price(counts, families) == max(float_price(counts, f) for f in families)
    assert text_price((0,) * 7 + (300,) + (0,) * 3, ("claude47",)) == 244
    # Past 2**49 weight units the floats lose the thousandths: 0.039 * 913269621787359 is
    # 35617515249707.001 exactly, but the float product rounds down to an integer.
    huge = (913269621787359,) + (0,) * 10
    assert text_price(huge, ("o200k",)) == float_price(huge, "o200k") == 35617515249707


_JSON_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
        st.builds(object), st.builds(_Str, st.text(max_size=3)), st.dates(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.integers(), st.floats(), st.booleans(), st.none()),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(_JSON_VALUES)
def test_arguments_read_as_their_json_text(value: Any) -> None:
    from amplifier_module_context_simple.sizing import _estimate

    if isinstance(value, str):
        return  # a string argument is its own text
    expected = json.dumps(value, ensure_ascii=False, default=str)
    assert _estimate._arguments_json()(value) == expected  # pyright: ignore[reportPrivateUsage]


# ---------------------------------------------------------------- accuracy on the shared corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason="token-count corpus not available")
@pytest.mark.parametrize("family", FAMILIES)
def test_every_corpus_transcript_within_ten_percent(family: str) -> None:
    reference = json.loads((CORPUS / "reference_counts.json").read_text(encoding="utf-8"))["files"]
    ratios = {}
    for path in sorted(CORPUS.glob("*.jsonl")):
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        rows = reference[path.name]
        estimated = sum(estimate_message_tokens(json.loads(ln), family=family) for ln in lines)
        ratios[path.stem] = estimated / sum(row[family] for row in rows)
    assert ratios
    outside = {name: round(r, 3) for name, r in ratios.items() if not 0.9 <= r <= 1.1}
    assert not outside, f"{family}: transcripts outside [0.9, 1.1]: {outside}"


def _user(content: Any) -> int:
    return estimate_message_tokens({"role": "user", "content": content})


class Typed:
    """A typed object (a model with ``model_dump``) that dumps to ``fields``, not a dict."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def model_dump(self) -> dict[str, Any]:
        return dict(self.fields)


@pytest.mark.parametrize(
    ("wrap", "deepest"),
    [
        (lambda v: [v], MAX_DEPTH - 2),
        (lambda v: {"type": "x-note", "v": v}, MAX_DEPTH - 2),
        # A typed block: its dump is a level of its own, the block inside it another.
        (lambda v: Typed(type="x-note", v=v), (MAX_DEPTH - 2) // 2),
    ],
    ids=["lists", "blocks", "typed blocks"],
)
def test_structure_is_read_to_the_hostile_depth_and_only_its_text_beyond(
    wrap: Any, deepest: int
) -> None:
    # A number is priced where the structure is read; past MAX_DEPTH levels only the strings
    # are (walked without recursion), so the same number costs nothing there.
    def nested(value: Any, levels: int) -> list[Any]:
        for _ in range(levels):
            value = wrap(value)
        return [value]

    def number_cost(levels: int) -> int:
        return _user(nested(["x", 2**300], levels)) - _user(nested(["x"], levels))

    assert number_cost(deepest) == (2**300).bit_length() // 10 + 1
    assert number_cost(deepest + 1) == 0


def test_numbers_cost_a_token_per_ten_bits_and_flags_nothing() -> None:
    numbers = [0, 7, 2**40, 10**29, -(2**100)]
    each = [n.bit_length() // 10 + 1 for n in numbers]
    assert each == [1, 1, 5, 10, 11]
    note = {"type": "x-note", "text": "the counts"}
    assert _user([{**note, "n": numbers}]) - _user([note]) == sum(each)
    assert _user([{**note, "flags": [True, False] * 10, "none": None}]) == _user([note])


def test_a_float_costs_what_its_digits_cost_as_text() -> None:
    for value in (3.14159265358979, 1e-300, 2.5):
        as_number = _user([{"type": "x-note", "v": value}])
        assert as_number == _user([{"type": "x-note", "v": repr(value)}])
        assert as_number > _user([{"type": "x-note"}])


@pytest.mark.parametrize(
    "spelling",
    [
        lambda url: {"type": "image_url", "image_url": {"url": url}},
        lambda url: {"type": "image_url", "image_url": url},
        lambda url: {"type": "image", "url": url},
        lambda url: {"type": "image", "source": {"type": "url", "url": url}},
    ],
    ids=["image_url object", "image_url string", "url", "source url"],
)
def test_an_image_is_priced_by_its_size_in_every_url_spelling(spelling: Any) -> None:
    # A small image costs less than one whose size cannot be read (the family's maximum).
    small = estimate_message_tokens({"role": "user", "content": [spelling(data_url(png(16, 16)))]})
    unknown = estimate_message_tokens(
        {"role": "user", "content": [spelling("https://example.com/cat.png")]}
    )
    assert small < unknown
    as_image_url = estimate_message_tokens(image_message(data_url(png(16, 16))))
    assert small == as_image_url


def test_a_typed_call_costs_what_the_same_call_as_a_dict_costs() -> None:
    call = {"id": "c1", "tool": "read_file", "arguments": {"path": "src/" + "deep/" * 50}}
    as_dict = estimate_message_tokens({"role": "assistant", "content": "", "tool_calls": [call]})
    typed = estimate_message_tokens(
        {"role": "assistant", "content": "", "tool_calls": [Typed(**call)]}
    )
    assert typed == as_dict
    assert typed > estimate_message_tokens({"role": "assistant", "content": ""})


def test_arguments_that_are_no_json_are_walked_and_their_text_counted() -> None:
    cyclic: dict[str, Any] = {"note": "word " * 1_000}
    cyclic["self"] = cyclic
    call = {"id": "c1", "tool": "write", "arguments": cyclic}
    text = estimate_message_tokens({"role": "user", "content": "word " * 1_000})
    assert estimate_message_tokens({"role": "assistant", "tool_calls": [call]}) >= text
    # The same as a call block of the content (one no ``tool_calls`` entry repeats).
    block = {"type": "tool_use", "id": "c1", "name": "write", "input": cyclic}
    assert estimate_message_tokens({"role": "assistant", "content": [block]}) >= text


def test_an_image_url_in_a_block_of_unknown_type_is_priced_as_an_image() -> None:
    url = data_url(png(16, 16)) + "A" * 40_000  # its size is read from the header
    in_unknown = {"role": "user", "content": [{"type": "screenshot", "src": url}]}
    assert estimate_message_tokens(in_unknown) == estimate_message_tokens(image_message(url))
    as_text = estimate_message_tokens({"role": "user", "content": url})
    assert estimate_message_tokens(in_unknown) < as_text // 10


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning", "thinking"])
def test_reasoning_beside_the_content_costs_the_same_whatever_the_content(key: str) -> None:
    # Plain text is read by the lean walk; a number, a result and an image by the general one.
    reasoning = "The user wants the parser refactored; first read the grammar file. " * 5
    result = {"type": "tool_result", "tool_use_id": "x", "content": "r"}
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    costs = set()
    for content in ["plain", 7, [result], [image]]:
        message = {"role": "assistant", "content": content}
        with_reasoning = estimate_message_tokens({**message, key: reasoning})
        costs.add(with_reasoning - estimate_message_tokens(message))
    assert len(costs) == 1
    assert costs.pop() > 50


def test_a_legacy_function_call_costs_what_the_same_call_in_tool_calls_costs() -> None:
    arguments = json.dumps({"city": "Paris", "units": "metric"})
    legacy = {"role": "assistant", "content": None,
              "function_call": {"name": "get_weather", "arguments": arguments}}  # fmt: skip
    listed = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": arguments}}]}  # fmt: skip
    assert estimate_message_tokens(legacy) == estimate_message_tokens(listed)
    assert estimate_message_tokens(legacy) > estimate_message_tokens({"role": "assistant"})
    typed = {**legacy, "function_call": Typed(**legacy["function_call"])}
    assert estimate_message_tokens(typed) == estimate_message_tokens(legacy)
    # Arguments that are no JSON (a list holding itself) are walked, as deep in either form.
    circular: list[Any] = ["word"]
    circular.append(circular)
    walked = {"name": "get_weather", "arguments": circular}
    assert estimate_message_tokens({**legacy, "function_call": walked}) == (
        estimate_message_tokens({**listed, "tool_calls": [{"id": "c1", "function": walked}]})
    )
    # Neither a mapping nor a typed call: nothing to count, and nothing raised.
    assert estimate_message_tokens({**legacy, "function_call": "auto"}) == (
        estimate_message_tokens({"role": "assistant", "content": None})
    )


def test_text_after_a_call_block_that_repeats_a_listed_call_is_counted() -> None:
    call = {"id": "c1", "tool": "read_file", "arguments": {"path": "a.py"}}
    block = {"type": "tool_call", "id": "c1", "name": "read_file", "input": {"path": "a.py"}}
    text = {"type": "text", "text": "Reading the module first. " * 20}
    before = {"role": "assistant", "content": [text, block], "tool_calls": [call]}
    after = {"role": "assistant", "content": [block, text], "tool_calls": [call]}
    assert estimate_message_tokens(after) == estimate_message_tokens(before)


def test_a_message_that_is_no_mapping_is_counted_as_its_content() -> None:
    text = "a message handed over as a bare string " * 30
    assert estimate_message_tokens(text) == estimate_message_tokens({"content": text})  # type: ignore[arg-type]
