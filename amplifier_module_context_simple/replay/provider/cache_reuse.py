"""Cache reuse as the provider saw it: per request, what it read and wrote, and where the
request first differs from the one before.

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
break. Only a :class:`PayloadDigest` of the previous request is kept (a fingerprint per tool,
system block, message and block, with ``cache_control`` stripped, plus the injection map and
the running token estimate), never the payload itself. :class:`CacheTracker` feeds requests in
order and builds the :class:`CacheReport`: the share of input tokens served from cache (sum of
reads over sum of occupancy), the breaks and their causes.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import estimate_message_tokens
from ..._render import STUB_TEMPLATE, TRUNCATION_MARKER
from ..payloads.payload import usage_figure
from ..payloads.payload_match import (
    INJECTION_TAG,
    Alignment,
    align,
    block_text,
    content_blocks,
    payload_parts,
)
from .pricing import (
    DEFAULT_PRICES,
    BreakCost,
    CacheCounts,
    Prices,
    break_cost,
    prices_for,
    recorded_counts,
)

__all__ = [
    "CAUSES",
    "CAUSE_MEANINGS",
    "COMPACTION",
    "EDIT",
    "INJECTION_MOVED",
    "SYSTEM_CHANGED",
    "TOOLS_CHANGED",
    "CacheReport",
    "CacheRequest",
    "CacheTracker",
    "Difference",
    "PayloadDigest",
    "cache_report",
    "digest",
    "first_difference",
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
class _Block:
    full: bytes
    base: bytes
    """The fingerprint with its appended injection cut off and trailing whitespace stripped
    (where the separator of a tail found by its tag ends is a guess)."""
    tail: bool
    """Text is appended to it as an injection."""
    injected: bool
    """The whole block is an injection."""


@dataclass(frozen=True)
class _Message:
    index: int
    full: bytes
    blocks: tuple[_Block, ...]
    positions: tuple[int, ...]
    injected: bool
    marked: bool
    """Carries the compaction notice, a truncation marker or a stub."""


@dataclass(frozen=True)
class PayloadDigest:
    """What :func:`first_difference` needs of a request (see the module docstring)."""

    tools: tuple[bytes, ...]
    system: tuple[bytes, ...]
    messages: tuple[_Message, ...]
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


def _tag_alignment(messages: list[tuple[int, Json]]) -> dict[int, dict[int | None, int]]:
    """Without a transcript: text from the first injection tag of a block is injected."""
    found: dict[int, dict[int | None, int]] = {}
    for index, message in messages:
        for b, block in enumerate(content_blocks(message)):
            text = block_text(block) or ""
            at = text.find(INJECTION_TAG)
            if at >= 0:  # the separating whitespace goes with the tail, as align() has it
                found.setdefault(index, {})[b] = len(text[:at].rstrip())
    return found


def _injection_map(aligned: Alignment | None, messages: list[tuple[int, Json]]):
    """message index -> {block index (None: whole message) -> where the injection starts}."""
    if aligned is None:
        return _tag_alignment(messages)
    found: dict[int, dict[int | None, int]] = {}
    for injection in aligned.injections:
        found.setdefault(injection.message_index, {})[injection.block_index] = injection.start
    return found


def digest(
    payload: Json, transcript: Sequence[Json] | None = None, *, family: str | None = None
) -> PayloadDigest:
    """The compact digest of one request; with ``transcript``, its injections as aligned."""
    system, tools, messages = payload_parts(payload)
    aligned = None if transcript is None else align(payload, transcript, family=family)
    injections = _injection_map(aligned, messages)
    matches = {m.index: m for m in aligned.messages} if aligned else {}
    total = estimate_message_tokens(
        {"content": json.dumps(_stripped(tools), ensure_ascii=False, default=str)}, family=family
    ) if tools else 0  # fmt: skip
    total += estimate_message_tokens({"content": system}, family=family) if system else 0
    prefix = [total]
    prints: list[_Message] = []
    for index, message in messages:
        cuts = injections.get(index, {})
        whole = None in cuts or (
            transcript is None
            and bool(cuts)
            and all(cuts.get(b) == 0 for b in range(len(content_blocks(message))))
        )
        match = matches.get(index)
        blocks: list[_Block] = []
        marked = match is not None and match.notice
        for b, block in enumerate(content_blocks(message)):
            cut, text = cuts.get(b), block_text(block) or ""
            full = _block_print(block, None)
            stripped = len(text) if cut is None else cut
            base = full if cut is None and text == text.rstrip() else _block_print(block, stripped)
            blocks.append(_Block(full, base, cut is not None, cut == 0))
            marked |= text.startswith(_MARKS)
        # String content is one text block to the provider: the same prefix either way.
        envelope = _print({k: v for k, v in message.items() if k != "content"})
        full = hashlib.blake2b(envelope + b"".join(b.full for b in blocks), digest_size=12).digest()
        positions = () if match is None else match.positions
        prints.append(_Message(index, full, tuple(blocks), positions, whole, marked))
        total += (
            estimate_message_tokens(message, family=family) if match is None else match.estimate
        )
        prefix.append(total)
    return PayloadDigest(
        tuple(_print(t) for t in tools), tuple(_print(s) for s in system), tuple(prints),
        tuple(prefix),
    )  # fmt: skip


def _first(a: Sequence[Any], b: Sequence[Any]) -> int | None:
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
    tool = _first(old.tools, new.tools)
    if tool is not None:
        return Difference("tools", tool, None, None, TOOLS_CHANGED)
    system = _first(old.system, new.system)
    if system is not None:
        return Difference("system", system, None, None, SYSTEM_CHANGED)
    for i, before in enumerate(old.messages):
        after = new.messages[i] if i < len(new.messages) else None
        if after is not None and after.full == before.full:
            continue
        block = None if after is None else _first(before.blocks, after.blocks)
        position = (before.positions or (after.positions if after else ()) or (None,))[0]
        cause = _cause(before, after, block, new.messages[i:], compacted)
        return Difference("messages", before.index, block, position, cause)
    return None


def _cause(
    before: _Message,
    after: _Message | None,
    block: int | None,
    rest: Sequence[_Message],
    compacted: bool,
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
    if compacted or any(m.marked for m in rest):
        return COMPACTION
    return EDIT


@dataclass(frozen=True)
class CacheRequest:
    """One request's cache figures and its first difference from the one before."""

    number: int
    cache_read: int | None
    cache_write: int | None
    occupancy: int | None
    """``input_tokens`` (gross) + ``cache_write_tokens``."""
    difference: Difference | None
    read_reach: int | None
    """Payload messages the read covers: the prefix boundary whose estimate is nearest the
    read (0: tools and system only; None: nothing read)."""
    counts: CacheCounts | None = None
    """The recorded usage as the provider billed it (fresh, read, written); None: no usage."""
    shared_tokens: int = 0
    """Our estimate of the prompt it has in common with the request before it, from the start
    (the whole previous request when there is no difference; 0 for the first)."""
    prices: Prices = DEFAULT_PRICES

    @property
    def is_break(self) -> bool:
        return self.difference is not None

    @property
    def priced_input_tokens(self) -> float | None:
        """Its input in base-price token equivalents (writes at the write price, reads at the
        read price); None without recorded usage."""
        return None if self.counts is None else self.counts.priced_tokens(self.prices)

    @property
    def input_dollars(self) -> float | None:
        return None if self.counts is None else self.counts.dollars(self.prices)


@dataclass(frozen=True)
class CacheReport:
    requests: tuple[CacheRequest, ...]

    @property
    def read(self) -> int:
        return sum(r.cache_read or 0 for r in self.requests)

    @property
    def occupancy(self) -> int:
        return sum(r.occupancy or 0 for r in self.requests)

    @property
    def share(self) -> float | None:
        """Share of input tokens served from cache (None: no usage recorded)."""
        return self.read / self.occupancy if self.occupancy else None

    @property
    def breaks(self) -> int:
        return sum(r.is_break for r in self.requests)

    def causes(self) -> dict[str, int]:
        counted = Counter(r.difference.cause for r in self.requests if r.difference)
        return {cause: counted[cause] for cause in CAUSES if counted[cause]}

    @property
    def priced_input_tokens(self) -> float | None:
        """The session's recorded input in base-price token equivalents (None: no usage)."""
        priced = [r.priced_input_tokens for r in self.requests if r.counts is not None]
        return sum(p for p in priced if p is not None) if priced else None

    @property
    def input_dollars(self) -> float | None:
        """In US dollars; None when no request had usage or a request's price is unknown."""
        dollars = [r.input_dollars for r in self.requests if r.counts is not None]
        if not dollars or any(d is None for d in dollars):
            return None
        return sum(d for d in dollars if d is not None)

    def break_cost(self) -> BreakCost | None:
        """What the same requests would have cost had each break read everything it shared
        with the request before (priced at the session's last known model); None without
        usage. A request that is no break is priced as it was: what it failed to read is a
        cache miss (an expired entry, the estimate's error), not a break's cost, so no break
        means no cost caused."""
        priced = [r for r in self.requests if r.counts is not None]
        if not priced:
            return None
        shared = ((r.counts, r.shared_tokens if r.is_break else 0) for r in priced)
        return break_cost(shared, priced[-1].prices)


def _shared_tokens(previous: PayloadDigest, difference: Difference | None) -> int:
    """Our estimate of what a request shares with ``previous`` from the start."""
    prefix = previous.prefix_tokens
    if difference is None:
        return prefix[-1] if prefix else 0
    if difference.part != "messages":
        return 0  # the tools come first: a change there or in the system shares nothing sure
    return prefix[min(difference.index, len(prefix) - 1)] if prefix else 0


def _reach(read: int | None, prefix: Sequence[int]) -> int | None:
    if not read:
        return None
    return min(range(len(prefix)), key=lambda k: abs(prefix[k] - read))


class CacheTracker:
    """Requests in order -> :class:`CacheReport`; keeps only the previous request's digest."""

    def __init__(
        self, transcript: Sequence[Json] | None = None, *, family: str | None = None
    ) -> None:
        self._transcript = transcript
        self._family = family
        self._previous: PayloadDigest | None = None
        self._requests: list[CacheRequest] = []
        self.last_compacted = False
        """The request added last carries the session's own compaction (its notice, a
        truncation marker or a stub): its messages are no longer the whole history."""

    def add(
        self,
        number: int,
        payload: Json,
        usage: Any,
        *,
        compacted: bool = False,
        model: str | None = None,
    ) -> CacheRequest:
        """Add request ``number``; ``usage``: its usage mapping or record (None: not recorded);
        ``model``: the model it was sent to (its price, where the table knows it)."""
        current = digest(payload, self._transcript, family=self._family)
        difference = None
        shared = 0
        previous = self._previous
        if previous is not None:
            difference = first_difference(previous, current, compacted=compacted)
            shared = _shared_tokens(previous, difference)
        self._previous = current
        self.last_compacted = any(m.marked for m in current.messages)
        read, written = (
            usage_figure(usage, "cache_read_tokens"),
            usage_figure(usage, "cache_write_tokens"),
        )
        gross = usage_figure(usage, "input_tokens")
        occupancy = None if gross is None else gross + (written or 0)
        request = CacheRequest(
            number,
            read,
            written,
            occupancy,
            difference,
            _reach(read, current.prefix_tokens),
            counts=recorded_counts(usage),
            shared_tokens=shared,
            prices=prices_for(model),
        )
        self._requests.append(request)
        return request

    def report(self) -> CacheReport:
        return CacheReport(tuple(self._requests))


def cache_report(
    requests: Iterable[tuple[Json, Any]],
    transcript: Sequence[Json] | None = None,
    *,
    family: str | None = None,
) -> CacheReport:
    """The report for (payload, usage) pairs in request order, numbered from 1."""
    tracker = CacheTracker(transcript, family=family)
    for number, (payload, usage) in enumerate(requests, 1):
        tracker.add(number, payload, usage)
    return tracker.report()
