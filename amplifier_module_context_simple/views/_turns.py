"""Turn mending: no human prompt may land inside a tool round the history had closed.

Consecutive user-role turns merge at the provider, so a prompt that follows a tool result in
the view (hook reminders in between merge too) where the history had something else before it
is read as part of that old round, and with thinking on the request is refused. The opening
of the turn the provider reads as the active one (``_protection.turn_opening``) is never
mended away, and the decisions kept after a history rewrite are made to show it again
(``after_rewrite``).
"""

from __future__ import annotations

__all__ = ["after_rewrite", "mend_turns"]

from ..history._history import HistoryIndex
from ._decisions import Decisions
from ._protection import is_reminder, prompts_and_opening, turn_opening
from ._working import WorkingPlan


def mend_turns(
    plan: WorkingPlan, protected: frozenset[int], keep_chars: int, open_tail: int | None
) -> None:
    """Make sure no human prompt lands inside a tool round the history had closed.

    Consecutive user-role turns merge at the provider, so a prompt that now follows a tool
    result (with nothing but hook reminders in between) where the history had something else
    before it would be read as part of that round. The prompt is left out too when nothing
    protects it; otherwise what was removed right before it comes back.
    """
    index = plan.index
    facts, pairing = index.facts, index.pairing
    # Whatever the caller protects, the active turn's opening stays: the provider reads the
    # turn from it (``turn_opening``).
    protected = protected.union(turn_opening(index))
    orphans, owner_of = pairing.orphans, pairing.owner_of
    # Never shown, never counted: left out, these open no gap.
    silent = orphans.union(index.system_positions)
    in_round = False  # the last message rendered ends a tool round
    round_head = -1  # the call (or result) that opened that round
    gap = False  # something between that round and here is no longer shown
    last = -1
    # Only the shown messages are visited (a compacted history is mostly left out, and the
    # walk runs on every escalation); what was left out between two of them is a gap if any
    # of it counts. ``plan.shown`` reads ``removed`` as the walk goes.
    for position in plan.shown():
        if in_round and not gap and position - last > 1:
            # A left-out hook reminder opens no gap either: it merged into the user turn
            # the prompt is part of, so the prompt followed the round in the history too.
            gap = any(
                p not in silent and not is_reminder(facts[p]) for p in range(last + 1, position)
            )
        last = position
        if position in silent or position in owner_of:
            continue  # an owned result is rendered together with its call
        fact = facts[position]
        if fact.human and in_round and gap:
            if position not in protected and position != plan.pinned:
                plan.usage -= plan.rendered_tokens(position, keep_chars)
                plan.take_out(position)
                plan.changed = True
                continue
            _restore_before(plan, position, keep_chars, round_head)
            # Restored, the prompt follows what it followed in the history.
            in_round = gap = False
            continue
        if fact.calls:
            kept = [r for r in pairing.results_of.get(position, ()) if r not in plan.removed]
            in_round = bool(kept) or (position != open_tail and bool(pairing.missing(position)))
            round_head, gap = position, False
        elif fact.tool_result:
            in_round, gap = True, False  # a result whose call is gone is never rendered
            round_head = position
        elif not is_reminder(fact):
            in_round = gap = False  # hook reminders merge into the round; anything else ends it


def _restore_before(plan: WorkingPlan, position: int, keep_chars: int, reason: int) -> None:
    """Show again what sits right before ``position`` in the history, unit by unit.

    A restored prompt would itself sit inside the round (``reason``, its head), so the walk
    goes on back until it restores something that ends the round (or finds it already shown).
    Hook reminders merge into the prompt's turn, shown or not: the walk looks past them.
    """
    index = plan.index
    facts = index.facts
    while True:
        previous = next(
            (
                p
                for p in range(position - 1, -1, -1)
                if facts[p].role != "system"
                and p not in index.pairing.orphans
                and not is_reminder(facts[p])
            ),
            None,
        )
        if previous is None or previous not in plan.removed:
            return
        head = index.pairing.owner_of.get(previous, previous)
        for p in (head, *index.pairing.results_of.get(head, ())):
            if p in plan.removed:
                plan.put_back(p, reason)
                plan.usage += plan.rendered_tokens(p, keep_chars)
                plan.changed = True
        if not facts[previous].human:
            return  # restored a message that ends the round: the prompt no longer lands in it
        position = previous


def after_rewrite(
    index: HistoryIndex, decisions: Decisions, position: int, keep_chars: int
) -> Decisions:
    """The decisions to keep for a history rewritten from ``position`` on (``index`` synced).

    What was decided about the messages there no longer applies (``Decisions.before``). The
    part before keeps its decisions, but the rewrite may have moved the turns the provider
    reads into it: with a prompt gone, an older prompt is the latest one, and the active turn
    may now open with a round an earlier escalation left out. Those are shown again, whole,
    and mended so that no restored prompt lands inside a round the history had closed.
    """
    kept = decisions.before(position)
    needed = prompts_and_opening(index)
    for p in list(needed):
        # A call comes back with its results: the render never shows it without them.
        needed.update(index.pairing.results_of.get(p, ()))
    touched = {p for p in needed if p in kept.removed or p in kept.truncated or p in kept.stubbed}
    if not touched:
        return kept
    plan = WorkingPlan(index, kept.without(frozenset(touched)), frozenset(), 0)
    mend_turns(plan, frozenset(needed), keep_chars, None)
    return plan.decisions(kept.level, kept.escalations)
