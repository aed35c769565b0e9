"""When to escalate: the moments where a prefix edit costs least, read from the history alone.

Every escalation edits the prompt prefix: the provider writes everything after the edit into
its cache again, and a model whose thinking is bound to its prompt drops every thinking block
after it. Where the edit lands decides what it costs:

- **at a turn's first request** (right after a human prompt) only finished turns' reasoning
  is lost, while inside a tool loop the active turn loses its own. So when a turn starts and
  the turn's expected growth would carry the view over the trigger before the turn ends, the
  escalation happens now, deep enough that a whole number of turns fits. (The growth that
  counts is what the turn's own requests carry: its closing answer is first sent by the next
  turn.) An escalation that cannot wait (the view is over the trigger already) and lands at
  a turn start aims the same way, or the turn escalates again inside its loop. It may go deeper
  than one inside a loop: the latest tool results it would otherwise protect belong to
  finished turns (``turn_start_policy``). Without that, an escalation at every turn start
  fits fewer turns than one at the trigger and repeats sooner, and the rule costs more
  rewrites than it moves. When even that leaves no room for the turn's growth below the
  trigger, the turn would escalate inside its loop anyway, and the rule does not fire
  (``leaves_room_for_turn``);
- **on a cold cache** (the previous response is older than the provider's cache lifetime)
  the next request is written at full price anyway, so a view already near the trigger is
  reduced now, for free.

Everything here is a function of the history as indexed (positions, estimates, the
``metadata.timestamp`` admission records): a resumed session that re-derives its decisions
reaches the same moments as the session that wrote the history. The trigger and the hard
limit stay the fallback: a turn that outgrows its prediction escalates inside its loop.
"""

from __future__ import annotations

__all__ = [
    "ESCALATION_REASONS",
    "Moment",
    "Timing",
    "TurnGrowth",
    "cache_cold",
    "escalation_timing",
    "leaves_room_for_turn",
    "moment_of",
    "thinking_after",
    "turn_start_policy",
]

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..history._history import Facts, HistoryIndex
from ..views._decisions import Decisions
from ..views._protection import LadderPolicy, is_reminder
from ..vocabulary._messages import is_mapping, thinking_blocks
from ._config import ContextConfig
from ._thresholds import Thresholds

ESCALATION_REASONS = ("threshold", "over_budget", "turn_start", "cold_cache")
"""Why an escalation happened: the view crossed the trigger, it was over the hard limit, a
turn started that would cross the trigger, or the provider's cache had gone cold."""

FINISHED_TURNS_READ = 3
"""How many of the latest finished turns predict the next one (the largest of them)."""
FIRST_TURN_GROWTH_SHARE = 0.15
"""Before any turn has finished, a turn is assumed to bring this share of the usable budget."""


class Moment:
    """What the history says about the request being planned (its last message ends it).

    Each figure is read from the history the first time a rule asks for it: most requests
    are far from every rule and never need the turn's growth or the timestamps. (Cached by
    hand: ``functools.cached_property`` takes a lock on every read, and a resume's walk asks
    at thousands of request points.)
    """

    __slots__ = ("_idle_read", "_idle_seconds", "_index", "_turn_growth", "_turn_start", "_usable")

    def __init__(self, index: HistoryIndex, usable: int) -> None:
        self._index = index
        self._usable = usable
        self._turn_start: bool | None = None
        self._turn_growth: TurnGrowth | None = None
        self._idle_read = False
        self._idle_seconds: float | None = None

    @property
    def turn_start(self) -> bool:
        """The request follows a human prompt that opens a turn of its own."""
        if self._turn_start is None:
            self._turn_start = _turn_start(self._index)
        return self._turn_start

    @property
    def turn_growth(self) -> int:
        """Estimated tokens the turn now starting is expected to add to its own requests
        (0 when none starts)."""
        return self._growth().requests

    @property
    def turn_cycle(self) -> int:
        """Estimated tokens a whole turn adds, its prompt and closing answer included: what
        each further turn after the one now starting takes (0 when none starts)."""
        return self._growth().cycle

    def _growth(self) -> TurnGrowth:
        if self._turn_growth is None:
            self._turn_growth = (
                _turn_growth(self._index, self._usable) if self.turn_start else NO_GROWTH
            )
        return self._turn_growth

    @property
    def idle_seconds(self) -> float | None:
        """Seconds from the previous response to the latest message (None when unknown)."""
        if not self._idle_read:
            self._idle_seconds, self._idle_read = _idle(self._index), True
        return self._idle_seconds


def moment_of(index: HistoryIndex, usable: int) -> Moment:
    """The moment of a request over the history ``index`` holds now."""
    return Moment(index, usable)


def _turn_start(index: HistoryIndex) -> bool:
    facts = index.facts
    last = next(
        (
            p
            for p in range(len(facts) - 1, -1, -1)
            if facts[p].role != "system" and not is_reminder(facts[p])
        ),
        None,
    )
    # A prompt in a user turn that carries results (typed right after a tool result) merges
    # into that round: the provider reads the active turn on (``_turn_rule``).
    return last is not None and facts[last].human and not index.turns.in_round


@dataclass(frozen=True, slots=True)
class TurnGrowth:
    """What a turn is expected to add (estimate units)."""

    requests: int
    """To its own requests: from its prompt up to its last request. Its closing answer is
    first sent by the next turn, whose start already counts it."""
    cycle: int
    """As a whole, from its prompt to its closing answer."""


NO_GROWTH = TurnGrowth(0, 0)


def _turn_growth(index: HistoryIndex, usable: int) -> TurnGrowth:
    """The largest of the latest finished turns' growth (from a prompt up to the next one),
    or the first-turn default when no turn has finished yet."""
    latest = index.human_positions[-FINISHED_TURNS_READ - 1 :]
    facts = index.facts
    grown = [_grown(facts, start, end) for start, end in itertools.pairwise(latest)]
    if not grown:
        first = math.ceil(FIRST_TURN_GROWTH_SHARE * usable)
        return TurnGrowth(first, first)
    return TurnGrowth(max(g.requests for g in grown), max(g.cycle for g in grown))


def _grown(facts: Sequence[Facts], start: int, end: int) -> TurnGrowth:
    last = end
    # The closing answers, and display rows (no role) among them: no request of the turn
    # sends them.
    while (
        last - 1 > start and facts[last - 1].role in ("assistant", "") and not facts[last - 1].calls
    ):
        last -= 1
    requests = sum(facts[p].tokens for p in range(start + 1, last))
    closing = sum(facts[p].tokens for p in range(last, end))
    return TurnGrowth(requests, facts[start].tokens + requests + closing)


def _idle(index: HistoryIndex) -> float | None:
    """Seconds between the previous response (the latest assistant message before the last
    message) and the last message, from their admission timestamps."""
    facts = index.facts
    if len(facts) < 2:
        return None
    latest = _timestamp(facts[-1].message)
    if latest is None:
        return None
    for p in range(len(facts) - 2, -1, -1):
        if facts[p].role == "assistant":
            answered = _timestamp(facts[p].message)
            return None if answered is None else (latest - answered).total_seconds()
    return None


def thinking_after(index: HistoryIndex, decisions: Decisions, edit: int) -> int:
    """Thinking blocks the view still shows from history position ``edit`` on: what a model
    whose thinking is bound to its prompt drops once the prefix changes there."""
    facts = index.facts
    # Only what the decisions show is walked: a compacted history leaves out thousands.
    return sum(
        thinking_blocks(facts[p].message)
        for p in decisions.shown(max(edit, 0), len(facts))
        if facts[p].thinking
    )


def _timestamp(message: object) -> datetime | None:
    # A message written straight into the history may be any mapping (the index accepts it).
    metadata = message.get("metadata") if is_mapping(message) else None
    stamp = metadata.get("timestamp") if is_mapping(metadata) else None
    if not isinstance(stamp, str):
        return None
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    # A naive stamp cannot be compared with an aware one: it tells nothing.
    return parsed if parsed.tzinfo is not None else None


@dataclass(frozen=True, slots=True)
class Timing:
    """Whether a request escalates, why, and the real-size figure it aims for."""

    reason: str | None
    """One of ``ESCALATION_REASONS``, or None: the view goes out as the decisions have it."""
    real_target: int
    moment: Moment
    thresholds: Thresholds
    """The figures it was decided against."""
    for_turn: bool = False
    """It lands at a turn's first request and aims to leave that turn room (``turn_aim``),
    whatever its reason: its rungs follow ``turn_start_policy``."""


def escalation_timing(
    config: ContextConfig,
    moment: Moment,
    limits: Thresholds,
    *,
    used: int,
    over_limit: bool,
    to_real: Callable[[int], int],
) -> Timing:
    """Decide whether a request escalates, in real-size units (``used`` against the trigger
    of ``limits``); ``to_real`` converts the moment's turn growth (estimate units) into them.

    An escalation at a turn's first request, whatever its reason, aims low enough that the
    turn and a whole number of turns after it fit below the trigger (``Thresholds.turn_aim``):
    the next one then lands at a turn start again instead of inside a loop.
    """
    trigger, target = limits.trigger, limits.target
    growth = (
        to_real(moment.turn_growth) if config.escalate_at_turn_start and moment.turn_start else 0
    )
    aim = limits.turn_aim(growth, to_real(moment.turn_cycle)) if growth > 0 else None

    def escalating(reason: str) -> Timing:
        if aim is None:
            return Timing(reason, target, moment, limits)
        return Timing(reason, aim, moment, limits, for_turn=True)

    if used >= trigger:
        return escalating("threshold")
    if over_limit:
        return escalating("over_budget")
    if aim is not None and used + growth > trigger:
        return escalating("turn_start")
    # A turn bigger than the deepest aim leaves room for escalates inside its loop whatever
    # is done now: escalating at its start as well would only add an edit.
    # The distance first: the timestamps are parsed only for a view near the trigger.
    if config.cache_ttl_seconds > 0 and used >= limits.cold_floor and cache_cold(config, moment):
        return escalating("cold_cache")
    return Timing(None, target, moment, limits)


def turn_start_policy(policy: LadderPolicy) -> LadderPolicy:
    """What the rungs protect at a turn-start escalation: the configured recent share and
    the floor, but not the latest tool results. At a turn's first request those belong to
    finished turns, and keeping them would leave the escalation no deeper than the trigger's,
    so it would fit fewer whole turns and be repeated sooner."""
    return replace(policy, protected_tool_results=0)


def leaves_room_for_turn(timing: Timing, reached: int) -> bool:
    """Whether an escalation of ``timing`` that brings the view to ``reached`` (estimate
    units) is worth its edit: a turn-start one only when it leaves the turn's expected growth
    room below the trigger. When it does not, the turn escalates inside its loop whatever is
    done at its start, and escalating there as well only adds an edit."""
    if timing.reason != "turn_start":
        return True
    return reached + timing.moment.turn_growth <= timing.thresholds.trigger_estimate


def cache_cold(config: ContextConfig, moment: Moment) -> bool:
    """The provider's cache has expired by the request of ``moment``: the previous response
    is at least ``cache_ttl_seconds`` old (never, with a lifetime of 0 or unknown times)."""
    ttl = config.cache_ttl_seconds
    idle = moment.idle_seconds if ttl > 0 else None
    return idle is not None and idle >= ttl
