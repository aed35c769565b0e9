"""Rework after the session's own compactions: calls the agent made again once its context
manager had compacted.

A recording that compacted itself marks where: a Claude Code log's ``compact_boundary`` (from
then on Claude Code sends its summary instead of what came before, which
:func:`log_compactions` reads off the requests the log rebuilds), or an Amplifier session's
recorded ``context:compaction`` / ``context:post_compact`` events (:func:`events_compactions`:
an event before request N's ``llm:request`` is that request's compaction). Request N is the
N-th assistant message, as everywhere in the replay.

For each compaction, the calls made from its request up to the next compaction's are compared
with every call made before it: a call with the same tool and the same main argument (the
drops table's rule, :func:`.drops.main_argument`: its path, command, pattern ...) is a repeat.
A call whose arguments name nothing is never one. Each repeat's tokens are its results' (what
reading it again brought back into the context, estimated), priced as written once to the
provider's cache (the least it costs: every later request carries it again); dollars where the
model's price is known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ... import estimate_message_tokens
from ...vocabulary._messages import result_ids
from ...vocabulary._public import answers_a_request
from ..provider.pricing import CacheCounts, prices_for
from ..recordings.claude_code_log import COMPACTION_MARK
from ..recordings.recorded_log import LoadedLog, LogCompaction
from ..recordings.session_dir import read_events
from .drops import calls_made, main_argument

__all__ = [
    "FROM_EVENTS",
    "FROM_LOG",
    "RepeatedCall",
    "Rework",
    "ReworkSpan",
    "events_compactions",
    "find_rework",
    "log_compactions",
]

FROM_LOG = COMPACTION_MARK
FROM_EVENTS = "recorded context:compaction events"
_COMPACTION_EVENTS = frozenset({"context:compaction", "context:post_compact"})


@dataclass(frozen=True)
class RepeatedCall:
    """One call after a compaction that repeats one made before it."""

    position: int
    """The history position of the assistant message that made it."""
    request: int
    tool: str
    argument: str
    """Its main argument, as the drops table shows it."""
    first_position: int
    """The assistant message that made the same call last before the compaction."""
    tokens: int
    """Its results, estimated."""


@dataclass(frozen=True)
class ReworkSpan:
    """One of the session's compactions and the calls from it up to the next."""

    request: int
    """The first request after the compaction."""
    position: int
    """That request's assistant message in the history."""
    calls: int
    """Calls made from it up to the next compaction (each call once)."""
    repeated: list[RepeatedCall]
    tokens: int
    priced_tokens: float
    """``tokens`` as written once to the cache, in base-price tokens."""
    usd: float | None


@dataclass(frozen=True)
class Rework:
    source: str
    """What marked the compactions: an agent log's mark (:data:`FROM_LOG` for Claude Code's)
    or :data:`FROM_EVENTS`."""
    spans: list[ReworkSpan]
    recorded: list[LogCompaction] = field(default_factory=list[LogCompaction])
    """The compactions an agent's log records (when, what set them off, the tokens before),
    those the log ends on included."""

    def as_json(self) -> dict[str, Any]:
        usd = [s.usd for s in self.spans]
        return {
            "source": self.source,
            "compactions": len(self.spans),
            "repeated_calls": sum(len(s.repeated) for s in self.spans),
            "tokens": sum(s.tokens for s in self.spans),
            "priced_tokens": round(sum((s.priced_tokens for s in self.spans), 0.0), 1),
            "usd": None if None in usd else round(sum((u or 0.0 for u in usd), 0.0), 6),
            "spans": [asdict(s) for s in self.spans],
            "recorded": [c.as_json() for c in self.recorded],
        }


def log_compactions(log: LoadedLog) -> list[int]:
    """The first request after each of an agent log's own compactions: the request after each
    one it records, or, for a log that records none (an older Claude Code log), where the
    messages it sent stop beginning with the same message (a summary sent from then on)."""
    if log.compactions:
        return [c.after_request + 1 for c in log.compactions if c.after_request < log.request_count]
    found: list[int] = []
    first: object = None
    for request in log.requests():
        sent: list[Any] = request.payload.get("messages") or []
        head = sent[0] if sent else None
        if request.number > 1 and head is not None and head is not first and first is not None:
            found.append(request.number)
        first = head if head is not None else first
    return found


def events_compactions(events: Path) -> list[int]:
    """The requests an Amplifier session's events file records a compaction for."""
    found: list[int] = []
    requests = 0
    for _, event in read_events(events, skipped=None):
        name = event.get("event")
        if name == "llm:request":
            requests += 1
        elif name in _COMPACTION_EVENTS and (not found or found[-1] != requests + 1):
            found.append(requests + 1)  # both events of one compaction count once
    return found


def find_rework(
    messages: Sequence[Mapping[str, Any]],
    compactions: Sequence[int],
    *,
    source: str,
    family: str | None,
    model: str | None,
    recorded: Sequence[LogCompaction] = (),
) -> Rework:
    """The repeats after each compaction (``compactions``: request numbers, ascending)."""
    assistants = [i for i, m in enumerate(messages) if answers_a_request(m)]
    starts = [(n, assistants[n - 1]) for n in compactions if 1 <= n <= len(assistants)]
    results = _result_tokens(messages, family)
    prices = prices_for(model)
    request_at = {position: n for n, position in enumerate(assistants, 1)}
    before: dict[tuple[str, str], int] = {}  # (tool, main argument) -> the latest position
    made = list(_calls(messages))
    spans: list[ReworkSpan] = []
    cursor = 0
    for index, (request, start) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else len(messages)
        while cursor < len(made) and made[cursor][0] < start:
            position, _, key = made[cursor]
            if key is not None:
                before[key] = position
            cursor += 1
        repeated: list[RepeatedCall] = []
        calls = 0
        for position, call_id, key in made[cursor:]:
            if position >= end:
                break
            calls += 1
            if key is not None and key in before:
                tokens = results.get((position, call_id), 0)
                repeated.append(
                    RepeatedCall(position, request_at[position], key[0], key[1], before[key],
                                 tokens)
                )  # fmt: skip
        tokens = sum(r.tokens for r in repeated)
        counts = CacheCounts(fresh=0, read=0, written=tokens)
        spans.append(
            ReworkSpan(request, start, calls, repeated, tokens,
                       round(counts.priced_tokens(prices), 1), counts.dollars(prices))
        )  # fmt: skip
    return Rework(source, spans, list(recorded))


def _calls(
    messages: Sequence[Mapping[str, Any]],
) -> Iterable[tuple[int, str, tuple[str, str] | None]]:
    """(position, call id, (tool, main argument) or None) for every call, in order."""
    for position, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        for call_id, tool, arguments in calls_made(message):
            argument = main_argument(arguments)
            yield position, call_id, None if argument is None else (tool, argument)


def _result_tokens(
    messages: Sequence[Mapping[str, Any]], family: str | None
) -> dict[tuple[int, str], int]:
    """(call's position, call id) -> the tokens of the results answering it: a result answers
    the latest call with its id (ids are reused in some recordings); a message answering
    several calls is shared among them."""
    latest: dict[str, int] = {}
    found: dict[tuple[int, str], int] = {}
    for position, message in enumerate(messages):
        if message.get("role") == "assistant":
            for call_id, _, _ in calls_made(message):
                latest[call_id] = position
        answered = [i for i in result_ids(message) if i in latest]
        if not answered:
            continue
        share = estimate_message_tokens(message, family=family) // len(answered)
        for call_id in answered:
            key = (latest[call_id], call_id)
            found[key] = found.get(key, 0) + share
    return found
