"""What an escalation may not touch: the rungs' protection and the fit pass's floor.

The floor is what a provider needs to read the conversation at all: system messages, the
first and latest human prompt, retained envelopes, an unanswered call with its tail, the
latest assistant message when it carries thinking or calls, and the opening thinking round
of the turn the provider reads as the active one (``turn_opening``, read by ``_turn_rule``).
The rungs also keep the latest tool results and the rest of their turns.
"""

from __future__ import annotations

__all__ = [
    "LadderPolicy",
    "Protection",
    "is_reminder",
    "newest",
    "prompts_and_opening",
    "protected_positions",
    "rest_of_turns",
    "turn_opening",
]

from dataclasses import dataclass

from ..history._history import Facts, HistoryIndex


@dataclass(frozen=True, slots=True)
class LadderPolicy:
    protected_recent: float
    protected_tool_results: int
    truncate_chars: int


@dataclass(frozen=True, slots=True)
class Protection:
    keep: frozenset[int]
    """Positions no rung may touch (the share-dependent recent window is added per rung)."""
    floor: frozenset[int]
    """Positions not even the fit pass may touch."""


def protected_positions(
    index: HistoryIndex,
    policy: LadderPolicy,
    extra: frozenset[int],
    open_tail: int | None,
) -> Protection:
    """What the rungs keep, and the smaller floor that even the fit pass keeps."""
    facts = index.facts
    floor: set[int] = set(extra)
    floor.update(prompts_and_opening(index))
    floor.update(index.loaded_tool_positions)
    floor.update(index.system_positions)
    if open_tail is not None:
        floor.add(open_tail)
        floor.update(index.pairing.results_of.get(open_tail, ()))
    latest = next((i for i in range(len(facts) - 1, -1, -1) if facts[i].role == "assistant"), None)
    if latest is not None and (facts[latest].thinking or facts[latest].calls):
        # An active tool loop needs its latest round (and its thinking) exactly as sent.
        floor.add(latest)
    keep = set(floor)
    count = policy.protected_tool_results
    if count:
        orphans = index.pairing.orphans
        if count > 0:  # the newest ``count`` tool results that are not orphans, ascending
            recent_results: list[int] = []
            for i in reversed(index.tool_result_positions):
                if len(recent_results) == count:
                    break
                if i not in orphans:
                    recent_results.append(i)
            recent_results.reverse()
        else:
            results = [i for i in index.tool_result_positions if i not in orphans]
            recent_results = results[-count:]
        keep.update(recent_results)
        keep.update(rest_of_turns(index, recent_results))
    return Protection(keep=frozenset(keep), floor=frozenset(floor))


def turn_opening(index: HistoryIndex) -> set[int]:
    """The opening of the turn the provider reads as the active one, when it must stay.

    With thinking on (the latest turn's opener carries thinking), the provider checks that
    the active turn's first assistant message starts with its thinking block, and it finds
    that turn after the last user turn that carries no tool result (``_turn_rule``). So that
    message stays, and so does the result-free user turn before it: its prompts (a hook
    reminder when no person typed any), and the answer that user turn follows, or it would
    merge into the user turn before that answer, which may carry a tool result (a prompt
    typed right after one). Without the opener another message would open the turn. When
    the history ends in hook reminders after an answer, they and the answer stay whether
    thinking is on or not: the next assistant message opens the turn after them, perhaps with
    thinking, and decisions outlive this request (before a prompt, ``newest`` pins the answer).
    """
    facts, turns = index.facts, index.turns
    turn = turns.active()
    latest = turns.last_opener
    prompts = [p for p in turn.anchor if facts[p].human]
    reminders_last = bool(turn.anchor) and turn.opener is None and not prompts
    if not reminders_last and (latest is None or not facts[latest].thinking):
        return set()
    kept = {*(prompts or turn.anchor[-1:])}
    kept.update(p for p in (turn.follows, turn.opener) if p is not None)
    kept.update(_rounds_merged_into(index, turn.opener))
    return kept


def _rounds_merged_into(index: HistoryIndex, opener: int | None) -> set[int]:
    """The calls whose rounds a user message of the active turn merges into, when an
    assistant message without thinking follows that user message.

    A prompt or reminder right after a call (or its results) joins that round's user turn:
    the provider reads the active turn on through it. Left out, the round would leave that
    message a user turn of its own, and the active turn would start after it, with the
    assistant message that follows, which has no thinking to open it.
    """
    if opener is None:
        return set()
    facts, pairing = index.facts, index.pairing
    kept: set[int] = set()
    previous: int | None = None
    heads: set[int] = set()  # rounds merged into by the user messages since the last answer
    for position in range(opener, len(facts)):
        fact = facts[position]
        if fact.role == "system" or fact.display_only or position in pairing.orphans:
            continue
        if fact.role == "assistant":
            if heads and not fact.thinking:
                kept.update(heads)
            heads = set()
        elif not fact.tool_result and previous is not None:
            before = facts[previous]
            if before.calls:
                heads.add(previous)
            elif before.tool_result and previous in pairing.owner_of:
                heads.add(pairing.owner_of[previous])
        previous = position
    return kept


def prompts_and_opening(index: HistoryIndex) -> set[int]:
    """The first and the latest human prompt and the active turn's opening (``turn_opening``):
    what a view needs of the history's turns for the provider and ``check_view`` to read it.

    The latest prompt's own first round stays too when it carries thinking: typed right after
    a result, the prompt continues an older turn for the provider, but that round is the one
    the person is waiting on (hook reminders after the prompt merge into its user turn).
    """
    facts, humans = index.facts, index.human_positions
    kept = turn_opening(index)
    if humans:
        kept.update((humans[0], humans[-1]))
        after = (p for p in range(humans[-1] + 1, len(facts)) if not _merges(facts[p]))
        first = next(after, None)
        if first is not None and facts[first].role == "assistant" and facts[first].thinking:
            kept.add(first)
    return kept


def _merges(fact: Facts) -> bool:
    return fact.role == "system" or is_reminder(fact)


def is_reminder(fact: Facts) -> bool:
    """A user-role message no person typed: the provider merges it into the turn around it.

    A display-only row is never sent, so like a reminder it neither opens nor ends a turn.
    """
    return fact.display_only or (fact.role == "user" and not fact.human and not fact.tool_result)


def newest(index: HistoryIndex) -> int | None:
    """The newest message the next prompt will follow, unless it is a tool result (its call
    is the floor's anyway).

    Decisions outlive this request: the next prompt will follow that message (through any
    hook reminders after it, which merge into its turn) and must not find it gone, or it
    would land right after whatever round came before it.
    """
    facts = index.facts
    newest = next(
        (
            i
            for i in range(len(facts) - 1, -1, -1)
            if facts[i].role != "system" and not is_reminder(facts[i])
        ),
        None,
    )
    if newest is None or facts[newest].tool_result:
        return None
    return newest


def rest_of_turns(index: HistoryIndex, positions: list[int]) -> set[int]:
    """Everything from each of ``positions`` up to the next human prompt.

    A kept tool round whose turn lost its closing answer would put the next human prompt
    right after a tool result: the provider would then read that old round as part of the
    new turn (and refuse it when thinking is on).
    """
    facts = index.facts
    covered: set[int] = set()
    reach = -1
    for start in positions:
        position = max(start, reach)
        while position < len(facts) and not facts[position].human:
            covered.add(position)
            position += 1
        reach = position
    return covered
