"""The provider's cache over requests known only by their messages, in time linear in them.

A log that records no payload (a Claude Code log: ``RecordedRequest.messages_only``) still
shows which messages each request sent: one list of messages, of which each request sends a
slice. :class:`MessagesCacheTracker` builds the same :class:`~.cache_reuse.CacheReport` as
:class:`~.cache_reuse.CacheTracker` from those slices without fingerprinting every payload:
a request extends the one before when it re-sends the very same message objects first (an
identity comparison), and each message is estimated once. The general tracker digests and
aligns each payload whole, which is quadratic over a session of a thousand requests.

Where a request stops extending the last, the cause is ``compaction`` when its first message
is new (Claude Code sends a summary onwards after compacting), else ``edit``. The log holds
no tools or system prompt, so no break is found there and ``read_reach`` counts messages only.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from ... import estimate_message_tokens
from ..payloads.payload import usage_figure
from .cache_reuse import COMPACTION, EDIT, CacheReport, CacheRequest, Difference
from .pricing import prices_for, recorded_counts

__all__ = ["MessagesCacheTracker"]


class MessagesCacheTracker:
    """Requests in order (their payload's ``messages``) -> :class:`CacheReport`."""

    def __init__(self, *, family: str | None = None) -> None:
        self._family = family
        self._previous: list[Mapping[str, Any]] = []
        self._prefix: list[int] = [0]
        """Estimated tokens through each message of the previous request (0: before any)."""
        self._tokens: dict[int, tuple[Mapping[str, Any], int]] = {}
        self._requests: list[CacheRequest] = []

    def add(
        self, number: int, payload: Mapping[str, Any], usage: Any, *, model: str | None
    ) -> None:
        messages: list[Mapping[str, Any]] = list(payload.get("messages") or [])
        old = self._previous
        same = _shared_length(old, messages)
        difference = None
        shared = 0
        if self._requests:
            if same < len(old):
                cause = COMPACTION if same == 0 else EDIT
                difference = Difference("messages", same, None, None, cause)
            shared = self._prefix[same]
        # The prefix sums of the messages kept, then of the new ones.
        prefix = self._prefix[: same + 1]
        for message in messages[same:]:
            prefix.append(prefix[-1] + self._estimate(message))
        self._previous, self._prefix = messages, prefix
        read = usage_figure(usage, "cache_read_tokens")
        written = usage_figure(usage, "cache_write_tokens")
        gross = usage_figure(usage, "input_tokens")
        self._requests.append(
            CacheRequest(
                number,
                read,
                written,
                None if gross is None else gross + (written or 0),
                difference,
                _reach(read, prefix),
                counts=recorded_counts(usage),
                shared_tokens=shared,
                prices=prices_for(model),
            )
        )

    def _estimate(self, message: Mapping[str, Any]) -> int:
        # Keyed by identity, the message held beside its figure so the id stays its own.
        known = self._tokens.get(id(message))
        if known is None or known[0] is not message:
            known = (message, estimate_message_tokens(message, family=self._family))
            self._tokens[id(message)] = known
        return known[1]

    @property
    def sent_tokens(self) -> int:
        """The estimate of the messages the last request sent (0 before any)."""
        return self._prefix[-1]

    def report(self) -> CacheReport:
        return CacheReport(tuple(self._requests))


def _shared_length(old: Sequence[Any], new: Sequence[Any]) -> int:
    """How many messages ``new`` starts with that are the very objects ``old`` starts with."""
    if len(new) >= len(old) and all(map(operator.is_, old, new)):
        return len(old)
    return next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a is not b),
                min(len(old), len(new)))  # fmt: skip


def _reach(read: int | None, prefix: Sequence[int]) -> int | None:
    """The message boundary whose estimate is nearest the tokens read (None: none read)."""
    if not read:
        return None
    at = bisect_left(prefix, read)
    candidates = [k for k in (at - 1, at) if 0 <= k < len(prefix)]
    return min(candidates, key=lambda k: abs(prefix[k] - read))
