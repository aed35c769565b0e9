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
break. A :class:`PayloadDigest` of a request holds what the comparison needs (a fingerprint per
tool, system block, message and block, with ``cache_control`` stripped, plus the injection map
and the running token estimate). :class:`CacheTracker` feeds requests in order, recorded
payloads and a Claude Code log's rebuilt requests alike, in time linear in the messages each
adds, and builds the :class:`CacheReport`: the share of input tokens served from cache (sum of
reads over sum of occupancy), the breaks and their causes.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_left
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
    MessageMatch,
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


def _tag_cuts(message: Json) -> dict[int | None, int]:
    """Without a transcript: text from the first injection tag of a block is injected."""
    found: dict[int | None, int] = {}
    for b, block in enumerate(content_blocks(message)):
        text = block_text(block) or ""
        at = text.find(INJECTION_TAG)
        if at >= 0:  # the separating whitespace goes with the tail, as align() has it
            found[b] = len(text[:at].rstrip())
    return found


def _injection_map(aligned: Alignment) -> dict[int, dict[int | None, int]]:
    """message index -> {block index (None: whole message) -> where the injection starts}."""
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
    injections = None if aligned is None else _injection_map(aligned)
    prefix = [_head_tokens(tools, system, family)]
    prints: list[_Message] = []
    for ordinal, (index, message) in enumerate(messages):
        match = None if aligned is None else aligned.messages[ordinal]
        prints.append(_digest_message(index, message, _cuts(injections, index, message), match))
        prefix.append(prefix[-1] + _estimate(message, match, family))
    return PayloadDigest(_prints(tools), _prints(system), tuple(prints), tuple(prefix))


def _prints(parts: Sequence[Any]) -> tuple[bytes, ...]:
    return tuple(_print(p) for p in parts)


def _head_tokens(tools: Sequence[Any], system: Sequence[Any], family: str | None) -> int:
    """The estimate of what comes before every message: the tools, then the system prompt."""
    total = estimate_message_tokens(
        {"content": json.dumps(_stripped(tools), ensure_ascii=False, default=str)}, family=family
    ) if tools else 0  # fmt: skip
    return total + (estimate_message_tokens({"content": system}, family=family) if system else 0)


def _cuts(
    injections: Mapping[int, dict[int | None, int]] | None, index: int, message: Json
) -> dict[int | None, int]:
    """Block index (None: whole message) -> where its injection starts, for one message
    (``injections``: the alignment's map; None: found by their tag)."""
    if injections is None:
        return _tag_cuts(message)
    return injections.get(index, {})


def _digest_message(
    index: int, message: Json, cuts: Mapping[int | None, int], match: MessageMatch | None
) -> _Message:
    """One message's fingerprints; ``match``: its alignment (None: injections by their tag)."""
    blocks_in = content_blocks(message)
    whole = None in cuts or (
        match is None and bool(cuts) and all(cuts.get(b) == 0 for b in range(len(blocks_in)))
    )
    blocks: list[_Block] = []
    for b, block in enumerate(blocks_in):
        cut, text = cuts.get(b), block_text(block) or ""
        full = _block_print(block, None)
        stripped = len(text) if cut is None else cut
        base = full if cut is None and text == text.rstrip() else _block_print(block, stripped)
        blocks.append(_Block(full, base, cut is not None, cut == 0))
    # String content is one text block to the provider: the same prefix either way.
    envelope = _print({k: v for k, v in message.items() if k != "content"})
    full = hashlib.blake2b(envelope + b"".join(b.full for b in blocks), digest_size=12).digest()
    positions = () if match is None else match.positions
    return _Message(index, full, tuple(blocks), positions, whole, _marked(message, match))


def _estimate(message: Json, match: MessageMatch | None, family: str | None) -> int:
    return estimate_message_tokens(message, family=family) if match is None else match.estimate


def _marked(message: Json, match: MessageMatch | None) -> bool:
    """It carries the compaction notice (as aligned), a truncation marker or a stub."""
    if match is not None and match.notice:
        return True
    return any((block_text(b) or "").startswith(_MARKS) for b in content_blocks(message))


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
        if after is None or after.full != before.full:
            rest = any(m.marked for m in new.messages[i:])
            return _difference_at(before, after, rest, compacted)
    return None


def _difference_at(
    before: _Message, after: _Message | None, marked_after: bool, compacted: bool
) -> Difference:
    """The difference at a message that changed; ``marked_after``: the new request carries a
    compaction mark at or after it."""
    block = None if after is None else _first(before.blocks, after.blocks)
    position = (before.positions or (after.positions if after else ()) or (None,))[0]
    cause = _cause(before, after, block, marked_after or compacted)
    return Difference("messages", before.index, block, position, cause)


def _cause(before: _Message, after: _Message | None, block: int | None, compacted: bool) -> str:
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
    sub_agents: tuple[CacheRequest, ...] = ()
    """The requests of the session's sub-agents (another conversation each, followed apart):
    counted in the totals (read, occupancy, price), never in the breaks, which compare the
    main conversation's requests."""

    @property
    def every_request(self) -> tuple[CacheRequest, ...]:
        return self.requests + self.sub_agents

    @property
    def read(self) -> int:
        return sum(r.cache_read or 0 for r in self.every_request)

    @property
    def occupancy(self) -> int:
        return sum(r.occupancy or 0 for r in self.every_request)

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
        priced = [r.priced_input_tokens for r in self.every_request if r.counts is not None]
        return sum(p for p in priced if p is not None) if priced else None

    @property
    def input_dollars(self) -> float | None:
        """In US dollars; None when no request had usage or a request's price is unknown."""
        dollars = [r.input_dollars for r in self.every_request if r.counts is not None]
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
        shared = [(r.counts, r.shared_tokens if r.is_break else 0) for r in priced]
        # A sub-agent's request is priced as it was: the breaks are the main conversation's.
        shared += [(r.counts, 0) for r in self.sub_agents if r.counts is not None]
        return break_cost(shared, priced[-1].prices)


@dataclass
class _Sent:
    """What the tracker keeps of the previous request: its parts as sent (the objects, so
    that the next request is compared with them) and what it knows of its messages."""

    tools: list[Any]
    system: list[Any]
    head: int
    """The estimate of the tools and system prompt (0 for a log's request)."""
    objects: list[Json]
    indices: list[int] | None
    """Each message's index in the payload's list (None: the same as its place here)."""
    prefix: list[int]
    """Estimated tokens of the messages through each one, from 0 (before any)."""
    injections: dict[int, dict[int | None, int]] | None
    matches: tuple[MessageMatch, ...] | None
    same: int
    """How many messages it starts with that equal the previous request's first ones."""
    first_marked: int | None = None
    """The first message carrying a compaction mark (None: none does)."""

    def message(self, ordinal: int) -> _Message:
        message = self.objects[ordinal]
        index = ordinal if self.indices is None else self.indices[ordinal]
        match = None if self.matches is None else self.matches[ordinal]
        return _digest_message(index, message, _cuts(self.injections, index, message), match)

    def marked(self, ordinal: int) -> bool:
        match = None if self.matches is None else self.matches[ordinal]
        return _marked(self.objects[ordinal], match)


class CacheTracker:
    """Requests in order -> :class:`CacheReport`, in time linear in the messages they add.

    A request re-sends the previous one's messages first (the very objects, in a log; equal
    ones, in a recorded payload read afresh): that shared start is found by one comparison of
    the two lists, and kept as it was (its estimates, its compaction marks). Only the messages
    from there on are estimated, and only where the two differ are they fingerprinted
    (:func:`first_difference`'s rules). The previous request's messages are kept for that
    comparison: one payload more alive than the one being read.
    """

    def __init__(
        self, transcript: Sequence[Json] | None = None, *, family: str | None = None
    ) -> None:
        self._transcript = transcript
        self._family = family
        self._previous: _Sent | None = None
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
        aligned: Alignment | None = None,
        messages_only: bool = False,
    ) -> CacheRequest:
        """Add request ``number``; ``usage``: its usage mapping or record (None: not recorded);
        ``model``: the model it was sent to (its price, where the table knows it); ``aligned``:
        the payload already aligned with the transcript (else aligned here, when the tracker
        has one). ``messages_only``: a request rebuilt from a log that holds no tools, system
        prompt or injections (a Claude Code log): where it stops extending the previous one,
        the cause is ``compaction`` when its first message is new (Claude Code sends a summary
        onwards after compacting), else ``edit``."""
        previous = self._previous
        current = self._sent(payload, previous, aligned, messages_only)
        difference = None
        shared = 0
        if previous is not None:
            if messages_only:
                difference = _log_difference(previous, current)
            else:
                difference = _difference(previous, current, compacted)
            shared = _shared_tokens(previous, difference)
        self._previous = current
        self.last_compacted = current.first_marked is not None
        read, written = (
            usage_figure(usage, "cache_read_tokens"),
            usage_figure(usage, "cache_write_tokens"),
        )
        gross = usage_figure(usage, "input_tokens")
        request = CacheRequest(
            number,
            read,
            written,
            None if gross is None else gross + (written or 0),
            difference,
            _reach(read, current.head, current.prefix),
            counts=recorded_counts(usage),
            shared_tokens=shared,
            prices=prices_for(model),
        )
        self._requests.append(request)
        return request

    def report(self, sub_agents: tuple[CacheRequest, ...] = ()) -> CacheReport:
        return CacheReport(tuple(self._requests), sub_agents)

    @property
    def sent_tokens(self) -> int:
        """The estimate of what the last request sent (0 before any)."""
        sent = self._previous
        return 0 if sent is None else sent.head + sent.prefix[-1]

    def _sent(
        self,
        payload: Json,
        previous: _Sent | None,
        aligned: Alignment | None,
        messages_only: bool,
    ) -> _Sent:
        if messages_only:  # every entry is a message: no parts to take out of the list
            system, tools = [], []
            objects: list[Json] = list(payload.get("messages") or [])
            indices = None
            aligned = None
        else:
            system, tools, messages = payload_parts(payload)
            objects = [m for _, m in messages]
            indices = [i for i, _ in messages]
        if not messages_only and aligned is None and self._transcript is not None:
            aligned = align(payload, self._transcript, family=self._family)
        matches = None if aligned is None else aligned.messages
        same = 0 if previous is None else _shared_length(previous.objects, objects)
        head = (
            previous.head
            if previous is not None and tools == previous.tools and system == previous.system
            else _head_tokens(tools, system, self._family)
        )
        prefix = [0] if previous is None else previous.prefix[: same + 1]
        # Messages the previous request sent further on (Claude Code's summary onwards, after
        # it compacted) are the same objects: their estimates are carried over too.
        known = {} if previous is None else {
            id(m): previous.prefix[k + 1] - previous.prefix[k]
            for k, m in enumerate(previous.objects[same:], same)
        }  # fmt: skip
        for ordinal in range(same, len(objects)):
            message = objects[ordinal]
            tokens = known.get(id(message))
            if tokens is None:
                match = None if matches is None else matches[ordinal]
                tokens = _estimate(message, match, self._family)
            prefix.append(prefix[-1] + tokens)
        sent = _Sent(
            tools, system, head, objects, indices, prefix,
            None if aligned is None else _injection_map(aligned), matches, same,
        )  # fmt: skip
        first = None if previous is None else previous.first_marked
        if first is None or first >= same:
            first = next((k for k in range(same, len(objects)) if sent.marked(k)), None)
        sent.first_marked = first
        return sent


def _shared_length(old: list[Any], new: list[Any]) -> int:
    """How many messages ``new`` starts with that equal those ``old`` starts with.

    Found by halving with list comparisons, so the messages are compared in C, about twice
    over at most, and Python steps only log(n) times; a list compares an object equal to
    itself at once, so a log's shared messages cost no deep comparison.
    """
    if len(new) >= len(old) and old == new[: len(old)]:  # it extends the previous one
        return len(old)
    low, high = 0, min(len(old), len(new))  # all before ``low`` are equal; the answer <= high
    while low < high:
        middle = (low + high) // 2
        if old[low : middle + 1] == new[low : middle + 1]:
            low = middle + 1
        else:
            high = middle
    return low


def _log_difference(previous: _Sent, current: _Sent) -> Difference | None:
    same = current.same
    if same == len(previous.objects):
        return None
    return Difference("messages", same, None, None, COMPACTION if same == 0 else EDIT)


def _difference(previous: _Sent, current: _Sent, compacted: bool) -> Difference | None:
    """:func:`first_difference` of the two requests, fingerprinting only from where their
    messages stop being equal (equal parts have equal fingerprints)."""
    if current.tools != previous.tools:
        tool = _first(_prints(previous.tools), _prints(current.tools))
        if tool is not None:
            return Difference("tools", tool, None, None, TOOLS_CHANGED)
    if current.system != previous.system:
        system = _first(_prints(previous.system), _prints(current.system))
        if system is not None:
            return Difference("system", system, None, None, SYSTEM_CHANGED)
    for i in range(current.same, len(previous.objects)):
        before = previous.message(i)
        after = current.message(i) if i < len(current.objects) else None
        if after is None or after.full != before.full:
            first = current.first_marked
            marked = first is not None and (
                first >= i or any(current.marked(k) for k in range(i, len(current.objects)))
            )
            return _difference_at(before, after, marked, compacted)
    return None


def _shared_tokens(previous: _Sent, difference: Difference | None) -> int:
    """Our estimate of what a request shares with ``previous`` from the start."""
    prefix = previous.prefix
    if difference is None:
        return previous.head + prefix[-1]
    if difference.part != "messages":
        return 0  # the tools come first: a change there or in the system shares nothing sure
    return previous.head + prefix[min(difference.index, len(prefix) - 1)]


def _reach(read: int | None, head: int, prefix: Sequence[int]) -> int | None:
    """The first message boundary whose estimate (``head`` + ``prefix``) is nearest the tokens
    read (None: none read). ``prefix`` never decreases: a bisection finds it."""
    if not read:
        return None
    at = bisect_left(prefix, read - head)
    nearest = min((prefix[k] for k in (at - 1, at) if 0 <= k < len(prefix)),
                  key=lambda value: abs(head + value - read))  # fmt: skip
    return bisect_left(prefix, nearest)


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
