"""The cache a provider keeps, simulated: what a replayed session would have read and written.

A replay has no recorded usage, so what the cache would have done is simulated from the
requests themselves. Each request is its head (the tools and system prompt, which a provider
caches first, as one fingerprint and its tokens) and its messages (a fingerprint and the
tokens of each), fed in order with the time it was sent:

* it reads the longest prefix (head, then whole messages) it shares with any earlier request
  whose cached copy is still alive, and writes the rest (:class:`~.pricing.CacheCounts`);
* a cached prefix lives ``lifetime`` seconds (300: Anthropic's 5-minute cache) from the last
  request that wrote or read it: a read refreshes it, as Anthropic does, at no charge;
* a request shorter than ``min_cacheable_tokens`` is neither read from nor written to the cache
  (fresh), nor is a read prefix shorter than it counted (Anthropic: 1,024 to 4,096 tokens by
  model; 0 by default, so the simulation needs no model);
* with no time recorded, requests are counted one minute apart, and the result says so
  (:attr:`CacheSimulation.times_assumed`); a time earlier than the one before counts as the
  one before (the cache's clock does not run backwards).

Where the cache holds a prefix (``breakpoints``):

* :data:`EVERY_MESSAGE` (the default): at every message boundary of every request, so a
  request reads all it shares with an earlier one. The most a provider could serve: an upper
  bound on the reads.
* :data:`HEAD_AND_END`: only where Amplifier's Anthropic provider puts its ``cache_control``
  markers (the last tool, the system prompt, the last message; so the head and each request
  whole), which is where Anthropic writes cache entries. A request then reads the longest
  earlier request (or head) it starts with. The shared opus-4-8 session is this case: each of
  requests 2-9 shares more than the head with the request before, yet the provider read the
  head (67,190 tokens) and wrote all the messages again, because every earlier request ended
  with a tail injection that is gone. Anthropic also looks back only about 20 blocks from a
  marker for an entry; a request that adds more than that at once would miss: not modelled.

Either way every request is cached whole (the marker on its last message).

Cost: each request is O(its messages): the prefixes are a chain of hashes (each message's key
is the hash of the key before it and its fingerprint) in one dict, the chain of the previous
request is reused up to where the new one differs, and the longest live prefix is found by
walking the chain (with every message cached, the walk stops at the first miss: a prefix is
always at least as alive as any longer one, since every request refreshes all its prefixes at
once and times never go backwards).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .cache_rules import PayloadDigest
from .pricing import (
    DEFAULT_PRICES,
    NO_TOKENS,
    BreakCost,
    CacheCounts,
    Prices,
    break_cost,
)

__all__ = [
    "ASSUMED_INTERVAL",
    "BREAKPOINTS",
    "DEFAULT_LIFETIME",
    "EVERY_MESSAGE",
    "HEAD_AND_END",
    "CacheSimulation",
    "CacheSimulator",
    "SimRequest",
    "SimulatedRequest",
    "simulate",
]

DEFAULT_LIFETIME = 300.0
"""Seconds: Anthropic's default (5-minute) cache."""
ASSUMED_INTERVAL = 60.0
"""Seconds between requests when no time is recorded."""
EVERY_MESSAGE = "every message"
HEAD_AND_END = "head and end"
BREAKPOINTS = (EVERY_MESSAGE, HEAD_AND_END)


def _key(before: bytes, fingerprint: bytes) -> bytes:
    return hashlib.blake2b(before + fingerprint, digest_size=16).digest()


@dataclass(frozen=True)
class SimRequest:
    """One request as the cache sees it."""

    head: bytes
    """Fingerprint of everything before the first message (tools, then system)."""
    head_tokens: int
    messages: Sequence[tuple[bytes, int]]
    """(fingerprint, tokens) per message, in payload order."""
    time: float | None = None
    """Seconds, on any clock shared by the session's requests; None: not recorded."""

    @classmethod
    def from_digest(cls, digest: PayloadDigest, time: float | None = None) -> SimRequest:
        """From :func:`~.cache_rules.digest`: its fingerprints (``cache_control`` stripped)
        and its running token estimate."""
        # The counts keep a tool that moves into the system prompt from looking unchanged.
        head = hashlib.blake2b(
            f"{len(digest.tools)}:{len(digest.system)}:".encode()
            + b"".join(digest.tools)
            + b"".join(digest.system),
            digest_size=16,
        ).digest()
        prefix = digest.prefix_tokens
        messages = [(m.full, prefix[i + 1] - prefix[i]) for i, m in enumerate(digest.messages)]
        return cls(head, prefix[0], messages, time)


@dataclass(frozen=True)
class SimulatedRequest:
    """One request's simulated cache figures."""

    number: int
    time: float
    """As counted (recorded, or assumed: see :attr:`CacheSimulation.times_assumed`)."""
    counts: CacheCounts
    read_messages: int | None
    """Messages the read covers (0: the head only; None: nothing read)."""
    read_from: int | None
    """The request that first wrote the prefix read (None: nothing read)."""
    shared_with_previous: int
    """Tokens the request has in common with the one before, from the start."""


@dataclass(frozen=True)
class CacheSimulation:
    requests: tuple[SimulatedRequest, ...]
    lifetime: float
    times_assumed: bool
    """Some request had no time and was counted a minute after the one before."""

    @property
    def totals(self) -> CacheCounts:
        total = NO_TOKENS
        for request in self.requests:
            total += request.counts
        return total

    def priced_input_tokens(self, prices: Prices = DEFAULT_PRICES) -> float:
        return self.totals.priced_tokens(prices)

    def dollars(self, prices: Prices = DEFAULT_PRICES) -> float | None:
        return self.totals.dollars(prices)

    def break_cost(self, prices: Prices = DEFAULT_PRICES) -> BreakCost:
        """As simulated, against each request reading all it shared with the one before."""
        return break_cost(((r.counts, r.shared_with_previous) for r in self.requests), prices)


@dataclass
class _Entry:
    expires: float
    origin: int


@dataclass
class _Previous:
    head: bytes
    prints: list[bytes]
    keys: list[bytes]
    """keys[0]: the head alone; keys[i]: the prefix through message i."""
    tokens: list[int]
    """Cumulative, as keys."""
    time: float
    refreshed: bool = False
    """Its whole chain was refreshed at ``time`` (every message cached), not yet written to
    the entries for the keys it shares with the request before it."""


@dataclass
class CacheSimulator:
    """Feed requests in order (:meth:`add`), then :meth:`result`."""

    lifetime: float = DEFAULT_LIFETIME
    min_cacheable_tokens: int = 0
    breakpoints: str = EVERY_MESSAGE
    _entries: dict[bytes, _Entry] = field(default_factory=dict[bytes, _Entry], init=False)
    _requests: list[SimulatedRequest] = field(default_factory=list[SimulatedRequest], init=False)
    _previous: _Previous | None = field(default=None, init=False)
    _assumed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.breakpoints not in BREAKPOINTS:
            raise ValueError(f"breakpoints: one of {BREAKPOINTS}, not {self.breakpoints!r}")

    def add(self, request: SimRequest) -> SimulatedRequest:
        previous = self._previous
        time = request.time
        if time is None:
            self._assumed = True
            time = 0.0 if previous is None else previous.time + ASSUMED_INTERVAL
        elif previous is not None:
            time = max(time, previous.time)
        prints = [fingerprint for fingerprint, _ in request.messages]
        common = -1  # messages in common with the previous request; -1: the head differs
        if previous is not None and previous.head == request.head:
            known = len(previous.prints)
            if len(prints) >= known and prints[:known] == previous.prints:
                common = known  # the usual case, a request extending the last: one C compare
            else:
                common = 0
                for old, new in zip(previous.prints, prints, strict=False):
                    if old != new:
                        break
                    common += 1
        # The previous request's chain holds through the messages in common.
        keys = previous.keys[: common + 1] if previous is not None and common >= 0 else []
        tokens = previous.tokens[: common + 1] if previous is not None and common >= 0 else []
        if not keys:
            keys.append(hashlib.blake2b(request.head, digest_size=16).digest())
            tokens.append(request.head_tokens)
        for i in range(len(keys) - 1, len(prints)):
            keys.append(_key(keys[-1], prints[i]))
            tokens.append(tokens[-1] + request.messages[i][1])
        shared = 0 if common < 0 else tokens[common]
        number = len(self._requests) + 1
        every = self.breakpoints == EVERY_MESSAGE
        # With every message cached, each request refreshes its whole chain: the previous
        # request's keys are all alive until its time + lifetime, whatever ``_entries`` says
        # (that refresh is written there only when the chain is left, see below).
        implied = (
            every and previous is not None and common >= 0 and previous.time + self.lifetime >= time
        )
        live = common if implied else -1
        if every:
            for depth in range(live + 1, len(keys)):
                entry = self._entries.get(keys[depth])
                if entry is None or entry.expires < time:
                    break  # nothing longer is alive either (see the module docstring)
                live = depth
        else:
            # Entries stand only at the markers: the longest alive one, from the end (a request
            # extending the last finds the last request's end after its few new messages).
            for depth in range(len(keys) - 1, -1, -1):
                entry = self._entries.get(keys[depth])
                if entry is not None and entry.expires >= time:
                    live = depth
                    break
        total = tokens[-1]
        cacheable = total >= self.min_cacheable_tokens
        read = tokens[live] if live >= 0 and cacheable else 0
        if read < self.min_cacheable_tokens:
            read = 0
        if every and previous is not None and previous.refreshed:
            # The previous chain's refresh, written where this request leaves it.
            left = previous.keys[common + 1 :] if common >= 0 else previous.keys
            until = previous.time + self.lifetime
            for key in left:
                entry = self._entries.get(key)
                if entry is not None and entry.expires < until:
                    entry.expires = until
        refreshed = False
        if cacheable:
            expires = time + self.lifetime
            # Written where the markers are; what was read is refreshed.
            if every:
                # Kept implied for the chain this request shares with the last (alive:
                # ``implied``); written for the rest.
                touched = keys[common + 1 :] if implied else keys
                refreshed = True
            else:
                touched = [keys[d] for d in sorted({0, max(live, 0), len(keys) - 1})]
            for key in touched:
                entry = self._entries.get(key)
                if entry is None or entry.expires < time:
                    self._entries[key] = _Entry(expires, number)
                else:
                    entry.expires = expires
            counts = CacheCounts(0, read, total - read)
        else:
            counts = CacheCounts(total, 0, 0)
        origin = self._entries[keys[live]].origin if read else None
        simulated = SimulatedRequest(number, time, counts, live if read else None, origin, shared)
        self._requests.append(simulated)
        self._previous = _Previous(request.head, prints, keys, tokens, time, refreshed)
        return simulated

    def result(self) -> CacheSimulation:
        return CacheSimulation(tuple(self._requests), self.lifetime, self._assumed)


def simulate(
    requests: Iterable[SimRequest],
    *,
    lifetime: float = DEFAULT_LIFETIME,
    min_cacheable_tokens: int = 0,
    breakpoints: str = EVERY_MESSAGE,
) -> CacheSimulation:
    """The simulated cache figures of ``requests``, in order, numbered from 1."""
    simulator = CacheSimulator(lifetime, min_cacheable_tokens, breakpoints)
    for request in requests:
        simulator.add(request)
    return simulator.result()
