"""Where a request first differs from the one before, and why: the rules of a cache break.

A provider serves from its cache the longest prefix a request shares with an earlier one
(Anthropic: tools, then system, then messages). :func:`first_difference` finds where that
shared prefix ends, ignoring ``cache_control`` keys (the markers move to the newest block by
design) and reading string content as the one text block it is to the provider, and names the
cause (``CAUSES``):

* ``tools changed`` / ``system changed``: the part before every message differs;
* ``tail injection moved``: what differs in the previous request was an ephemeral injection (a
  whole injected message, or text appended inside a block) that is gone or moved;
* ``compaction``: the caller says a compaction happened, or the new request carries the
  compaction notice or a truncation / stub marker at or after the difference;
* ``edit``: anything else.

``None`` means the previous request is a prefix of this one. Any other answer is a cache
break. A :class:`PayloadDigest` of a request holds what the comparison needs (a fingerprint per
tool, system block, message and block, with ``cache_control`` stripped, plus the injection map
and the running token estimate). The pieces it is made of (a message's fingerprints, its
injection cuts, its compaction mark, the head's estimate) are public too: ``cache_reuse``'s
tracker applies the same rules to one message at a time, only where two requests differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import estimate_message_tokens
from ...views._render import STUB_TEMPLATE, TRUNCATION_MARKER
from ..payloads.payload_match import (
    INJECTION_TAG,
    Alignment,
    MessageMatch,
    TranscriptIndex,
    align,
    block_text,
    content_blocks,
    payload_parts,
)

__all__ = [
    "CAUSES",
    "CAUSE_MEANINGS",
    "COMPACTION",
    "EDIT",
    "INJECTION_MOVED",
    "SYSTEM_CHANGED",
    "TOOLS_CHANGED",
    "BlockPrint",
    "Difference",
    "MessagePrint",
    "PayloadDigest",
    "difference_at",
    "digest",
    "first_difference",
    "first_index",
    "head_tokens",
    "injection_cuts",
    "injection_map",
    "is_marked",
    "message_print",
    "message_tokens",
    "part_prints",
]

COMPACTION = "compaction"
INJECTION_MOVED = "tail injection moved"
EDIT = "edit"
SYSTEM_CHANGED = "system changed"
TOOLS_CHANGED = "tools changed"
CAUSES = (INJECTION_MOVED, COMPACTION, EDIT, SYSTEM_CHANGED, TOOLS_CHANGED)
CAUSE_MEANINGS = {
    INJECTION_MOVED: "text injected at the end of the previous request (a hook's reminder) is "
    "gone or moved, so the provider reads everything after it again",
    COMPACTION: "a compaction changed what the view sends at or after that point",
    EDIT: "a message already sent changed",
    SYSTEM_CHANGED: "the system prompt changed, so nothing after it could be read",
    TOOLS_CHANGED: "the tool definitions changed, so nothing after them could be read",
}
"""Each cause in a reader's words, for the report's legend."""

_MARKS = (TRUNCATION_MARKER.split("{", 1)[0], STUB_TEMPLATE.split("{", 1)[0])

Json = Mapping[str, Any]


@dataclass(frozen=True)
class BlockPrint:
    """One content block's fingerprints (``cache_control`` stripped)."""

    full: bytes
    base: bytes
    """The fingerprint with its appended injection cut off and trailing whitespace stripped
    (where the separator of a tail found by its tag ends is a guess)."""
    tail: bool
    """Text is appended to it as an injection."""
    injected: bool
    """The whole block is an injection."""


@dataclass(frozen=True)
class MessagePrint:
    """One payload message's fingerprints: the whole message and each block."""

    index: int
    """Its index in the payload's message list."""
    full: bytes
    blocks: tuple[BlockPrint, ...]
    positions: tuple[int, ...]
    injected: bool
    marked: bool
    """Carries the compaction notice, a truncation marker or a stub."""


@dataclass(frozen=True)
class PayloadDigest:
    """What :func:`first_difference` needs of a request (see the module docstring)."""

    tools: tuple[bytes, ...]
    system: tuple[bytes, ...]
    messages: tuple[MessagePrint, ...]
    prefix_tokens: tuple[int, ...]
    """Estimate of tools + system, then of the prefix through each message (cumulative)."""


@dataclass(frozen=True)
class Difference:
    """Where a request first differs from the previous one, and why."""

    part: str
    """``"tools"``, ``"system"`` or ``"messages"``."""
    index: int
    """Tool, system block or payload message index (of the previous request)."""
    block_index: int | None
    position: int | None
    """The transcript position of the message that differs, where there is one."""
    cause: str

    def where(self) -> str:
        if self.part != "messages":
            return f"{self.part} [{self.index}]"
        text = f"message {self.index}"
        text += "" if self.block_index is None else f" block {self.block_index}"
        return text + ("" if self.position is None else f" (transcript #{self.position})")


def _print(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if '"cache_control"' in text:  # rare: strip it only where it is (the walk is the cost)
        text = json.dumps(_stripped(value), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).digest()


def _stripped(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _stripped(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list | tuple):
        return [_stripped(v) for v in value]
    return value


def _block_print(block: Json, cut: int | None) -> bytes:
    """A block's fingerprint, its text cut at ``cut`` and stripped (whole text: None)."""
    text = block_text(block)
    if text is None:
        return _print(block)
    rest = {k: v for k, v in block.items() if k not in ("text", "content")}
    return _print([rest, text if cut is None else text[:cut].rstrip()])


def _tag_cuts(message: Json) -> dict[int | None, int]:
    """Without a transcript: text from the first injection tag of a block is injected."""
    found: dict[int | None, int] = {}
    for b, block in enumerate(content_blocks(message)):
        text = block_text(block) or ""
        at = text.find(INJECTION_TAG)
        if at >= 0:  # the separating whitespace goes with the tail, as align() has it
            found[b] = len(text[:at].rstrip())
    return found


def injection_map(aligned: Alignment) -> dict[int, dict[int | None, int]]:
    """message index -> {block index (None: whole message) -> where the injection starts}."""
    found: dict[int, dict[int | None, int]] = {}
    for injection in aligned.injections:
        found.setdefault(injection.message_index, {})[injection.block_index] = injection.start
    return found


def digest(
    payload: Json,
    transcript: Sequence[Json] | TranscriptIndex | None = None,
    *,
    family: str | None = None,
) -> PayloadDigest:
    """The compact digest of one request; with ``transcript``, its injections as aligned."""
    system, tools, messages = payload_parts(payload)
    aligned = None if transcript is None else align(payload, transcript, family=family)
    injections = None if aligned is None else injection_map(aligned)
    prefix = [head_tokens(tools, system, family)]
    prints: list[MessagePrint] = []
    for ordinal, (index, message) in enumerate(messages):
        match = None if aligned is None else aligned.messages[ordinal]
        cuts = injection_cuts(injections, index, message)
        prints.append(message_print(index, message, cuts, match))
        prefix.append(prefix[-1] + message_tokens(message, match, family))
    return PayloadDigest(part_prints(tools), part_prints(system), tuple(prints), tuple(prefix))


def part_prints(parts: Sequence[Any]) -> tuple[bytes, ...]:
    """A fingerprint per tool definition or system block."""
    return tuple(_print(p) for p in parts)


def head_tokens(tools: Sequence[Any], system: Sequence[Any], family: str | None) -> int:
    """The estimate of what comes before every message: the tools, then the system prompt."""
    total = estimate_message_tokens(
        {"content": json.dumps(_stripped(tools), ensure_ascii=False, default=str)}, family=family
    ) if tools else 0  # fmt: skip
    return total + (estimate_message_tokens({"content": system}, family=family) if system else 0)


def injection_cuts(
    injections: Mapping[int, dict[int | None, int]] | None, index: int, message: Json
) -> dict[int | None, int]:
    """Block index (None: whole message) -> where its injection starts, for one message
    (``injections``: the alignment's map; None: found by their tag)."""
    if injections is None:
        return _tag_cuts(message)
    return injections.get(index, {})


def message_print(
    index: int, message: Json, cuts: Mapping[int | None, int], match: MessageMatch | None
) -> MessagePrint:
    """One message's fingerprints; ``match``: its alignment (None: injections by their tag)."""
    blocks_in = content_blocks(message)
    whole = None in cuts or (
        match is None and bool(cuts) and all(cuts.get(b) == 0 for b in range(len(blocks_in)))
    )
    blocks: list[BlockPrint] = []
    for b, block in enumerate(blocks_in):
        cut, text = cuts.get(b), block_text(block) or ""
        full = _block_print(block, None)
        stripped = len(text) if cut is None else cut
        base = full if cut is None and text == text.rstrip() else _block_print(block, stripped)
        blocks.append(BlockPrint(full, base, cut is not None, cut == 0))
    # String content is one text block to the provider: the same prefix either way.
    envelope = _print({k: v for k, v in message.items() if k != "content"})
    full = hashlib.blake2b(envelope + b"".join(b.full for b in blocks), digest_size=12).digest()
    positions = () if match is None else match.positions
    return MessagePrint(index, full, tuple(blocks), positions, whole, is_marked(message, match))


def message_tokens(message: Json, match: MessageMatch | None, family: str | None) -> int:
    """A message's estimate (its alignment has it already)."""
    return estimate_message_tokens(message, family=family) if match is None else match.estimate


def is_marked(message: Json, match: MessageMatch | None) -> bool:
    """It carries the compaction notice (as aligned), a truncation marker or a stub."""
    if match is not None and match.notice:
        return True
    return any((block_text(b) or "").startswith(_MARKS) for b in content_blocks(message))


def first_index(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first difference of two sequences (None: equal)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def first_difference(
    previous: PayloadDigest | Json, payload: PayloadDigest | Json, *, compacted: bool = False
) -> Difference | None:
    """Where ``payload`` first differs from ``previous`` (None: ``previous`` is its prefix).

    Raw payloads are digested without a transcript (injections found by their tag); pass
    digests made with the transcript to match as :func:`~.payload.align` does.
    ``compacted``: the caller knows a compaction happened between the two.
    """
    old = previous if isinstance(previous, PayloadDigest) else digest(previous)
    new = payload if isinstance(payload, PayloadDigest) else digest(payload)
    # Anthropic caches tools, then system, then messages: report the earliest part first.
    tool = first_index(old.tools, new.tools)
    if tool is not None:
        return Difference("tools", tool, None, None, TOOLS_CHANGED)
    system = first_index(old.system, new.system)
    if system is not None:
        return Difference("system", system, None, None, SYSTEM_CHANGED)
    for i, before in enumerate(old.messages):
        after = new.messages[i] if i < len(new.messages) else None
        if after is None or after.full != before.full:
            rest = any(m.marked for m in new.messages[i:])
            return difference_at(before, after, rest, compacted)
    return None


def difference_at(
    before: MessagePrint, after: MessagePrint | None, marked_after: bool, compacted: bool
) -> Difference:
    """The difference at a message that changed; ``marked_after``: the new request carries a
    compaction mark at or after it."""
    block = None if after is None else first_index(before.blocks, after.blocks)
    position = (before.positions or (after.positions if after else ()) or (None,))[0]
    cause = _cause(before, after, block, marked_after or compacted)
    return Difference("messages", before.index, block, position, cause)


def _cause(
    before: MessagePrint, after: MessagePrint | None, block: int | None, compacted: bool
) -> str:
    if before.injected:
        return INJECTION_MOVED
    if block is not None and block < len(before.blocks):
        old = before.blocks[block]
        if old.injected:
            return INJECTION_MOVED
        if after is not None and block < len(after.blocks):
            new = after.blocks[block]
            # The previous block's own text, without its tail, is what this one holds.
            if old.tail and new.base == old.base:
                return INJECTION_MOVED
    if compacted:
        return COMPACTION
    return EDIT
