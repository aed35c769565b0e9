"""What an escalation may not touch: the rungs' protection and the fit pass's floor.

The floor is what a provider needs to read the conversation at all: system messages, the
first and latest human prompt, retained envelopes, an unanswered call with its tail, the
latest assistant message when it carries thinking or calls, and the opening thinking round
of the active turn (with no human prompt at all, the conversation's first round). The rungs
also keep the latest tool results and the rest of their turns.
"""

from __future__ import annotations

__all__ = [
    "LadderPolicy",
    "Protection",
    "follows_result",
    "is_reminder",
    "newest",
    "protected_positions",
    "rest_of_turns",
]

from dataclasses import dataclass

from ._history import Facts, HistoryIndex


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
    humans = index.human_positions
    if humans:
        floor.update((humans[0], humans[-1]))
        # The provider reads the active turn from its opening round; with thinking on, that
        # round carries the thinking block the request must start the final turn with. A
        # prompt typed right after a tool result merges into that round's user turn, so the
        # turn the provider checks may open before it: keep that prompt and its opener too.
        # Hook reminders right after the prompt merge into its user turn: the opener is the
        # first message past them. When every prompt follows a round, none opens a turn of its
        # own: the provider reads the active turn from the start of the conversation.
        anchor = next((h for h in reversed(humans) if not follows_result(index, h)), -1)
        starts = {anchor, humans[-1]}
    else:
        starts = {-1}  # no prompt at all: the active turn opens the conversation
    for prompt in starts:
        opener = next(
            (
                p
                for p in range(prompt + 1, len(facts))
                if facts[p].role != "system" and not is_reminder(facts[p])
            ),
            None,
        )
        if opener is not None and facts[opener].role == "assistant" and facts[opener].thinking:
            floor.update(p for p in (prompt, opener) if p >= 0)
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


def follows_result(index: HistoryIndex, position: int) -> bool:
    """Whether the provider reads ``position`` inside the tool round before it.

    Hook reminders between the two are user turns too and merge with them.
    """
    facts = index.facts
    for p in range(position - 1, -1, -1):
        fact = facts[p]
        if fact.role == "system" or p in index.pairing.orphans:
            continue
        if is_reminder(fact):
            continue
        return fact.tool_result or bool(fact.calls and index.pairing.missing(p))
    return False


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
