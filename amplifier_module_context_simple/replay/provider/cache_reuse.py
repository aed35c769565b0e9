"""Cache reuse as the provider saw it: per request, what it read and wrote, and where the
request first differs from the one before.

:class:`CacheTracker` feeds requests in order, recorded payloads and a Claude Code log's
rebuilt requests alike, in time linear in the messages each adds, and builds the
:class:`CacheReport`: the share of input tokens served from cache (sum of reads over sum of
occupancy), the breaks and their causes. Where two requests differ, and why, is decided by
``cache_rules`` (:func:`~.cache_rules.first_difference`'s rules); the tracker applies them only
from where the two requests stop being equal.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..payloads.payload import usage_figure
from ..payloads.payload_match import (
    Alignment,
    MessageMatch,
    TranscriptIndex,
    align,
    payload_parts,
)
from .cache_rules import (
    CAUSES,
    COMPACTION,
    EDIT,
    SYSTEM_CHANGED,
    TOOLS_CHANGED,
    Difference,
    MessagePrint,
    difference_at,
    first_index,
    head_tokens,
    injection_cuts,
    injection_map,
    is_marked,
    message_print,
    message_tokens,
    part_prints,
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

__all__ = ["CacheReport", "CacheRequest", "CacheTracker", "cache_report"]

Json = Mapping[str, Any]


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

    def message(self, ordinal: int) -> MessagePrint:
        message = self.objects[ordinal]
        index = ordinal if self.indices is None else self.indices[ordinal]
        match = None if self.matches is None else self.matches[ordinal]
        return message_print(index, message, injection_cuts(self.injections, index, message), match)

    def marked(self, ordinal: int) -> bool:
        match = None if self.matches is None else self.matches[ordinal]
        return is_marked(self.objects[ordinal], match)


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
        self,
        transcript: Sequence[Json] | TranscriptIndex | None = None,
        *,
        family: str | None = None,
    ) -> None:
        # Indexed once: every request is aligned with the same (growing) transcript.
        self._transcript = (
            TranscriptIndex(transcript)
            if transcript is not None and not isinstance(transcript, TranscriptIndex)
            else transcript
        )
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
            else head_tokens(tools, system, self._family)
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
                tokens = message_tokens(message, match, self._family)
            prefix.append(prefix[-1] + tokens)
        sent = _Sent(
            tools, system, head, objects, indices, prefix,
            None if aligned is None else injection_map(aligned), matches, same,
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
        tool = first_index(part_prints(previous.tools), part_prints(current.tools))
        if tool is not None:
            return Difference("tools", tool, None, None, TOOLS_CHANGED)
    if current.system != previous.system:
        system = first_index(part_prints(previous.system), part_prints(current.system))
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
            return difference_at(before, after, marked, compacted)
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
