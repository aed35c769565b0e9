"""Tests for the tool-result ingress cap (_ingress)."""

from __future__ import annotations

import copy
import json
import re
import sys
from typing import Any

import pytest
from amplifier_core.message_models import TextBlock as HostTextBlock
from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple.history._ingress import (
    INGRESS_MARKER_TEMPLATE,
    MIN_TOOL_RESULT_BYTES,
    IngressClip,
    clip_tool_result,
    clip_tool_results,
    ingress_marker,
    utf8_byte_length,
)

MARKER_RE = re.compile(
    r"\[tool-result truncated at ingress: original_text_utf8_bytes=(\d+); "
    r"retrieve missing content using narrower read/query parameters; "
    r"do not repeat state-changing actions just to recover output\.\]"
)
CAP = 1024


def tool(content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": content}


def nbytes(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


def split_marker(text: str) -> tuple[str, int]:
    """Return (prefix, N) for a clipped text that ends with exactly one marker."""
    matches = list(MARKER_RE.finditer(text))
    assert len(matches) == 1, text[-300:]
    m = matches[0]
    assert m.end() == len(text), "marker must come last"
    return text[: m.start()], int(m.group(1))


# --- the marker -------------------------------------------------------------------------


def test_marker_text_is_exact() -> None:
    assert ingress_marker(300000) == (
        "[tool-result truncated at ingress: original_text_utf8_bytes=300000; "
        "retrieve missing content using narrower read/query parameters; "
        "do not repeat state-changing actions just to recover output.]"
    )
    assert INGRESS_MARKER_TEMPLATE.format(original_text_utf8_bytes=7) == ingress_marker(7)


def test_min_bytes_holds_the_marker_for_any_realistic_size() -> None:
    assert len(ingress_marker(10**19 - 1)) == MIN_TOOL_RESULT_BYTES
    # No bytes object (so no encoded text) can be longer than sys.maxsize.
    assert len(ingress_marker(sys.maxsize)) <= MIN_TOOL_RESULT_BYTES
    assert len(ingress_marker(10**19)) == MIN_TOOL_RESULT_BYTES + 1


@pytest.mark.parametrize("bad", [0, 204, -1, True, 1024.0, "4096", None])
def test_bad_cap_is_rejected(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_tool_result_bytes"):
        clip_tool_result(tool("x"), bad)


def test_utf8_byte_length() -> None:
    assert utf8_byte_length("abc") == 3
    assert utf8_byte_length("é") == 2
    assert utf8_byte_length("中") == 3
    assert utf8_byte_length("😀") == 4
    assert utf8_byte_length("\ud800") == 1
    assert utf8_byte_length("a\udfffb") == 3


# --- strings ------------------------------------------------------------------------------


def test_ascii_is_clipped_to_exactly_the_cap() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(5000))
    msg = tool(text)
    out, clip = clip_tool_result(msg, CAP)
    assert clip is not None
    stored = out["content"]
    assert nbytes(stored) == CAP
    prefix, n = split_marker(stored)
    assert n == 5000
    assert text.startswith(prefix)
    assert clip == IngressClip(
        tool_name="read_file",
        tool_call_id="call_1",
        original_text_utf8_bytes=5000,
        stored_text_utf8_bytes=CAP,
        max_tool_result_bytes=CAP,
        content_kind="string",
    )


def test_exactly_at_cap_is_untouched() -> None:
    msg = tool("z" * CAP)
    out, clip = clip_tool_result(msg, CAP)
    assert out is msg and clip is None
    out, clip = clip_tool_result(tool("z" * (CAP + 1)), CAP)
    assert clip is not None and nbytes(out["content"]) == CAP


@pytest.mark.parametrize("unit", ["é", "中", "😀", "a中😀é"])
def test_multibyte_prefix_is_safe(unit: str) -> None:
    text = unit * 3000
    out, clip = clip_tool_result(tool(text), CAP)
    assert clip is not None
    stored = out["content"]
    stored_bytes = stored.encode("utf-8")  # strict: must be valid UTF-8
    assert len(stored_bytes) <= CAP
    assert len(stored_bytes) > CAP - 4  # at most a partial character is given up
    prefix, n = split_marker(stored)
    assert n == nbytes(text)
    assert text.startswith(prefix)
    assert clip.stored_text_utf8_bytes == len(stored_bytes)
    assert clip.original_text_utf8_bytes == n


def test_lone_surrogates_count_one_byte_and_prefix_is_valid_utf8() -> None:
    text = ("ab\ud800" * 1000) + "\udfff"
    assert utf8_byte_length(text) == 3001
    out, clip = clip_tool_result(tool(text), CAP)
    assert clip is not None
    stored = out["content"]
    assert len(stored.encode("utf-8")) == CAP  # strict encode would fail on a surrogate
    prefix, n = split_marker(stored)
    assert n == 3001
    assert text.encode("utf-8", "replace").decode().startswith(prefix)
    assert "\ud800" not in stored


def test_under_cap_surrogates_are_left_exactly_as_they_were() -> None:
    msg = tool("ok \ud800 fine")
    out, clip = clip_tool_result(msg, CAP)
    assert out is msg and clip is None
    assert out["content"] == "ok \ud800 fine"


def test_surrogate_accounting_decides_under_or_over() -> None:
    # 1024 code points, all lone surrogates: 1024 "replace" bytes, so under the cap,
    # although a surrogatepass encode would make it 3072 bytes.
    msg = tool("\udc80" * CAP)
    out, clip = clip_tool_result(msg, CAP)
    assert out is msg and clip is None


def test_non_tool_messages_are_never_touched() -> None:
    for role in ("user", "assistant", "system", "developer", None):
        msg = {"role": role, "content": "x" * 10_000}
        out, clip = clip_tool_result(msg, CAP)
        assert out is msg and clip is None


@pytest.mark.parametrize("content", [None, 42, 3.5, True])
def test_scalar_content_is_untouched(content: Any) -> None:
    msg = tool(content)
    out, clip = clip_tool_result(msg, CAP)
    assert out is msg and clip is None


def test_input_is_never_mutated_and_other_keys_survive() -> None:
    msg = tool("q" * 9000)
    msg["metadata"] = {"source": "test"}
    before = copy.deepcopy(msg)
    out, clip = clip_tool_result(msg, CAP)
    assert clip is not None
    assert msg == before
    assert out is not msg
    assert {k: v for k, v in out.items() if k != "content"} == {
        k: v for k, v in before.items() if k != "content"
    }


def test_payload_has_exact_keys_and_no_content() -> None:
    _, clip = clip_tool_result(tool("secret " * 1000), CAP)
    assert clip is not None
    payload = clip.payload()
    assert set(payload) == {
        "tool_name",
        "tool_call_id",
        "original_text_utf8_bytes",
        "stored_text_utf8_bytes",
        "max_tool_result_bytes",
        "content_kind",
    }
    assert payload == {
        "tool_name": "read_file",
        "tool_call_id": "call_1",
        "original_text_utf8_bytes": 7000,
        "stored_text_utf8_bytes": CAP,
        "max_tool_result_bytes": CAP,
        "content_kind": "string",
    }
    assert "secret" not in json.dumps(payload)


def test_payload_tolerates_missing_ids() -> None:
    msg = {"role": "tool", "content": "y" * 5000}
    _, clip = clip_tool_result(msg, CAP)
    assert clip is not None
    assert clip.payload()["tool_name"] is None
    assert clip.payload()["tool_call_id"] is None


# --- idempotence --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["a" * 5000, "中😀" * 2000, "x\ud800" * 3000])
def test_reclipping_is_a_no_op(text: str) -> None:
    once, clip = clip_tool_result(tool(text), CAP)
    assert clip is not None
    # Re-admission of the stored message (e.g. set_messages on resume) must not clip again.
    twice, clip2 = clip_tool_result(once, CAP)
    assert twice is once and clip2 is None
    # Nor does a fresh dict carrying the marker text.
    again, clip3 = clip_tool_result(copy.deepcopy(once), CAP)
    assert clip3 is None and again["content"] == once["content"]


def test_reclipping_blocks_is_a_no_op() -> None:
    blocks = [{"type": "text", "text": "p" * 3000}, {"type": "text", "text": "q" * 3000}]
    once, clip = clip_tool_result(tool(blocks), CAP)
    assert clip is not None
    twice, clip2 = clip_tool_result(once, CAP)
    assert twice is once and clip2 is None


# --- blocks -------------------------------------------------------------------------------


IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "A" * 9000},
}


def test_block_text_is_clipped_and_image_untouched() -> None:
    blocks = [{"type": "text", "text": "h" * 800}, IMAGE, {"type": "text", "text": "t" * 800}]
    msg = tool(blocks)
    before = copy.deepcopy(msg)
    out, clip = clip_tool_result(msg, CAP)
    assert clip is not None and clip.content_kind == "text_blocks"  # the reference's name
    assert msg == before
    new = out["content"]
    assert new[0] is blocks[0]  # kept whole and unchanged: same object
    assert new[1] is IMAGE
    assert len(new) == 3
    texts = [b["text"] for b in new if b.get("type") == "text"]
    joined = "".join(texts)
    assert len(MARKER_RE.findall(joined)) == 1
    assert texts[-1].endswith(ingress_marker(1600))
    assert sum(nbytes(t) for t in texts) == CAP == clip.stored_text_utf8_bytes
    assert clip.original_text_utf8_bytes == 1600


def test_text_after_the_cut_is_dropped_but_other_blocks_stay() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "B" * 5000, "format": "wav"}}
    unknown = {"type": "mystery", "payload": "c" * 5000}
    nested = {"type": "tool_result", "content": [{"type": "text", "text": "n" * 5000}]}
    blocks = [
        {"type": "text", "text": "1" * 2000},
        audio,
        {"type": "text", "text": "2" * 2000},
        unknown,
        nested,
    ]
    out, clip = clip_tool_result(tool(blocks), CAP)
    assert clip is not None
    new = out["content"]
    assert new[1:3] == [audio, unknown]
    assert new[1] is audio and new[2] is unknown
    # A nested result's text is the result's text too (issue 21 §2): measured, and past the
    # cut dropped like any other.
    assert new[3] == {"type": "tool_result", "content": []}
    prefix, n = split_marker(new[0]["text"])
    assert n == 9000
    assert prefix == "1" * (CAP - len(ingress_marker(9000)))


@pytest.mark.parametrize("between", [[], [""], ["", ""]], ids=["next", "empty", "two empty"])
def test_marker_goes_on_last_kept_text_when_budget_ends_at_boundary(between: list[str]) -> None:
    # Never on an empty text after it: that is past the cut, and dropped with the rest.
    marker_len = len(ingress_marker(CAP - len(ingress_marker(0)) + 500))
    first = "f" * (CAP - marker_len)
    blocks = [
        {"type": "text", "text": first},
        *({"type": "text", "text": text} for text in between),
        {"type": "text", "text": "s" * 500},
    ]
    original = len(first) + 500
    assert len(ingress_marker(original)) == marker_len
    out, clip = clip_tool_result(tool(blocks), CAP)
    assert clip is not None
    new = out["content"]
    assert len(new) == 1
    assert new[0]["text"] == first + ingress_marker(original)
    assert clip.stored_text_utf8_bytes == CAP


def test_block_lists_under_cap_and_without_text_are_untouched() -> None:
    small = tool([{"type": "text", "text": "hi"}, IMAGE])
    out, clip = clip_tool_result(small, CAP)
    assert out is small and clip is None
    only_image = tool([IMAGE, IMAGE])
    out, clip = clip_tool_result(only_image, CAP)
    assert out is only_image and clip is None


def test_typed_block_objects_are_not_read() -> None:
    class TextBlock:
        type = "text"

        def __init__(self, text: str) -> None:
            self.text = text

    typed = TextBlock("z" * 9000)
    msg = tool([typed])
    out, clip = clip_tool_result(msg, CAP)
    assert out is msg and clip is None


def test_block_surrogates_kept_whole_are_made_valid_when_clipping() -> None:
    blocks = [{"type": "text", "text": "a\ud800b"}, {"type": "text", "text": "c" * 5000}]
    out, clip = clip_tool_result(tool(blocks), CAP)
    assert clip is not None
    assert out["content"][0]["text"] == "a?b"
    for block in out["content"]:
        block["text"].encode("utf-8")
    assert clip.original_text_utf8_bytes == 5003


# --- JSON-serialised results ---------------------------------------------------------------


def test_tool_result_dict_over_cap_becomes_clipped_json_text() -> None:
    result = {"success": True, "output": "línea " * 1000, "error": None}
    msg = tool(result)
    before = copy.deepcopy(msg)
    out, clip = clip_tool_result(msg, CAP)
    assert clip is not None and clip.content_kind == "string"
    assert msg == before
    serialised = json.dumps(result, ensure_ascii=False)
    prefix, n = split_marker(out["content"])
    assert n == nbytes(serialised)
    assert serialised.startswith(prefix)
    assert prefix.startswith('{"success": true, "output": "línea')
    assert nbytes(out["content"]) <= CAP


def test_json_under_cap_is_left_as_data() -> None:
    msg = tool({"success": True, "output": "small"})
    out, clip = clip_tool_result(msg, CAP)
    assert out is msg and clip is None
    listy = tool([1, 2, {"k": "v"}])
    out, clip = clip_tool_result(listy, CAP)
    assert out is listy and clip is None


def test_plain_list_output_is_treated_as_json() -> None:
    rows = [{"path": f"/src/file_{i}.py", "size": i} for i in range(200)]
    out, clip = clip_tool_result(tool(rows), CAP)
    assert clip is not None and clip.content_kind == "string"
    assert isinstance(out["content"], str)
    assert nbytes(out["content"]) == CAP  # serialised JSON here is pure ASCII


def test_unserialisable_values_fall_back_to_str() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque" * 500

    out, clip = clip_tool_result(tool({"output": Opaque()}), CAP)
    assert clip is not None
    assert out["content"].startswith('{"output": "opaqueopaque')


# --- properties ----------------------------------------------------------------------------

# Arbitrary characters, plus 1-4 byte characters and lone surrogates (which st.characters
# does not produce here) drawn often enough to matter.
char_st = st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.sampled_from(["a", "é", "中", "😀", "\ud800", "\udfff"]),
)
# (st.lists rather than st.text: st.text drops surrogates from a mixed alphabet.)
chunk_st = st.lists(char_st, max_size=40).map("".join)
# Hypothesis keeps generated text short, so build long texts from a repeated chunk.


def _repeat(head: str, repeat: int, tail: str) -> str:
    return head * repeat + tail


text_st = st.builds(
    _repeat,
    chunk_st,
    st.integers(min_value=0, max_value=200),
    chunk_st,
)
cap_st = st.integers(min_value=MIN_TOOL_RESULT_BYTES, max_value=3000)


@settings(max_examples=300, deadline=None)
@given(text=text_st, cap=cap_st)
def test_string_properties(text: str, cap: int) -> None:
    msg = tool(text)
    out, clip = clip_tool_result(msg, cap)
    original = nbytes(text)
    if original <= cap:
        assert out is msg and clip is None
        assert out["content"] is text
        return
    assert clip is not None
    stored = out["content"]
    stored_bytes = stored.encode("utf-8")  # valid UTF-8
    assert len(stored_bytes) <= cap
    assert clip.stored_text_utf8_bytes == len(stored_bytes)
    prefix, n = split_marker(stored)
    assert n == original == clip.original_text_utf8_bytes
    assert text.encode("utf-8", "replace").decode().startswith(prefix)
    if text.isascii():
        assert len(stored_bytes) == cap
    # Idempotent on re-admission.
    again, clip2 = clip_tool_result(out, cap)
    assert again is out and clip2 is None


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _other_block(text: str) -> dict[str, Any]:
    return {"type": "other", "text": text}


block_st = st.one_of(
    st.builds(_text_block, text_st), st.just(IMAGE), st.builds(_other_block, text_st)
)


@settings(max_examples=200, deadline=None)
@given(blocks=st.lists(block_st, min_size=1, max_size=6), cap=cap_st)
def test_block_properties(blocks: list[dict[str, Any]], cap: int) -> None:
    msg = tool(blocks)
    before = copy.deepcopy(msg)
    out, clip = clip_tool_result(msg, cap)
    assert msg == before
    text_of = [b["text"] for b in blocks if b["type"] == "text"]
    original = sum(nbytes(t) for t in text_of)
    if original <= cap:
        assert out is msg and clip is None
        return
    assert clip is not None
    new = out["content"]
    new_texts = [b["text"] for b in new if b["type"] == "text"]
    joined = "".join(new_texts)
    assert sum(len(t.encode("utf-8")) for t in new_texts) == clip.stored_text_utf8_bytes
    assert clip.stored_text_utf8_bytes <= cap
    assert [int(n) for n in MARKER_RE.findall(joined)] == [original]
    assert new_texts[-1].endswith(ingress_marker(original))
    # Non-text blocks survive in order, unchanged.
    assert [b for b in new if b["type"] != "text"] == [b for b in blocks if b["type"] != "text"]


@settings(max_examples=100, deadline=None)
@given(
    unit=st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=20),
    repeat=st.integers(min_value=0, max_value=400),
    cap=cap_st,
)
def test_ascii_is_always_exactly_at_cap(unit: str, repeat: int, cap: int) -> None:
    text = unit * repeat
    out, clip = clip_tool_result(tool(text), cap)
    if len(text) <= cap:
        assert clip is None
    else:
        assert clip is not None and len(out["content"].encode("ascii")) == cap


def test_large_input_is_clipped_to_the_default_cap() -> None:
    default_cap = 131_072
    text = "中文 mixed text 😀\n" * 1_000_000  # ~24 MB of UTF-8
    out, clip = clip_tool_result(tool(text), default_cap)
    assert clip is not None
    assert clip.original_text_utf8_bytes == len(text.encode("utf-8"))
    assert default_cap - 4 < len(out["content"].encode("utf-8")) <= default_cap


# --- results in every shape pairing reads (issue 21 §2) ----------------------------------


def test_a_nested_result_keeps_its_images_and_is_clipped_in_its_text() -> None:
    nested = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [IMAGE, {"type": "text", "text": "n" * 5000}],
    }
    user = {"role": "user", "content": [nested, {"type": "text", "text": "typed " * 1000}]}
    out, clip = clip_tool_result(user, CAP)
    assert clip is not None and clip.content_kind == "text_blocks" and clip.tool_call_id == "t1"
    [image, text] = out["content"][0]["content"]
    assert image is IMAGE
    assert split_marker(text["text"])[1] == 5000
    # The person's text beside the results is not a result: never capped.
    assert out["content"][1] is user["content"][1]


def test_a_host_result_block_is_clipped_in_its_output() -> None:
    # The host's block reads ``output``; a stray ``content`` beside it is not the payload.
    block = {"type": "tool_result", "tool_call_id": "t1", "output": "o" * 5000, "content": "c"}
    out, clip = clip_tool_result({"role": "user", "content": [block]}, CAP)
    assert clip is not None
    assert out["content"][0]["content"] == "c"
    assert split_marker(out["content"][0]["output"])[1] == 5000


def test_a_result_block_in_a_tool_message_keeps_its_images() -> None:
    nested = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [IMAGE, {"type": "text", "text": "n" * 5000}],
    }
    out, clip = clip_tool_result(tool([nested]), CAP)
    assert clip is not None and clip.content_kind == "text_blocks"
    [image, text] = out["content"][0]["content"]
    assert image is IMAGE
    assert split_marker(text["text"])[1] == 5000


# --- which result a clip names, in every spelling -----------------------------------------


def test_a_tool_message_naming_its_call_by_tool_use_id_is_reported_by_it() -> None:
    message = {"role": "tool", "tool_use_id": "toolu_1", "name": "grep", "content": "g" * 5000}
    _, clips = clip_tool_results(message, CAP)
    assert [(c.tool_name, c.tool_call_id, c.max_tool_result_bytes) for c in clips] == [
        ("grep", "toolu_1", CAP)
    ]


@pytest.mark.parametrize("key", ["tool_call_id", "tool_use_id"])
def test_a_tool_message_without_an_id_is_reported_by_its_first_result_block(key: str) -> None:
    block = {"type": "tool_result", key: "t7", "content": "n" * 5000}
    _, clips = clip_tool_results({"role": "tool", "content": [block]}, CAP)
    assert [c.tool_call_id for c in clips] == ["t7"]


@pytest.mark.parametrize("key", ["tool_call_id", "tool_use_id"])
def test_every_result_block_of_a_user_message_is_clipped_on_its_own(key: str) -> None:
    blocks = [
        {"type": "text", "text": "Here is what the tools said."},
        {"type": "tool_result", key: "small", "content": "fits"},
        {"type": "tool_result", key: "big1", "content": "a" * 5000},
        {"type": "tool_result", key: "big2", "content": "b" * 6000},
    ]
    message = {"role": "user", "name": "runner", "content": blocks}
    out, clips = clip_tool_results(message, CAP)
    assert [(c.tool_name, c.tool_call_id, c.original_text_utf8_bytes) for c in clips] == [
        ("runner", "big1", 5000),
        ("runner", "big2", 6000),
    ]
    assert all(c.max_tool_result_bytes == CAP for c in clips)
    assert out["content"][:2] == blocks[:2]
    assert [split_marker(b["content"])[1] for b in out["content"][2:]] == [5000, 6000]


def test_a_result_block_in_an_assistant_message_is_no_result() -> None:
    # Only a user message carries results as blocks: pairing reads nothing else as one.
    block = {"type": "tool_result", "tool_use_id": "t1", "content": "z" * 5000}
    message = {"role": "assistant", "content": [block]}
    assert clip_tool_results(message, CAP) == (message, [])


def test_a_budget_of_one_byte_before_a_two_byte_character_keeps_none_of_it() -> None:
    # The first text leaves exactly one byte of the shared budget; the next starts with a
    # two-byte character, which cannot be cut in half.
    second = "é" * 3_000
    first = "a" * (CAP - len(ingress_marker(833 + 6_000)) - 1)
    assert len(first) == 833
    out, clip = clip_tool_result(
        tool([{"type": "text", "text": first}, {"type": "text", "text": second}]), CAP
    )
    assert clip is not None and clip.stored_text_utf8_bytes == CAP - 1
    assert out["content"][0]["text"] == first
    assert out["content"][1]["text"] == ingress_marker(833 + 6_000)


def test_a_name_or_id_that_is_no_text_is_reported_as_none() -> None:
    message = {"role": "tool", "tool_call_id": 7, "name": ["grep"], "content": "g" * 5000}
    _, clips = clip_tool_results(message, CAP)
    assert [(c.tool_name, c.tool_call_id) for c in clips] == [(None, None)]


class Untyped:
    """A typed block object with no ``type``: neither text nor anything the cap can read."""

    def model_dump(self) -> dict[str, Any]:
        return {"kind": "opaque"}


def test_a_typed_block_without_a_type_is_kept_whole_beside_clipped_text() -> None:
    opaque = Untyped()
    out, clip = clip_tool_result(tool([opaque, {"type": "text", "text": "t" * 5000}]), CAP)
    assert clip is not None
    assert out["content"][0] is opaque
    assert split_marker(out["content"][1]["text"])[1] == 5000


class TextWithout:
    """A typed text block whose text is missing, or is no string."""

    type = "text"

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def model_dump(self) -> dict[str, Any]:
        return {"type": "text", **self.__dict__}


def test_a_typed_text_block_without_text_is_kept_whole_beside_clipped_text() -> None:
    for odd in (TextWithout(), TextWithout(text=5)):
        out, clip = clip_tool_result(tool([odd, {"type": "text", "text": "t" * 5000}]), CAP)
        assert clip is not None
        assert out["content"][0] is odd
        assert split_marker(out["content"][1]["text"])[1] == 5000


@pytest.mark.parametrize("item", ["plain", 3, 2.5, None, ["x"], ("x",)], ids=repr)
def test_a_list_with_any_item_that_is_no_block_is_clipped_as_json(item: Any) -> None:
    # One item that is no block makes the whole list data: it is capped as its JSON text,
    # not walked as blocks (where the text block alone would be read and the item kept).
    out, clip = clip_tool_result(tool([{"type": "text", "text": "t" * 5000}, item]), CAP)
    assert clip is not None and clip.content_kind == "string"
    assert isinstance(out["content"], str) and nbytes(out["content"]) == CAP


def test_a_tool_message_without_an_id_is_reported_by_its_first_result_block_past_text() -> None:
    blocks = [
        {"type": "text", "text": "What the tool said:"},
        {"type": "tool_result", "tool_use_id": "t7", "content": "n" * 5000},
    ]
    _, clips = clip_tool_results({"role": "tool", "content": blocks}, CAP)
    assert [c.tool_call_id for c in clips] == ["t7"]


def test_a_result_payload_past_the_cut_is_left_empty() -> None:
    blocks = [
        {"type": "text", "text": "t" * 5000},
        {"type": "tool_result", "tool_use_id": "t1", "content": "past the cut"},
    ]
    out, clip = clip_tool_result(tool(blocks), CAP)
    assert clip is not None
    assert split_marker(out["content"][0]["text"])[1] == 5000 + len("past the cut")
    assert out["content"][1] == {"type": "tool_result", "tool_use_id": "t1", "content": ""}


def test_a_typed_text_item_before_the_cut_in_a_result_payload_is_the_same_object() -> None:
    kept = HostTextBlock(text="short and whole")
    payload: list[Any] = [kept, {"type": "text", "text": "x" * 5000}]
    block = {"type": "tool_result", "tool_use_id": "t1", "content": payload}
    out, clip = clip_tool_result(tool([block]), CAP)
    assert clip is not None
    stored = out["content"][0]["content"]
    assert stored[0] is kept
    assert split_marker(stored[1]["text"])[1] == len("short and whole") + 5000
