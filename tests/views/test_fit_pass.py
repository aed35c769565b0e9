"""The budget before protection: the fit pass, the floor, protection count and whole turns.

Protection (recent messages, the latest tool results) wins over the compaction *target* but
never over the *budget*: when the eight rungs leave a view over the effective budget, a fit
pass shortens protected tool results (oldest first) and then removes recent groups (oldest
first) until the view fits or only the floor is left. Events are captured through the host's
own hook registry.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from amplifier_core import HookRegistry, HookResult
from amplifier_core.llm_errors import ContextLengthError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)

from ..provider_rules import provider_violations

NOTICE_SOURCE = "context-compaction"
LINE = "src/parser.c:120: warning: implicit conversion loses precision\n"


def text(tokens: int) -> str:
    """Tool output of roughly ``tokens`` estimated tokens."""
    return LINE * max(1, tokens // 14)


def prompt(body: str) -> dict[str, Any]:
    return {"role": "user", "content": body}


def answer(body: str) -> dict[str, Any]:
    return {"role": "assistant", "content": body}


def call(call_id: str, *, thinking: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": "plan it", "signature": f"s-{call_id}"})
    content.append({"type": "tool_call", "id": call_id, "name": "read", "input": {"p": call_id}})
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": call_id, "tool": "read", "arguments": {"p": call_id}}],
    }


def result(call_id: str, tokens: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": "read", "content": text(tokens)}


class Events:
    """Captures this module's events through a real ``HookRegistry``."""

    def __init__(self) -> None:
        self.hooks = HookRegistry()
        self.seen: list[tuple[str, dict[str, Any]]] = []
        for name in ("context:compaction", "context:pre_compact", "context:post_compact"):
            self.hooks.register(name, self._record, name=f"capture-{name}")

    async def _record(self, event: str, data: dict[str, Any]) -> HookResult:
        self.seen.append((event, data))
        return HookResult(action="continue")

    def compactions(self) -> list[dict[str, Any]]:
        return [d for e, d in self.seen if e == "context:compaction"]


def notice_of(view: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The one compaction notice of ``view``, wherever it stands."""
    [notice] = [m for m in view if (m.get("metadata") or {}).get("source") == NOTICE_SOURCE]
    return notice


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same message as the provider reads it (admission adds a timestamp to metadata)."""
    return all(a.get(k) == b.get(k) for k in ("role", "content", "tool_calls"))


def tokens_of(view: Sequence[dict[str, Any]]) -> int:
    return sum(estimate_message_tokens(m) for m in view)


def whole(view: Sequence[dict[str, Any]], message: dict[str, Any]) -> bool:
    return any(m.get("content") == message.get("content") and not m.get("_truncated") for m in view)


async def admit(manager: SimpleContextManager, messages: Sequence[dict[str, Any]]) -> None:
    for message in messages:
        await manager.add_message(message)


# --- the budget wins over protection ---------------------------------------------------------


async def test_protected_results_over_the_budget_are_shortened_oldest_first() -> None:
    events = Events()
    manager = SimpleContextManager(hooks=events.hooks)
    # Five parallel reads of ~3k tokens each: all protected, together far over a 6k budget.
    await admit(manager, [prompt("Read the five parser files.")])
    for i in range(5):
        await admit(manager, [call(f"r{i}"), result(f"r{i}", 3_000)])
    history = copy.deepcopy(await manager.get_messages())
    view = await manager.get_messages_for_request(token_budget=6_000)

    assert tokens_of(view) <= 6_000
    assert check_view(view, history=history) == []
    shortened = [m["tool_call_id"] for m in view if m.get("_truncated")]
    assert shortened and shortened == [f"r{i}" for i in range(len(shortened))], "oldest first"
    assert whole(view, history[-1]), "the newest result is shortened last"
    [event] = events.compactions()
    assert event["protection_relaxed"] == {
        "tool_results_shortened": len(shortened),
        "groups_removed": 0,
    }
    notice = notice_of(view)
    assert "narrower parameters" in notice["content"]
    assert "never re-run a tool that changes state" in notice["content"]
    assert await manager.get_messages() == history, "history is never rewritten"


async def test_the_fit_pass_removes_recent_groups_once_shortening_is_not_enough() -> None:
    events = Events()
    manager = SimpleContextManager(hooks=events.hooks, truncate_chars=2_000)
    await admit(manager, [prompt("Investigate the crash.")])
    for i in range(6):
        await admit(manager, [call(f"c{i}"), result(f"c{i}", 900)])
    await admit(manager, [answer("Found it: an off-by-one in the lexer."), prompt("Fix it.")])
    history = await manager.get_messages()
    view = await manager.get_messages_for_request(token_budget=2_500)

    assert tokens_of(view) <= 2_500
    assert check_view(view, history=history) == []
    [event] = events.compactions()
    assert event["protection_relaxed"]["groups_removed"] > 0
    kept_calls = [m["tool_call_id"] for m in view if m.get("role") == "tool"]
    removed_calls = [f"c{i}" for i in range(6) if f"c{i}" not in kept_calls]
    assert removed_calls == [f"c{i}" for i in range(len(removed_calls))], "oldest groups first"
    assert notice_of(view)["metadata"]["source"] == NOTICE_SOURCE


async def test_an_over_budget_request_escalates_even_when_everything_is_protected() -> None:
    events = Events()
    manager = SimpleContextManager(hooks=events.hooks)
    await admit(manager, [prompt("Dump the two tables."), call("t1"), result("t1", 4_000)])
    await admit(manager, [call("t2"), result("t2", 4_000)])
    view = await manager.get_messages_for_request(token_budget=5_000)
    assert tokens_of(view) <= 5_000
    assert len(events.compactions()) == 1
    # Sticky: the next request hands out the same view and emits nothing new.
    again = await manager.get_messages_for_request(token_budget=5_000)
    assert again == view
    assert len(events.compactions()) == 1


async def test_the_floor_is_never_touched_and_an_oversized_floor_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = SimpleContextManager()
    system = {"role": "system", "content": "You are careful. " * 300}
    first = prompt("Port the build to meson. " + "Constraints follow. " * 200)
    await admit(manager, [system, first, call("a"), result("a", 2_000), answer("Done.")])
    last = prompt("Now the tests. " + "More constraints. " * 200)
    thinking_round = call("b", thinking=True)
    await admit(manager, [last, thinking_round])
    history = await manager.get_messages()
    floor = [system, first, last, thinking_round]
    floor_tokens = tokens_of(floor)
    caplog.set_level(logging.WARNING)
    view = await manager.get_messages_for_request(token_budget=floor_tokens - 50)
    for message in floor:
        assert any(same(m, message) for m in view), f"floor message {message['role']} kept verbatim"
    assert check_view(view, history=history) == []
    over = [r for r in caplog.records if "over the budget" in r.getMessage()]
    assert len(over) == 1 and str(floor_tokens - 50) in over[0].getMessage()
    await manager.get_messages_for_request(token_budget=floor_tokens - 50)
    assert len([r for r in caplog.records if "over the budget" in r.getMessage()]) == 1
    with pytest.raises(ContextLengthError):
        await manager.get_messages_for_request_retaining(
            retain_contents=[], token_budget=floor_tokens - 50, hard_fit=True
        )


async def test_retained_reminders_are_floor_for_the_fit_pass() -> None:
    manager = SimpleContextManager()
    body = "<system-reminder>keep the todo list current</system-reminder>"
    reminder = {"role": "user", "content": body, "metadata": {"ephemeral": True, "persisted": True}}
    await admit(manager, [prompt("Refactor."), reminder])
    for i in range(4):
        await admit(manager, [call(f"c{i}"), result(f"c{i}", 2_500)])
    view = await manager.get_messages_for_request_retaining(
        retain_contents=[body], token_budget=3_000, hard_fit=True
    )
    assert sum(m.get("content") == body for m in view) == 1
    assert tokens_of(view) <= 3_000


async def test_the_measured_path_does_not_relax_protection() -> None:
    manager = SimpleContextManager(token_meter="actual")
    await admit(manager, [prompt("Read them.")])
    for i in range(3):
        await admit(manager, [call(f"c{i}"), result(f"c{i}", 3_000)])

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        tokens = tokens_of(view)
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": 10**9,
                "measurement": {"kind": "provider_count", "source": "t", "input_tokens": tokens},
            },
        }

    class Small:
        async def get_model_info(self) -> dict[str, int]:
            return {"context_window": 9_000, "max_output_tokens": 2_000}

    outcome = await manager.get_measured_request_view(
        provider=Small(), retain_contents=[], count_view=count_view
    )
    assert not any(m.get("_truncated") for m in outcome["base_view"]), "protected stay whole"
    assert outcome["outcome"] == "protected_floor"
    outcome["transaction"].rollback()


# --- the notice is part of what must fit -----------------------------------------------------


@pytest.mark.parametrize("reserve", [800, 10])
async def test_hard_fit_counts_the_notice_it_adds(reserve: int) -> None:
    manager = SimpleContextManager(compaction_notice_token_reserve=reserve)
    await admit(manager, [prompt("Go.")])
    for i in range(8):
        await admit(manager, [call(f"c{i}"), result(f"c{i}", 300)])
    # A budget at or below the reserve, or a reserve below the notice's own size: the view the
    # ladder makes must leave room for the notice appended after it.
    budget = 700
    view = await manager.get_messages_for_request_retaining(
        retain_contents=[], token_budget=budget, hard_fit=True
    )
    assert notice_of(view)["metadata"]["source"] == NOTICE_SOURCE
    assert tokens_of(view) <= budget


# --- protection count and the latest assistant message --------------------------------------


async def test_fewer_results_than_the_protected_count_are_all_protected() -> None:
    manager = SimpleContextManager(protected_recent=0.0)
    await admit(manager, [prompt("Collect four logs. " + "context " * 600)])
    for i in range(4):
        await admit(manager, [call(f"c{i}"), result(f"c{i}", 600)])
    await admit(manager, [answer("Collected. " * 400), prompt("Summarise.")])
    history = await manager.get_messages()
    # Over the trigger, but the four results themselves fit: every one of them stays whole.
    budget = tokens_of(history) - 400
    view = await manager.get_messages_for_request(token_budget=budget)
    assert manager.compaction_level > 0
    for position in (2, 4, 6, 8):
        assert whole(view, history[position]), f"result at {position} is protected"


@pytest.mark.parametrize("thinking", [False, True])
async def test_the_latest_assistant_message_is_protected_only_in_a_tool_loop(
    thinking: bool,
) -> None:
    manager = SimpleContextManager(protected_recent=0.0, protected_tool_results=0)
    latest: dict[str, Any] = answer("A long explanation. " * 600)
    if thinking:
        latest = {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "weigh it", "signature": "sig"},
                {"type": "text", "text": "A long explanation. " * 600},
            ],
        }
    await admit(manager, [prompt("Explain the design."), latest])
    await manager.add_message(prompt("Thanks; one more thing."))
    view = await manager.get_messages_for_request(token_budget=2_000)
    assert any(same(m, latest) for m in view) is thinking


# --- whole turns -------------------------------------------------------------------------------


def human_after_result(view: Sequence[dict[str, Any]]) -> list[int]:
    return [
        i
        for i in range(1, len(view))
        if view[i].get("role") == "user"
        and not (view[i].get("metadata") or {}).get("source")
        and view[i - 1].get("role") == "tool"
    ]


async def test_a_kept_tool_round_keeps_the_rest_of_its_turn() -> None:
    manager = SimpleContextManager(protected_recent=0.0, protected_tool_results=2)
    await admit(manager, [prompt("First task. " + "spec " * 300)])
    for i in range(6):
        await admit(manager, [call(f"a{i}"), result(f"a{i}", 500)])
    await admit(manager, [answer("First task done. " * 100), prompt("Second task.")])
    await admit(manager, [answer("Nothing to do. " * 300), prompt("Third task.")])
    history = await manager.get_messages()
    view = await manager.get_messages_for_request(token_budget=tokens_of(history) // 2)
    assert manager.compaction_level >= 3
    assert human_after_result(view) == [], "no human prompt lands inside an old tool round"
    assert check_view(view, history=history) == []


async def test_a_prompt_typed_right_after_a_kept_round_stays_when_older_rounds_go() -> None:
    # The history has the prompt straight after a tool result (typed while the round ran), so
    # the view may too: only what is left out between a round and a prompt splits a turn.
    manager = SimpleContextManager(protected_recent=0.0, protected_tool_results=1)
    await admit(manager, [prompt("First task. " + "spec " * 50)])
    for i in range(6):
        await admit(manager, [call(f"a{i}"), result(f"a{i}", 800)])
    typed = prompt("Also check the logs.")
    await admit(manager, [call("x"), result("x", 20), typed, answer("Checked.")])
    await admit(manager, [call("y"), result("y", 20), answer("Done."), prompt("Next task.")])
    history = await manager.get_messages()
    view = await manager.get_messages_for_request(token_budget=tokens_of(history) // 3)
    assert manager.compaction_level >= 3, "older rounds were left out"
    assert any(same(m, typed) for m in view)
    assert check_view(view, history=history) == []


async def test_the_active_turn_still_opens_with_its_thinking_round() -> None:
    manager = SimpleContextManager()
    await admit(manager, [prompt("Migrate every module.")])
    for i in range(20):
        await admit(manager, [call(f"m{i}", thinking=i == 0), result(f"m{i}", 700)])
    history = await manager.get_messages()
    view = await manager.get_messages_for_request(token_budget=6_000)
    assert manager.compaction_level >= 3
    opener = next(i for i, m in enumerate(view) if m.get("content") == "Migrate every module.")
    assert view[opener + 1] == history[1], "the active turn starts with its thinking round"
    assert tokens_of(view) <= 6_000


# --- property: within the budget whenever the floor fits ------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    messages: list[dict[str, Any]] = [prompt("Task: " + "detail " * draw(st.integers(1, 200)))]
    turns = draw(st.integers(1, 4))
    serial = 0
    for turn in range(turns):
        for _ in range(draw(st.integers(0, 6))):
            ids = [f"t{serial}-{k}" for k in range(draw(st.integers(1, 3)))]
            serial += 1
            messages.append(
                {
                    **call(ids[0], thinking=draw(st.booleans())),
                    "tool_calls": [{"id": i, "tool": "read", "arguments": {}} for i in ids],
                    "content": "",
                }
            )
            messages += [result(i, draw(st.integers(50, 6_000))) for i in ids]
        messages.append(answer("Done with this part. " * draw(st.integers(1, 50))))
        if turn < turns - 1:
            messages.append(prompt(f"Next step {turn}."))
    return messages, draw(st.integers(2_000, 24_000))


def floor_tokens(view: Sequence[dict[str, Any]], history: Sequence[dict[str, Any]]) -> int:
    humans = [m for m in history if m.get("role") == "user"]
    latest = next((m for m in reversed(history) if m.get("role") == "assistant"), None)
    floor = [humans[0], humans[-1]] if humans[0] is not humans[-1] else [humans[0]]
    if latest is not None and latest.get("tool_calls"):
        floor.append(latest)
    return tokens_of(floor)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
async def test_every_view_fits_the_budget_whenever_the_floor_does(
    case: tuple[list[dict[str, Any]], int],
) -> None:
    messages, budget = case
    events = Events()
    manager = SimpleContextManager(hooks=events.hooks)
    for position, message in enumerate(messages):
        if message["role"] == "assistant" and position:
            history = await manager.get_messages()
            view = await manager.get_messages_for_request(token_budget=budget)
            assert check_view(view, history=history) == []
            assert human_after_result(view) == []
            if floor_tokens(view, history) + 400 <= budget:
                assert tokens_of(view) <= budget
            relaxed = any(
                e["protection_relaxed"] != {"tool_results_shortened": 0, "groups_removed": 0}
                for e in events.compactions()
            )
            # A turn-start escalation may shorten the latest results of finished turns; the
            # active turn's own (after the latest prompt) came after any such escalation.
            turn_started = any(e["reason"] == "turn_start" for e in events.compactions())
            latest_prompt = max(i for i, m in enumerate(history) if m.get("role") == "user")
            results = [
                m
                for i, m in enumerate(history)
                if m.get("role") == "tool" and (not turn_started or i > latest_prompt)
            ][-5:]
            if not relaxed:
                for kept in results:
                    assert whole(view, kept), "protected results stay whole unless relaxed"
        await manager.add_message(message)


async def test_a_lone_prompt_is_not_removed_from_between_a_round_and_the_next_prompt() -> None:
    manager = SimpleContextManager(protected_recent=0.0, protected_tool_results=1)
    await admit(manager, [prompt("Build it. " + "spec " * 400), call("b0"), result("b0", 1_500)])
    # The user typed twice before the agent answered: two prompts in a row after the round.
    await admit(manager, [prompt("next"), prompt("next next")])
    history = await manager.get_messages()
    view = await manager.get_messages_for_request(token_budget=900)
    assert check_view(view, history=history) == []
    assert human_after_result(view) == [] or any(m.get("content") == "next" for m in view)


async def test_an_interrupted_turn_keeps_the_prompt_and_thinking_round_the_provider_reads() -> None:
    manager = SimpleContextManager(protected_recent=0.0)
    thinking_answer = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "easy", "signature": "s0"},
            {"type": "text", "text": "Done."},
        ],
    }
    await admit(manager, [prompt("Task one."), thinking_answer, prompt("Task two.")])
    await admit(manager, [call("t0", thinking=True), result("t0", 1_500)])
    await admit(manager, [call("t1"), result("t1", 1_500), call("t2"), result("t2", 1_500)])
    # Interrupted: a new prompt right after the tool results. The provider merges it into the
    # results' user turn, so the turn it checks for thinking opens at "Task two."'s round.
    await admit(manager, [prompt("Stop; do task three.")])
    for i in (3, 4, 5):
        await admit(manager, [call(f"t{i}", thinking=i == 3), result(f"t{i}", 300)])
    history = await manager.get_messages()
    # t1 and t2 are among the five protected results (so their round stays), t0 is not.
    view = await manager.get_messages_for_request(token_budget=4_000)
    assert provider_violations(view) == []
    assert check_view(view, history=history) == []
    assert any(same(m, history[3]) for m in view), "the opener of the turn the provider reads"


async def test_the_newest_message_is_never_removed_so_the_next_prompt_finds_it() -> None:
    manager = SimpleContextManager()
    await admit(manager, [prompt("Run it."), call("r0")])  # interrupted: no result ever came
    await admit(manager, [{"role": "assistant", "content": "Stopped. " * 40}])
    await manager.get_messages_for_request(token_budget=60)
    await manager.add_message(prompt("Why did it stop?"))
    history = await manager.get_messages()
    view = await manager.get_messages_for_request(token_budget=60)
    assert check_view(view, history=history) == []


async def test_a_view_whose_notice_would_overflow_the_budget_escalates() -> None:
    # No reserve for the notice and a trigger at the whole budget: only the hard limit (view
    # plus notice within the budget) can start the escalation that makes room for the notice.
    manager = SimpleContextManager(compaction_notice_token_reserve=0, compact_threshold=1.0)
    await admit(manager, [prompt("Go.")])
    for i in range(12):
        await admit(manager, [call(f"c{i}"), result(f"c{i}", 400)])
    budget = 4_000
    for i in range(12, 40):
        view = await manager.get_messages_for_request(token_budget=budget)
        assert tokens_of(view) <= budget, f"request {i}"
        await admit(manager, [call(f"c{i}"), result(f"c{i}", 60)])


async def test_a_unit_mending_brings_back_comes_back_as_short_as_it_was() -> None:
    # A prompt typed right after a tool round, with a thinking opener in the turn before: the
    # fit pass shortens results, removes rounds, and mending has to bring one round back; it
    # must come back shortened, or the view is far over a budget the floor fits in.
    manager = SimpleContextManager()
    await admit(manager, [prompt("P0"), call("a1"), result("a1", 3_000), answer("done")])
    await admit(manager, [prompt("P1"), call("b1", thinking=True), result("b1", 3_000)])
    await admit(manager, [call("c1"), result("c1", 3_000), prompt("P2")])
    wordy = {**call("e1"), "content": [{"type": "text", "text": text(2_000)}]}
    await admit(manager, [wordy, result("e1", 3_000), call("d1"), result("d1", 3_000)])
    history = await manager.get_messages()
    for budget in (1_800, 2_600, 3_900):
        fresh = SimpleContextManager()
        await admit(fresh, history)
        view = await fresh.get_messages_for_request(token_budget=budget)
        assert tokens_of(view) <= budget, budget
        assert check_view(view, history=history) == []
    fitted = await manager.get_messages_for_request_retaining(
        retain_contents=[], token_budget=3_900, hard_fit=True
    )
    assert tokens_of(fitted) <= 3_900


async def test_results_newer_rounds_pushed_out_of_protection_are_no_longer_called_relaxed() -> None:
    events = Events()
    manager = SimpleContextManager(hooks=events.hooks)
    # As above: the fit pass shortens protected results of five parallel reads.
    await admit(manager, [prompt("Read the five parser files.")])
    for i in range(5):
        await admit(manager, [call(f"r{i}"), result(f"r{i}", 3_000)])
    view = await manager.get_messages_for_request(token_budget=6_000)
    assert manager.decisions.protection_relaxed
    assert "narrower parameters" in notice_of(view)["content"]
    # Newer rounds take the latest-results protection over; the next escalation is ordinary
    # compaction of what the fit pass once took, and the notice stops calling it relaxed.
    for i in range(5, 12):
        await admit(manager, [answer(f"Next ({i})."), call(f"r{i}"), result(f"r{i}", 400)])
        view = await manager.get_messages_for_request(token_budget=6_000)
    compactions = events.compactions()
    assert len(compactions) >= 2
    assert compactions[-1]["protection_relaxed"] == {
        "tool_results_shortened": 0,
        "groups_removed": 0,
    }
    assert not manager.decisions.protection_relaxed
    assert "narrower parameters" not in notice_of(view)["content"]
