"""The rules of turn mending (``_turns``) and of the projection (``_project``), pinned one by one.

Issue 21 §6: injected bugs in these modules went unnoticed. Mending is tested on the pure core
(a history index, a working plan and an explicit protected set), so each rule is seen on its
own; the projection through the manager's views and ``view_repairs`` where a session shows the
rule, and on ``project`` itself where only a byte count does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise
from types import MappingProxyType
from typing import Any

import pytest

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)
from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.history._ids import IdAssigner
from amplifier_module_context_simple.history._project import project
from amplifier_module_context_simple.views._decisions import Decisions
from amplifier_module_context_simple.views._ladder import (
    FIT_LEVEL,
    STUB_MIN_CHARS,
    LadderPolicy,
    Step,
    plan_escalation,
)
from amplifier_module_context_simple.views._turns import mend_turns
from amplifier_module_context_simple.views._working import WorkingPlan

Msg = dict[str, Any]


def prompt(body: str) -> Msg:
    return {"role": "user", "content": body}


def answer(body: str) -> Msg:
    return {"role": "assistant", "content": body}


def call(call_id: str) -> Msg:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "tool": "read"}]}


def result(call_id: str) -> Msg:
    return {"role": "tool", "tool_call_id": call_id, "content": f"output of {call_id}"}


def plan_for(messages: Sequence[Msg], removed: set[int]) -> WorkingPlan:
    index = HistoryIndex(estimate_message_tokens)
    index.sync(list(messages), None)
    usage = sum(f.tokens for i, f in enumerate(index.facts) if i not in removed)
    return WorkingPlan(index, Decisions(removed=frozenset(removed)), frozenset(), usage)


def mend(messages: Sequence[Msg], removed: set[int], protected: set[int]) -> WorkingPlan:
    plan = plan_for(messages, removed)
    mend_turns(plan, frozenset(protected), 250, None)
    return plan


# --- mending ----------------------------------------------------------------------------------


def test_a_prompt_that_lost_its_place_is_taken_out_and_the_plan_says_so() -> None:
    # H0, c1, T1, [answer left out], H1: H1 would land in c1's round.
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("H1")]
    plan = plan_for(messages, {3})
    before = plan.usage
    mend_turns(plan, frozenset({0}), 250, None)
    assert 4 in plan.removed
    assert plan.changed
    assert plan.usage == before - estimate_message_tokens(messages[4])


def test_a_protected_prompt_brings_back_the_whole_unit_before_it() -> None:
    # H0, c1, T1, [c2, T2 left out], P (protected): the unit before P comes back, call and
    # result together, even though the walk meets the result first.
    messages = [prompt("H0"), call("c1"), result("c1"), call("c2"), result("c2"), prompt("P")]
    plan = plan_for(messages, {3, 4})
    before = plan.usage
    mend_turns(plan, frozenset({0, 5}), 250, None)
    assert plan.removed == set()
    assert plan.usage == before + sum(estimate_message_tokens(m) for m in messages[3:5])


def test_a_system_message_before_a_prompt_is_looked_past_to_what_the_prompt_follows() -> None:
    # H0, c1, T1, [A], S, P (protected): S is sent apart from the turns, so P follows A.
    system = {"role": "system", "content": "Mind the tests."}
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), system, prompt("P")]
    plan = mend(messages, {3}, {0, 5})
    assert plan.removed == set()


def test_a_history_that_opens_with_a_call_has_its_answer_restored_too() -> None:
    # c0 (no result yet), [A], P (protected): the answer at position 1 comes back.
    messages = [call("c0"), answer("A"), prompt("P")]
    plan = mend(messages, {1}, {2})
    assert plan.removed == set()


def test_a_shortened_result_left_out_and_restored_is_counted_shortened() -> None:
    # H0, c1, T1, c2, T2 (shortened, then left out with its call), P (protected).
    long_result = {"role": "tool", "tool_call_id": "c2", "content": "output line\n" * 400}
    messages = [prompt("H0"), call("c1"), result("c1"), call("c2"), long_result, prompt("P")]
    plan = plan_for(messages, set())
    plan.truncate(4, estimate_message_tokens(long_result))
    plan.take_out(3)
    plan.take_out(4)
    before = plan.usage
    mend_turns(plan, frozenset({0, 5}), 250, None)
    assert plan.removed == set() and 4 in plan.truncated
    shortened = plan.forms.truncated_tokens(4, estimate_message_tokens(long_result), 250)
    assert shortened < estimate_message_tokens(long_result)
    assert plan.usage == before + estimate_message_tokens(messages[3]) + shortened


def test_after_a_restore_the_walk_starts_afresh() -> None:
    # H0, c1, T1, [A], P (protected: restores A), H2: H2 follows P as in the history.
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("P"), prompt("H2")]
    plan = mend(messages, {3}, {0, 4})
    assert plan.removed == set()


def test_a_shown_call_whose_results_are_all_left_out_closes_no_round() -> None:
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("H1")]
    plan = mend(messages, {2, 3}, {0})
    assert 4 not in plan.removed


def test_a_call_round_right_before_a_prompt_is_a_fresh_round() -> None:
    # H0, c1, T1, [A], c2, T2, H1: the gap before c2 is not a gap before H1.
    messages = [
        prompt("H0"), call("c1"), result("c1"), answer("A"), call("c2"), result("c2"),
        prompt("H1"),
    ]  # fmt: skip
    plan = mend(messages, {3}, {0})
    assert 6 not in plan.removed


def test_an_answer_ends_the_round() -> None:
    # H0, c1, T1, A, [B], H1: H1 follows an answer, whatever was left out after it.
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), answer("B"), prompt("H1")]
    plan = mend(messages, {4}, {0})
    assert 5 not in plan.removed


def test_a_prompt_right_after_its_round_is_never_taken_out() -> None:
    messages = [prompt("H0"), call("c1"), result("c1"), prompt("H1")]
    plan = mend(messages, set(), {0})
    assert plan.removed == set()
    assert not plan.changed


def escalate(
    messages: Sequence[Msg],
    *,
    recent: float,
    results: int = 0,
    extra: frozenset[int] = frozenset(),
) -> tuple[WorkingPlan, list[Step]]:
    """Every step of an escalation to nothing, from no decisions."""
    plan = plan_for(messages, set())
    policy = LadderPolicy(
        protected_recent=recent, protected_tool_results=results, truncate_chars=250
    )
    steps = plan_escalation(
        plan.index, plan.base, usage=plan.usage, target=0, policy=policy, protected_extra=extra
    )
    return plan, list(steps)


def reminder(body: str) -> Msg:
    return {"role": "user", "content": body, "metadata": {"source": "hook"}}


def test_every_prompt_that_lost_its_place_is_taken_out_not_only_the_first() -> None:
    # H0, c1, T1, [A], H1, c2, T2, [B], H2: both prompts would land in a round.
    messages = [
        prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("H1"),
        call("c2"), result("c2"), answer("B"), prompt("H2"),
    ]  # fmt: skip
    plan = mend(messages, {3, 7}, {0})
    assert plan.removed == {3, 4, 7, 8}


def test_the_walk_goes_on_after_a_restore() -> None:
    # H0, c1, T1, [A], P (protected: A comes back), c2, T2, [B], H2: H2 still lands in c2's round.
    messages = [
        prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("P"),
        call("c2"), result("c2"), answer("B"), prompt("H2"),
    ]  # fmt: skip
    plan = mend(messages, {3, 7}, {0, 4})
    assert plan.removed == {7, 8}


def test_a_shown_reminder_does_not_close_a_gap_opened_before_it() -> None:
    # H0, c1, T1, [A], R1, [R2], P: A's absence opened the gap; R1 merges into the round and the
    # left-out R2 opens no gap of its own, so P still lands in c1's round.
    messages = [
        prompt("H0"), call("c1"), result("c1"), answer("A"), reminder("R1"), reminder("R2"),
        prompt("P"),
    ]  # fmt: skip
    plan = mend(messages, {3, 5}, {0})
    assert 6 in plan.removed


def test_a_shortened_prompt_taken_out_gives_back_what_its_short_form_cost() -> None:
    # H0, c1, T1, [A], H1 (shortened): taking H1 out frees its shortened estimate.
    long_prompt = prompt("please read this\n" * 400)
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), long_prompt]
    plan = plan_for(messages, set())
    full = estimate_message_tokens(long_prompt)
    plan.truncate(4, full)
    plan.take_out(3)
    shortened = plan.forms.truncated_tokens(4, full, 250)
    assert shortened < full
    before = plan.usage
    mend_turns(plan, frozenset({0}), 250, None)
    assert 4 in plan.removed
    assert plan.usage == before - shortened


# --- projection -------------------------------------------------------------------------------


async def view_of(messages: Sequence[Msg]) -> tuple[list[Msg], SimpleContextManager]:
    manager = SimpleContextManager()
    for message in messages:
        await manager.add_message(message)
    view = await manager.get_messages_for_request(token_budget=100_000)
    assert check_view(view, history=manager.messages) == []
    return view, manager


async def test_idless_calls_and_results_get_distinct_ids_in_order_and_say_so() -> None:
    calls = [{"type": "tool_use", "name": f"read_{i}", "input": {}} for i in range(2)]
    results = [{"type": "tool_result", "content": f"out {i}"} for i in range(2)]
    view, manager = await view_of(
        [
            prompt("go"),
            {"role": "assistant", "content": calls},
            {"role": "user", "content": results},
        ]
    )
    sent_calls = [b["id"] for b in view[1]["content"]]
    sent_results = [b["tool_call_id"] for b in view[2]["content"]]
    assert len(set(sent_calls)) == 2
    assert sent_results == sent_calls
    assert "id-derived: message at position 1" in manager.view_repairs
    assert "id-derived: message at position 2" in manager.view_repairs


IDLESS_CALL: Msg = {
    "role": "assistant",
    "content": [{"type": "tool_use", "name": "ls", "input": {}}],
}


async def test_a_result_copying_an_id_the_module_made_up_answers_nothing() -> None:
    idless_result = {"role": "user", "content": [{"type": "tool_result", "content": "a.py"}]}
    view, _ = await view_of([prompt("go"), IDLESS_CALL, idless_result])
    made_up = view[1]["content"][0]["id"]
    # A result spelling that id literally answers no call the module named so, whether the call
    # has its own result or not: the copy is left out as an orphan.
    copy = {"role": "tool", "tool_call_id": made_up, "content": "stale copy"}
    for history in (
        [prompt("go"), IDLESS_CALL, idless_result, copy, answer("done")],
        [prompt("go"), IDLESS_CALL, copy, answer("done")],
    ):
        view, _ = await view_of(history)
        assert view[1]["content"][0]["id"] == made_up
        assert "stale copy" not in json.dumps(view)


@pytest.mark.parametrize("unusable", [7, True, ["x"]], ids=repr)
async def test_a_result_whose_id_is_no_text_answers_the_waiting_idless_call(unusable: Any) -> None:
    odd_result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": unusable, "content": "a.py"}],
    }
    view, _ = await view_of([prompt("go"), IDLESS_CALL, odd_result, answer("done")])
    assert view[2]["content"][0]["tool_call_id"] == view[1]["content"][0]["id"]
    assert "a.py" in json.dumps(view[2])


async def test_a_tool_message_naming_its_call_by_tool_use_id_answers_it() -> None:
    by_tool_use_id = {"role": "tool", "tool_use_id": "c1", "content": "out"}
    view, manager = await view_of([prompt("go"), call("c1"), by_tool_use_id, answer("done")])
    assert view[2]["tool_call_id"] == "c1" and view[2]["content"] == "out"
    assert any(r.startswith("field:") for r in manager.view_repairs)


async def test_a_foreign_call_carrying_its_id_as_tool_call_id_is_renamed_when_reused() -> None:
    def foreign(call_id: str) -> Msg:
        return {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": call_id}]}

    messages = [prompt("go"), foreign("x"), result("x"), foreign("x"), result("x")]
    view, _ = await view_of(messages)
    first, second = view[1]["tool_calls"][0], view[3]["tool_calls"][0]
    assert first.get("id", first.get("tool_call_id")) == "x"
    assert second["id"] != "x" and second["id"] == view[4]["tool_call_id"]


async def test_null_content_is_sent_empty_and_reported() -> None:
    view, manager = await view_of([prompt("go"), {"role": "assistant", "content": None}])
    assert view[1]["content"] == ""
    assert "null-content: message at position 1" in manager.view_repairs


async def test_a_mixed_result_block_keeps_its_output() -> None:
    block = {"type": "tool_result", "tool_use_id": "t1", "output": "the output"}
    call_block = {"type": "tool_use", "id": "t1", "name": "read", "input": {}}
    view, _ = await view_of(
        [
            prompt("go"),
            {"role": "assistant", "content": [call_block]},
            {"role": "user", "content": [block]},
        ]
    )
    assert view[2]["content"][0] == {
        "type": "tool_result",
        "tool_call_id": "t1",
        "output": "the output",
    }


async def test_call_arguments_that_are_no_json_object_are_kept_as_a_value() -> None:
    call_block = {"type": "tool_use", "id": "t1", "name": "run", "input": "make -j4"}
    view, _ = await view_of(
        [prompt("go"), {"role": "assistant", "content": [call_block]}, result("t1")]
    )
    assert view[1]["content"][0]["input"] == {"value": "make -j4"}


async def test_a_data_url_without_a_media_type_is_sent_as_png() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:;base64,iVBORw0KGgo="}}
    view, _ = await view_of([{"role": "user", "content": [{"type": "text", "text": "see"}, image]}])
    assert view[0]["content"][1]["source"]["media_type"] == "image/png"


@pytest.mark.parametrize("slack", [0, -1])
def test_an_unknown_block_is_sent_as_json_up_to_the_cap_exactly(slack: int) -> None:
    block = {"type": "x-trace", "spans": "s" * 100}
    size = len(json.dumps(block, sort_keys=True).encode())
    message = {"role": "user", "content": [block]}
    sent, kinds = project(message, IdAssigner().add(message, 0), json_cap=size + slack)
    text = sent["content"][0]["text"]
    if slack == 0:
        assert kinds == ("block-json",) and json.loads(text) == block
    else:
        assert kinds == ("block-placeholder",) and text.startswith("[x-trace block not shown")


# --- what mending restored (the ladder's removal) ---------------------------------------------


@pytest.mark.parametrize("round_shown", [True, False])
def test_a_restored_message_is_removable_once_its_round_is_gone(round_shown: bool) -> None:
    from amplifier_module_context_simple.views._ladder import _remove  # pyright: ignore[reportPrivateUsage]

    # H0, c1, T1, A (restored by mending: it keeps H1 out of c1's round), H1.
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("H1")]
    plan = plan_for(messages, set())
    plan.restored[3] = 1
    protected = {0, 4} | ({1, 2} if round_shown else set())
    _remove(plan, frozenset(protected), 0, 250)
    # While the round is shown, removing A would only undo the mending; once it is gone too,
    # A is history like any other.
    assert (3 in plan.removed) is not round_shown


def test_an_escalation_whose_only_change_is_a_restore_keeps_it() -> None:
    # H0, c1, T1, [A left out by earlier decisions], H1: H1 sits in c1's closed round. Every
    # message is protected (the recent window covers them all, nothing is long enough to
    # shorten), so no rung removes anything: mending's restore of A is the escalation's only
    # change, and it must still come out as a step or the view keeps H1 inside the round.
    messages = [prompt("H0"), call("c1"), result("c1"), answer("A"), prompt("H1")]
    plan = plan_for(messages, {3})
    policy = LadderPolicy(protected_recent=1.0, protected_tool_results=5, truncate_chars=250)
    steps = list(plan_escalation(plan.index, plan.base, usage=plan.usage, target=0, policy=policy))
    assert steps, "the restore was dropped: the view still shows H1 right after T1"
    shown = [p for p in range(len(messages)) if p not in steps[-1].decisions.removed]
    assert shown == [0, 1, 2, 3, 4]


def test_a_rewrite_that_makes_an_older_prompt_the_latest_restores_what_it_followed() -> None:
    from amplifier_module_context_simple.views._turns import after_rewrite

    # Decided while "third" (position 8) was the latest prompt: "second" and the answer before
    # it were left out. The rewrite takes "third" away; "second" is shown again, and so is the
    # answer, or "second" would land in the round a0.
    messages = [
        prompt("first"), call("a0"), result("a0"), answer("done a"),
        prompt("second"), call("b0"), result("b0"), answer("done b"),
    ]  # fmt: skip
    index = HistoryIndex(estimate_message_tokens)
    index.sync(messages, None)
    kept = after_rewrite(index, Decisions(removed=frozenset({3, 4}), level=5), 8, 250)
    assert kept.removed == set()
    assert kept.level == 5


def test_every_step_of_an_escalation_changes_what_the_view_shows() -> None:
    # A plain conversation has nothing to shorten: the shortening rungs after the first
    # removal change nothing, and must not repeat the step before them.
    messages = [
        m for t in range(30) for m in (prompt(f"ask {t} " * 40), answer(f"reply {t} " * 60))
    ]
    _, steps = escalate(messages, recent=0.2, results=5)
    shown = [
        (
            frozenset(s.decisions.removed),
            frozenset(s.decisions.truncated),
            frozenset(s.decisions.stubbed),
        )
        for s in steps
    ]
    assert len(steps) >= 2
    assert all(before != after for before, after in pairwise(shown))


def test_an_escalation_stops_at_the_rung_that_reaches_its_target_exactly() -> None:
    messages = [
        m for t in range(30) for m in (prompt(f"ask {t} " * 40), answer(f"reply {t} " * 60))
    ]
    plan = plan_for(messages, set())
    policy = LadderPolicy(protected_recent=0.2, protected_tool_results=5, truncate_chars=250)
    first = next(plan_escalation(plan.index, plan.base, usage=plan.usage, target=0, policy=policy))
    again = list(
        plan_escalation(plan.index, plan.base, usage=plan.usage, target=first.usage, policy=policy)
    )
    assert [s.usage for s in again] == [first.usage]


def test_the_newest_message_stays_whatever_the_rungs_would_take() -> None:
    # The next prompt will follow the closing answer: left out, the prompt would land right
    # after the round before it.
    messages = [
        prompt("H0"), call("c1"), result("c1"), answer("A " * 300), prompt("H1"),
        call("c2"), result("c2"), answer("B " * 300),
    ]  # fmt: skip
    _, steps = escalate(messages, recent=0.0)
    assert steps
    assert 7 not in steps[-1].decisions.removed


def test_a_protected_prompt_whose_answer_before_it_was_removed_gets_it_back() -> None:
    # H0, c1, T1 (protected), A1, P (protected), c2, T2, A2, H2: removing A1 would put P in
    # c1's round; P is protected, so A1 comes back rather than P going.
    messages = [
        prompt("H0"), call("c1"), result("c1"), answer("A1 " * 300), prompt("P"),
        call("c2"), result("c2"), answer("A2 " * 300), prompt("H2"),
    ]  # fmt: skip
    _, steps = escalate(messages, recent=0.0, extra=frozenset({1, 2, 4}))
    assert steps
    assert not {1, 2, 3, 4} & set(steps[-1].decisions.removed)


def test_the_last_rung_takes_out_stubs_an_earlier_escalation_left() -> None:
    # The stub is among the most recent messages, which the removal rungs keep: only the
    # last rung takes it.
    hook_note = {"role": "user", "content": "note " * 200, "metadata": {"source": "hook"}}
    messages = [prompt("H0"), answer("A0 " * 200), prompt("H1"), hook_note, answer("A1")]
    index = HistoryIndex(estimate_message_tokens)
    index.sync(messages, None)
    base = Decisions(stubbed=MappingProxyType({3: len("note " * 200)}))
    plan = WorkingPlan(index, base, frozenset(), sum(f.tokens for f in index.facts))
    policy = LadderPolicy(protected_recent=1.0, protected_tool_results=0, truncate_chars=250)
    steps = list(plan_escalation(index, base, usage=plan.usage, target=0, policy=policy))
    assert steps and 3 in steps[-1].decisions.removed


def test_a_shortened_result_the_removal_rung_brings_back_is_counted_shortened() -> None:
    # H0, c1, T1 (protected), c2, T2 (long: shortened first), P (protected), ...: removing
    # c2's group would put P in c1's round, so mending brings it back, shortened as it was.
    long_result = {"role": "tool", "tool_call_id": "c2", "content": "output line\n" * 400}
    messages = [
        prompt("H0"), call("c1"), result("c1"), call("c2"), long_result, prompt("P"),
        call("c3"), result("c3"), answer("A3 " * 300), prompt("H3"),
    ]  # fmt: skip
    plan, steps = escalate(messages, recent=0.0, extra=frozenset({1, 2, 5}))
    last = steps[-1].decisions
    assert {3, 4}.isdisjoint(last.removed) and 4 in last.truncated

    def shown_cost(position: int) -> int:
        if position in last.truncated:
            return plan.forms.truncated_tokens(position, last.truncated[position], 250)
        return plan.index.facts[position].tokens

    shown = [p for p in range(len(messages)) if p not in last.removed]
    assert steps[-1].usage == sum(shown_cost(p) for p in shown)


def test_the_fit_pass_step_is_at_the_fit_level() -> None:
    # Everything is recent, so the rungs take nothing: only the fit pass brings the view
    # under the limit, and its step says so.
    long_result = {"role": "tool", "tool_call_id": "c1", "content": "output line\n" * 400}
    messages = [prompt("H0"), call("c1"), long_result, answer("A1"), prompt("H1")]
    plan = plan_for(messages, set())
    policy = LadderPolicy(protected_recent=1.0, protected_tool_results=5, truncate_chars=250)
    limit = plan.usage // 2
    steps = list(
        plan_escalation(
            plan.index, plan.base, usage=plan.usage, target=0, policy=policy, limit=limit
        )
    )
    assert [s.level for s in steps] == [FIT_LEVEL]
    assert steps[-1].usage <= limit and steps[-1].results_shortened == 1


def test_a_result_too_short_to_gain_from_shortening_does_not_stop_the_rung() -> None:
    # Eight results, the oldest of them too short to gain from shortening: the first rung
    # takes the oldest quarter (two) and shortens the long one of them.
    def long_result(call_id: str) -> Msg:
        return {"role": "tool", "tool_call_id": call_id, "content": "output line\n" * 400}

    # Blocks always shorten to one text, but the marker costs more than "ok" does.
    tiny = {"role": "tool", "tool_call_id": "c0", "content": [{"type": "text", "text": "ok"}]}
    messages: list[Msg] = [prompt("H0"), call("c0"), tiny]
    for n in range(1, 8):
        messages += [call(f"c{n}"), long_result(f"c{n}")]
    messages += [answer("A"), prompt("H1")]
    plan = plan_for(messages, set())
    policy = LadderPolicy(protected_recent=0.0, protected_tool_results=0, truncate_chars=250)
    first = next(plan_escalation(plan.index, plan.base, usage=plan.usage, target=0, policy=policy))
    assert first.level == 1 and set(first.decisions.truncated) == {4}


def test_the_last_rung_passes_over_a_protected_stub_to_the_next() -> None:
    def hook_note(body: str) -> Msg:
        return {"role": "user", "content": body * 200, "metadata": {"source": "hook"}}

    messages = [
        prompt("H0"), answer("A0 " * 200), prompt("H1"), hook_note("kept "), hook_note("gone "),
        answer("A1"),
    ]  # fmt: skip
    index = HistoryIndex(estimate_message_tokens)
    index.sync(messages, None)
    base = Decisions(stubbed=MappingProxyType({3: 1000, 4: 1000}))
    plan = WorkingPlan(index, base, frozenset(), 0)

    def cost(position: int, decisions: Decisions) -> int:
        if position in decisions.stubbed:
            return plan.forms.stubbed_tokens(position)
        return index.facts[position].tokens

    plan.usage = sum(cost(p, base) for p in range(len(messages)))
    policy = LadderPolicy(protected_recent=1.0, protected_tool_results=0, truncate_chars=250)
    steps = list(
        plan_escalation(
            index, base, usage=plan.usage, target=0, policy=policy, protected_extra=frozenset({3})
        )
    )
    assert steps
    last = steps[-1].decisions
    assert 3 not in last.removed and 4 in last.removed
    # What the view costs now: the kept stub at its stub's price, the rest as they are.
    shown = [p for p in range(len(messages)) if p not in last.removed]
    assert not last.truncated and steps[-1].usage == sum(cost(p, last) for p in shown)


def test_the_last_rung_stubs_a_hook_note_from_its_minimum_length_on() -> None:
    # The note is among the newest messages, which the removal rungs keep: the last rung
    # stubs it (the oldest hook note, exactly as long as a stub needs) and counts the saving.
    note = {
        "role": "user",
        "content": "note " * (STUB_MIN_CHARS // 5),
        "metadata": {"source": "hook"},
    }
    messages = [prompt("H0"), answer("A0 " * 200), prompt("H1"), note, answer("A1")]
    plan, steps = escalate(messages, recent=1.0)
    assert steps
    last = steps[-1]
    assert dict(last.decisions.stubbed) == {3: STUB_MIN_CHARS}
    saved = plan.index.facts[3].tokens - plan.forms.stubbed_tokens(3)
    assert saved > 0 and last.decisions.removed == {1}
    assert last.usage == plan.usage - plan.index.facts[1].tokens - saved
