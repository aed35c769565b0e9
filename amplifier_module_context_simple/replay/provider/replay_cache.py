"""The provider's cache over a replay's own views, simulated, and what it would have cost.

A replay under other settings (or of a bare transcript) has no recorded usage to price, so each
replayed request goes through :mod:`.cache_simulation` as the provider would see it: its head
(the tool definitions the budget held back: a recorded payload's, or none) and its messages,
the view as it went out, notice included. Requests carry no time here, so they are counted a
minute apart (the result says so). Two figures: the issue's rule (a request reads all it shares
with any live earlier request: an upper bound on the reads) and the rule of Anthropic's cache
markers (entries only at the head and at each request's end: what the provider would really
read when a tail moves).

Fingerprints and token estimates are kept per message object while a view still sends it, so a
sticky request costs what is new in it, as the replay's other tallies do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import estimate_message_tokens
from ...vocabulary._json_text import json_text
from .cache_simulation import (
    DEFAULT_LIFETIME,
    EVERY_MESSAGE,
    HEAD_AND_END,
    CacheSimulator,
    SimRequest,
)
from .pricing import Prices, prices_for

__all__ = ["PRICED_BASIS", "ReplayCache", "SimulatedCost"]

PRICED_BASIS = (
    "the replayed views and the tool definitions the budget held back, through a simulated "
    "cache; what a log does not hold (its system prompt, the agent's tools) is not priced"
)
"""What the simulated price covers, said wherever it is printed beside the recorded one."""


@dataclass(frozen=True)
class SimulatedCost:
    """The replay's requests priced through the simulated cache."""

    priced_input_tokens: float
    """Base-price token equivalents, every message boundary cached (the issue's rule)."""
    priced_at_markers: float
    """The same where the cache holds only the head and each request whole."""
    read_share: float | None
    """Of the prompt tokens, the share read from the cache (the issue's rule)."""
    input_usd: float | None
    times_assumed: bool
    lifetime_s: float

    def as_json(self) -> dict[str, Any]:
        return {
            "priced_input_tokens": round(self.priced_input_tokens, 1),
            "priced_input_tokens_at_markers": round(self.priced_at_markers, 1),
            "read_share": None if self.read_share is None else round(self.read_share, 4),
            "input_usd": None if self.input_usd is None else round(self.input_usd, 6),
            "times_assumed": self.times_assumed,
            "lifetime_s": self.lifetime_s,
        }


class ReplayCache:
    """Feeds each replayed view to both simulators; ``cost()`` prices the session."""

    def __init__(self, family: str | None, known: Mapping[int, int]) -> None:
        self._family = family
        self._known = known
        self._every = CacheSimulator(DEFAULT_LIFETIME, 0, EVERY_MESSAGE)
        self._markers = CacheSimulator(DEFAULT_LIFETIME, 0, HEAD_AND_END)
        self._view: list[tuple[Mapping[str, Any], bytes, int]] = []
        """The previous view's messages with their fingerprints and estimates."""
        self._messages: list[tuple[bytes, int]] = []
        """The same, as the simulator reads them."""
        self._model: str | None = None

    def add(
        self,
        view: Sequence[Mapping[str, Any]],
        *,
        tool_tokens: int,
        model: str | None,
        shared: int = 0,
    ) -> float:
        """Add one request; returns its priced input (base-price tokens, the issue's rule).

        ``shared``: how many leading messages it re-sends of the previous view as the very same
        objects (``shared_start``): their fingerprints and estimates are carried over.
        """
        previous = self._view
        kept = min(shared, len(previous))
        entries = previous[:kept]
        messages = self._messages[:kept]
        if len(entries) < len(view):
            # The previous view's messages are still alive in ``previous``, so an id found
            # among them is that very object, never a new one at a reused address.
            by_id = {id(e[0]): e for e in previous[len(entries) :]}
            for message in view[len(entries) :]:
                entry = by_id.get(id(message))
                if entry is None:
                    tokens = self._known.get(id(message))
                    if tokens is None:
                        tokens = estimate_message_tokens(message, family=self._family)
                    entry = (message, _fingerprint(message), tokens)
                entries.append(entry)
                messages.append((entry[1], entry[2]))
        self._view, self._messages = entries, messages
        if model:
            self._model = model
        request = SimRequest(f"tools:{tool_tokens}".encode(), tool_tokens, messages)
        self._markers.add(request)
        return self._every.add(request).counts.priced_tokens(self._prices())

    def cost(self) -> SimulatedCost | None:
        """The session's figures; None when no request was added."""
        every, markers = self._every.result(), self._markers.result()
        if not every.requests:
            return None
        prices = self._prices()
        totals = every.totals
        return SimulatedCost(
            priced_input_tokens=every.priced_input_tokens(prices),
            priced_at_markers=markers.priced_input_tokens(prices),
            read_share=totals.read / totals.occupancy if totals.occupancy else None,
            input_usd=every.dollars(prices),
            times_assumed=every.times_assumed,
            lifetime_s=every.lifetime,
        )

    def _prices(self) -> Prices:
        return prices_for(self._model)


_FROZEN_DEPTH = 64


def _fingerprint(message: Mapping[str, Any]) -> bytes:
    """A content fingerprint: equal messages (a shortened result rendered again) get the same
    one. Built from Python's hashes (a string's is computed once and kept by the string),
    which is far cheaper than serialising a large tool result; stable within one process."""
    return _frozen(message).__hash__().to_bytes(8, "little", signed=True)


def _frozen(value: Any, depth: int = 0) -> Any:
    if depth > _FROZEN_DEPTH:
        # Deeper than any real message: fingerprinted by the bounded text the model reads,
        # never by a recursion the interpreter cannot finish.
        return json_text(value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v, depth + 1)) for k, v in value.items()))  # pyright: ignore
    if isinstance(value, list | tuple):
        return tuple(_frozen(v, depth + 1) for v in value)  # pyright: ignore
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value
