"""Progressive, ephemeral compaction: ladder order, protection, stickiness, notice, events."""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

from amplifier_core.message_models import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)
from amplifier_module_context_simple.views._ladder import RUNGS

from ..conftest import Recorder

BIG = "line of build output that goes on for a while\n" * 120  # ~1.3k tokens


def call(ids: list[str], *, thinking: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking:
        content.append({"type": "thinking", "thinking": "let me look", "signature": "sig"})
    content += [{"type": "tool_call", "id": i, "name": "bash", "input": {"cmd": "ls"}} for i in ids]
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": i, "tool": "bash", "arguments": {"cmd": "ls"}} for i in ids],
    }


def result(call_id: str, text: str = BIG) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": "bash", "content": text}


async def build(manager: SimpleContextManager, turns: int, width: int = 1) -> None:
    await manager.add_message({"role": "user", "content": "Fix the failing build please."})
    for t in range(turns):
        ids = [f"t{t}_{k}" for k in range(width)]
        await manager.add_message(call(ids))
        for i in ids:
            await manager.add_message(result(i))


def assert_valid(view: list[dict[str, Any]], history: list[dict[str, Any]]) -> None:
    assert check_view(view, history=history) == []
    for message in view:
        Message(**message)


async def test_below_trigger_the_view_is_the_history() -> None:
    manager = SimpleContextManager(max_tokens=1_000_000)
    await build(manager, 5)
    view = await manager.get_messages_for_request()
    history = await manager.get_messages()
    assert len(view) == len(history)
    assert all(v is h for v, h in zip(view, history, strict=True)), "no copies below trigger"


async def test_first_rung_truncates_the_oldest_tool_results_only() -> None:
    probe = SimpleContextManager()
    await build(probe, 24)
    total = probe._estimate_tokens(await probe.get_messages())
    # Just over the trigger: a few truncations reach the target, no removal needed.
    manager = SimpleContextManager(
        max_tokens=int(total / 0.9) + 800 - 50, target_usage=0.85, compact_threshold=0.9
    )
    await build(manager, 24)
    view = await manager.get_messages_for_request()
    history = await manager.get_messages()
    assert_valid(view, history)
    assert manager.compaction_level == 1
    shortened = [m for m in view if m.get("_truncated")]
    assert shortened, "rung 1 truncates"
    assert not any(m.get("_truncated") for m in view[-10:]), "recent results untouched"
    first = shortened[0]
    assert first["content"].startswith("[truncated: ~")
    assert first["content"].endswith("...")
    assert first["_original_tokens"] > 1000
    assert f"~{first['_original_tokens']} tokens" in first["content"]
    # The notice counts them, and nothing else was done.
    [notice] = [m for m in view if m.get("metadata", {}).get("source") == "context-compaction"]
    assert (
        f"of the first {len(history)}, {len(shortened)} tool results shortened."
        in (notice["content"])
    )
    assert first["tool_call_id"] == "t0_0" and first["name"] == "bash", "other keys kept"
    assert history[2]["content"] == BIG, "history untouched"


async def test_removal_keeps_first_prompt_and_whole_groups() -> None:
    manager = SimpleContextManager(max_tokens=12_000)
    await build(manager, 30, width=3)
    view = await manager.get_messages_for_request()
    history = await manager.get_messages()
    assert_valid(view, history)
    assert manager.compaction_level >= 3
    assert view[0]["content"] == "Fix the failing build please."
    assert len(view) < len(history)


async def test_history_is_never_changed() -> None:
    manager = SimpleContextManager(max_tokens=8_000)
    await build(manager, 20, width=2)
    before = copy.deepcopy(await manager.get_messages())
    for _ in range(3):
        await manager.get_messages_for_request()
    assert await manager.get_messages() == before


def notice_in(view: list[dict]) -> dict:
    [notice] = [m for m in view if m.get("metadata", {}).get("source") == "context-compaction"]
    return notice


async def test_sticky_prefix_is_byte_identical_between_escalations() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=20_000, hooks=recorder)
    await build(manager, 20)
    views = [await manager.get_messages_for_request()]
    for t in range(5):
        await manager.add_message({"role": "user", "content": f"also check {t}"})
        await manager.add_message({"role": "assistant", "content": "ok"})
        views.append(await manager.get_messages_for_request())
    assert len(recorder.named("context:compaction")) == 1
    # The notice stands where the left-out span was: each view starts with the one before,
    # notice and all.
    for before, later in itertools.pairwise(views):
        assert json.dumps(later[: len(before)]) == json.dumps(before)
        assert notice_in(later) is notice_in(views[0]), "the very same notice"
    assert views[-1][-1]["content"] == "ok"


async def test_the_tail_placement_keeps_the_notice_last_and_the_rest_byte_identical() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(
        max_tokens=20_000, hooks=recorder, compaction_notice_placement="tail"
    )
    await build(manager, 20)
    views = [await manager.get_messages_for_request()]
    for t in range(5):
        await manager.add_message({"role": "user", "content": f"also check {t}"})
        await manager.add_message({"role": "assistant", "content": "ok"})
        views.append(await manager.get_messages_for_request())
    assert len(recorder.named("context:compaction")) == 1
    first = [m for m in views[0] if m.get("metadata", {}).get("source") != "context-compaction"]
    for later in views[1:]:
        assert later[: len(first)] == first
        assert later[-1] == views[0][-1], "the notice is identical between escalations"


async def test_request_below_trigger_after_compaction_stays_reduced() -> None:
    manager = SimpleContextManager(max_tokens=20_000)
    await build(manager, 20)
    reduced = await manager.get_messages_for_request()
    again = await manager.get_messages_for_request()
    assert len(again) == len(reduced) < len(await manager.get_messages())


async def test_notice_shape_and_skip_while_calls_are_unanswered() -> None:
    manager = SimpleContextManager(
        max_tokens=20_000, compaction_notice_verbosity="verbose", compaction_notice_placement="tail"
    )
    await build(manager, 20)
    view = await manager.get_messages_for_request()
    tail = view[-1]
    assert tail["role"] == "user"
    assert tail["metadata"] == {"source": "context-compaction", "ephemeral": True}
    assert tail["content"].startswith('<system-reminder source="context-compaction">')
    assert "already be done" in tail["content"]
    await manager.add_message(call(["pending"]))
    view = await manager.get_messages_for_request()
    assert view[-1]["tool_calls"][0]["id"] == "pending"
    await manager.add_message(result("pending", "ok"))
    view = await manager.get_messages_for_request()
    assert view[-1]["metadata"]["source"] == "context-compaction"


async def test_the_in_place_notice_stays_while_a_call_is_unanswered() -> None:
    manager = SimpleContextManager(max_tokens=20_000)
    await build(manager, 20)
    view = await manager.get_messages_for_request()
    notice = notice_in(view)
    at = view.index(notice)
    assert notice["metadata"] == {"source": "context-compaction", "ephemeral": True}
    assert view[at - 1]["role"] in ("user", "tool") and view[at + 1]["role"] == "assistant"
    await manager.add_message(call(["pending"]))
    pending = await manager.get_messages_for_request()
    assert pending[-1]["tool_calls"][0]["id"] == "pending", "the call stays last"
    assert pending[: len(view)] == view
    await manager.add_message(result("pending", "ok"))
    answered = await manager.get_messages_for_request()
    assert answered[: len(pending)] == pending


async def test_notice_can_be_disabled() -> None:
    manager = SimpleContextManager(max_tokens=20_000, compaction_notice_enabled=False)
    await build(manager, 20)
    view = await manager.get_messages_for_request()
    assert all(m.get("metadata", {}).get("source") != "context-compaction" for m in view)


async def test_compaction_event_payload() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=20_000, hooks=recorder)
    await build(manager, 20)
    await manager.get_messages_for_request()
    [payload] = recorder.named("context:compaction")
    for key in (
        "before_tokens",
        "after_tokens",
        "before_messages",
        "after_messages",
        "messages_removed",
        "messages_truncated",
        "user_messages_stubbed",
        "system_messages_preserved",
        "strategy_level",
        "budget",
        "target_tokens",
        "protected_recent",
        "protected_tool_results",
    ):
        assert key in payload
    assert payload["after_tokens"] < payload["before_tokens"]
    assert payload["messages_removed"] == len(payload["removed_positions"])
    names = [e for e, _ in recorder.events if e.startswith("context:") and "compact" in e]
    assert names == ["context:pre_compact", "context:compaction", "context:post_compact"]


async def test_the_compaction_event_reports_the_settings_and_systems_it_ran_under() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(
        max_tokens=20_000, hooks=recorder, protected_recent=0.2, protected_tool_results=2
    )
    await manager.add_message({"role": "system", "content": "You are a build engineer."})
    await build(manager, 20)
    await manager.get_messages_for_request()
    [payload] = recorder.named("context:compaction")
    assert payload["system_messages_preserved"] == 1
    assert (payload["protected_recent"], payload["protected_tool_results"]) == (0.2, 2)


async def test_a_greeting_before_the_first_prompt_left_out_stays_out() -> None:
    # Nothing precedes the greeting, so leaving it out puts the first prompt in no tool round:
    # the prompt is shown without bringing the greeting back.
    manager = SimpleContextManager()
    await manager.add_message({"role": "assistant", "content": "Hello! How can I help? " * 20})
    await manager.add_message({"role": "user", "content": "Read the logs."})
    for k in range(30):
        await manager.add_message(call([f"c{k}"]))
        await manager.add_message(result(f"c{k}"))
    view = await manager.get_messages_for_request(4_000)
    assert 0 in manager.decisions.removed
    assert all(not str(m.get("content", "")).startswith("Hello!") for m in view)


async def test_no_storm_when_the_protected_floor_is_over_target() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=3_000, hooks=recorder)
    await manager.add_message({"role": "user", "content": "please " * 4000})
    for t in range(10):
        await manager.get_messages_for_request()
        await manager.add_message({"role": "assistant", "content": f"working {t}"})
        await manager.add_message({"role": "user", "content": f"continue {t}"})
    escalations = recorder.named("context:compaction")
    positions = [set(p["removed_positions"]) for p in escalations]
    # Every escalation removed something new; the sole huge prompt never caused a repeat.
    assert all(p for p in positions)
    assert len(escalations) <= 10


async def test_thinking_blocks_are_never_edited() -> None:
    manager = SimpleContextManager(max_tokens=15_000)
    await manager.add_message({"role": "user", "content": "go"})
    for t in range(20):
        await manager.add_message(call([f"a{t}", f"b{t}"], thinking=True))
        await manager.add_message(result(f"a{t}"))
        await manager.add_message(result(f"b{t}"))
    view = await manager.get_messages_for_request()
    history = await manager.get_messages()
    assert_valid(view, history)
    originals = {id(m) for m in history}
    for message in view:
        if message.get("role") == "assistant":
            assert id(message) in originals, "assistant turns pass through unchanged"


async def test_loaded_tool_state_is_protected() -> None:
    manager = SimpleContextManager(max_tokens=12_000)
    await manager.add_message({"role": "user", "content": "go"})
    await manager.add_message(
        {"role": "assistant", "content": "loaded", "metadata": {"openai:tool_search_items": [1]}}
    )
    await build(manager, 20)
    view = await manager.get_messages_for_request()
    assert any(m.get("content") == "loaded" for m in view)


def test_ladder_is_data_in_the_documented_order() -> None:
    assert [(r.level, r.action, r.share) for r in RUNGS] == [
        (1, "truncate", 0.25),
        (2, "truncate", 0.5),
        (3, "remove", 1.0),
        (4, "truncate", 0.75),
        (5, "remove", 0.6),
        (6, "truncate", 1.0),
        (7, "remove", 0.3),
        (8, "extreme", 0.0),
    ]


async def test_extreme_pressure_stubs_a_long_non_prompt_user_message() -> None:
    # Everything is recent, so no rung may remove anything: only the extreme rung can help.
    manager = SimpleContextManager(max_tokens=2_500, protected_recent=1.0)
    await manager.add_message({"role": "user", "content": "short task"})
    await manager.add_message({"role": "assistant", "content": "ok"})
    await manager.add_message({"role": "user", "content": "go on"})
    await manager.add_message(
        {
            "role": "user",
            "content": "context dump " * 900,
            "metadata": {"source": "hook", "ephemeral": True},
        }
    )
    view = await manager.get_messages_for_request()
    stubs = [m for m in view if m.get("_stubbed")]
    assert manager.compaction_level == 8
    assert len(stubs) == 1
    assert (
        stubs[0]["content"]
        == '[User message compacted - original: "' + ("context dump " * 5)[:50] + '..."]'
    )
    assert stubs[0]["_original_length"] == len("context dump " * 900)
    [notice] = [m for m in view if m.get("metadata", {}).get("source") == "context-compaction"]
    assert "1 long message reduced to a stub." in notice["content"]


async def test_the_recent_floor_counts_shown_messages_not_system_ones() -> None:
    # All of the conversation is "recent": removal at level 3 may take nothing, so the one
    # large early answer only goes at level 5, whose floor is the newest 60%. The system
    # messages among the recent ones are not conversation: counted in, they would push the
    # oldest answer out of the floor and let level 3 take it.
    manager = SimpleContextManager(max_tokens=6_000, protected_recent=1.0)
    await manager.add_message({"role": "system", "content": "Be brief."})
    await manager.add_message({"role": "user", "content": "Summarise the log."})
    await manager.add_message({"role": "assistant", "content": "log line " * 4_000})
    for turn in range(8):
        if turn in (3, 5):
            await manager.add_message({"role": "system", "content": f"Rule {turn}."})
        await manager.add_message({"role": "user", "content": f"Question {turn}?"})
        await manager.add_message({"role": "assistant", "content": f"Answer {turn}."})
    await manager.add_message({"role": "user", "content": "Last question?"})
    view = await manager.get_messages_for_request()
    assert manager.compaction_level == 5
    assert not any("log line" in str(m.get("content")) for m in view)
    assert check_view(view, history=manager.messages) == []


# --- property: random conversations and budgets ----------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "task " + "x" * draw(st.integers(0, 3000))}
    ]
    for t in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["calls", "calls", "text", "human", "hook"]))
        if kind == "calls":
            ids = [f"c{t}_{k}" for k in range(draw(st.integers(1, 4)))]
            messages.append(call(ids, thinking=draw(st.booleans())))
            for i in ids:
                size = draw(st.sampled_from([10, 300, 3000, 20000]))
                if draw(st.integers(0, 9)) == 0:
                    content: Any = [
                        {"type": "text", "text": "see image"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "iVBORw0KGgo=",
                            },
                        },
                    ]
                else:
                    content = "y" * size
                messages.append({"role": "tool", "tool_call_id": i, "content": content})
        elif kind == "text":
            messages.append({"role": "assistant", "content": "z" * draw(st.integers(1, 2000))})
        elif kind == "human":
            messages.append({"role": "user", "content": "next " * draw(st.integers(1, 200))})
        else:
            messages.append(
                {
                    "role": "user",
                    "content": "<system-reminder>r</system-reminder>",
                    "metadata": {"source": "hook", "ephemeral": True},
                }
            )
    return messages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.integers(600, 40_000), st.sampled_from([0.0, 0.3, 0.8]))
async def test_every_view_is_valid_and_history_untouched(
    messages: list[dict[str, Any]], budget: int, protected: float
) -> None:
    manager = SimpleContextManager(max_tokens=budget, protected_recent=protected)
    for message in messages:
        await manager.add_message(message)
        if message["role"] != "tool":
            view = await manager.get_messages_for_request()
            history = await manager.get_messages()
            assert_valid(view, history)
            ids = [id(m) for m in view]
            assert len(ids) == len(set(ids))
    snapshot = copy.deepcopy(await manager.get_messages())
    await manager.get_messages_for_request()
    assert await manager.get_messages() == snapshot


async def test_the_notice_counts_the_history_it_compacted_until_the_next_escalation() -> None:
    # "of the first N, X are left out": N is the history's length when the escalation was
    # made, X how many of those its view leaves out; both kept by the notice until the next
    # escalation, however long the history grows meanwhile.
    manager = SimpleContextManager(max_tokens=12_000)
    await manager.add_message({"role": "user", "content": "Fix the failing build please."})
    said: list[tuple[int, int, int, int]] = []  # history length, messages shown, N, X
    for t in range(14):
        await manager.add_message({"role": "user", "content": f"step {t}: fix the build"})
        await manager.add_message(call([f"c{t}"]))
        await manager.add_message(result(f"c{t}", "line of build output that goes on\n" * 120))
        view = await manager.get_messages_for_request()
        notices = [m for m in view if m.get("metadata", {}).get("source") == "context-compaction"]
        if notices:
            first_line = notices[0]["content"].splitlines()[1]
            counted, left_out = re.split(
                r" (?:are|is) left out", first_line.split("of the first ")[1]
            )[0].split(", ")
            shown = len(view) - len(notices)
            said.append((len(await manager.get_messages()), shown, int(counted), int(left_out)))
    firsts = [first for _, _, first, _ in said]
    assert len(set(firsts)) > 1, "the session escalates more than once"
    assert len(set(firsts)) < len(firsts), "a notice outlives the request that made it"
    previous: tuple[int, int] | None = None
    for length, shown, first, left_out in said:
        if previous is not None and (first, left_out) == previous:
            continue  # the notice of an earlier escalation, as it was
        # A new escalation: counted now, and its view shows exactly the rest of the history.
        assert first == length
        assert first - left_out == shown
        previous = (first, left_out)


async def test_the_compaction_event_lists_the_hook_note_it_reduced_to_a_stub() -> None:
    recorder = Recorder()
    manager = SimpleContextManager(max_tokens=20_000, hooks=recorder, protected_recent=1.0)
    for message in (
        {"role": "user", "content": "Tidy the build."},
        {"role": "assistant", "content": "Tidied. " * 200},
        {"role": "user", "content": "Now the docs."},
        {"role": "user", "content": "lint output " * 300, "metadata": {"source": "hook"}},
        {"role": "assistant", "content": "On it."},
    ):
        await manager.add_message(message)
    await manager.get_messages_for_request(1_500)
    [payload] = recorder.named("context:compaction")
    assert dict(manager.decisions.stubbed) == {3: len("lint output " * 300)}
    assert (payload["stubbed_positions"], payload["user_messages_stubbed"]) == ([3], 1)


async def test_a_late_result_of_a_call_left_out_long_ago_is_left_out_with_it() -> None:
    # Most of the history is left out when the build's result finally arrives: its call is
    # among what was left out, so the result is too (never shown without its call), and
    # what the view is counted at does not include it.
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)
    await manager.add_message({"role": "user", "content": "Build it."})
    await manager.add_message(call(["early"]))
    await manager.add_message({"role": "user", "content": "Meanwhile, read the logs."})
    for k in range(40):
        await manager.add_message(call([f"c{k}"]))
        await manager.add_message(result(f"c{k}", BIG[:2400]))
    await manager.get_messages_for_request(3_000)
    early = 1
    assert early in manager.decisions.removed
    assert len(manager.decisions.removed) > len(manager.messages) / 2
    await manager.add_message(result("early", "build finished\n" * 200))
    view = await manager.get_messages_for_request(3_000)
    assert check_view(view, history=manager.messages) == []
    assert all(m.get("tool_call_id") != "early" for m in view)
    assert len(manager.messages) - 1 in manager.decisions.removed
    for payload in recorder.named("context:compaction"):
        assert payload["after_tokens"] <= 3_000


async def test_a_hook_note_stubbed_alone_is_an_escalation() -> None:
    # Nothing else can go: the only change the ladder makes is the note's stub, and that
    # is a step of its own, reported and kept.
    recorder = Recorder()
    manager = SimpleContextManager(hooks=recorder)
    note = "lint output " * 300
    await manager.add_message({"role": "user", "content": "Now the docs."})
    await manager.add_message({"role": "user", "content": note, "metadata": {"source": "hook"}})
    view = await manager.get_messages_for_request(1_200)
    assert (sorted(manager.decisions.removed), dict(manager.decisions.stubbed)) == (
        [],
        {1: len(note)},
    )
    [payload] = recorder.named("context:compaction")
    assert payload["stubbed_positions"] == [1] and payload["messages_removed"] == 0
    assert sum(map(estimate_message_tokens, view)) <= 1_200
