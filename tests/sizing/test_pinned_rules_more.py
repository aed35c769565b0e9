"""More rules injected bugs went past (issue 28 §4), pinned one by one.

``_tool_definitions``: how a mounted tool *object* is priced; ``_ids``: the spelling of derived
ids after a second collision, the same on every request; ``_render``: the notice cost the
planner reserves is that of the widest notice the history could get; ``_session``: after
``clear()`` or ``set_messages()`` the meter starts afresh; ``_budget``: the budget's words when
``max_tokens`` caps it, and a failing model-name lookup is logged; ``_measured``: the overhead
a count holds beyond the view, the count calls of the estimate fallback after an escalation,
and a kept compaction settles the transaction.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

import pytest
from amplifier_core import HookResult
from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import estimate_message_tokens
from amplifier_module_context_simple.history._ids import SHORT_ID_LIMIT, IdAssigner
from amplifier_module_context_simple.sizing._budget import Budget, derive_budget
from amplifier_module_context_simple.sizing._tool_definitions import (
    ToolDefinitions,
    estimate_tool_definitions,
    tool_definition,
)
from amplifier_module_context_simple.views._render import NoticeFigures, notice_message

from ..readings.test_actual_meter import Session, tokens
from ..session.test_measured_path import Ref, call, measured, mounted
from ..test_protocols import TOOLS_OVERHEAD

# --- _tool_definitions ------------------------------------------------------------------------


class SpecTool:
    """A mounted tool as tool modules have it: attributes, ``parameters`` for the schema."""

    name = "read_file"
    description = "Read a file from the workspace."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"path": {}}}
    input_schema: ClassVar[dict[str, Any] | None] = None
    other = "not sent"


class SchemaTool(SpecTool):
    input_schema: ClassVar[dict[str, Any] | None] = {
        "type": "object",
        "properties": {"glob": {"type": "string", "description": "Files to match, e.g. *.py"}},
    }


class Broken:
    @property
    def name(self) -> str:
        raise RuntimeError("a property that fails")

    description = 42

    @property
    def input_schema(self) -> dict[str, Any]:
        raise RuntimeError("so does this one")


def test_a_tool_object_is_priced_as_the_definition_the_provider_receives() -> None:
    spec = tool_definition(SpecTool())
    assert spec == {
        "name": "read_file",
        "description": "Read a file from the workspace.",
        "input_schema": SpecTool.parameters,
    }
    assert tool_definition(SchemaTool())["input_schema"] == SchemaTool.input_schema
    assert tool_definition(Broken()) == {"name": "", "description": "42", "input_schema": {}}
    mapping = {"name": "x", "input_schema": {}, "cache_control": {"type": "ephemeral"}}
    assert tool_definition(mapping) == {"name": "x", "input_schema": {}}
    for family in (None, "claude3"):
        text = json.dumps([spec, tool_definition(SchemaTool())], ensure_ascii=False)
        expected = estimate_message_tokens({"role": "system", "content": text}, family=family)
        assert estimate_tool_definitions([SpecTool(), SchemaTool()], family) == expected
    assert estimate_tool_definitions([], None) == 0


class Undescribed:
    name = "ls"
    parameters: ClassVar[dict[str, Any]] = {"type": "object"}


def test_a_tool_without_a_description_is_sent_with_an_empty_one() -> None:
    assert tool_definition(Undescribed()) == {
        "name": "ls",
        "description": "",
        "input_schema": {"type": "object"},
    }


def test_a_fixed_mapping_of_tools_is_priced_as_its_tools() -> None:
    cache = ToolDefinitions()
    cache.use({"read_file": SpecTool(), "glob": SchemaTool()})
    assert cache.tokens(None) == estimate_tool_definitions([SpecTool(), SchemaTool()], None) > 0


@pytest.mark.parametrize(("tools", "named"), [(7, "int"), ("read_file", "str"), (b"ls", "bytes")])
def test_fixed_tools_that_are_no_list_are_refused_naming_their_type(tools: Any, named: str) -> None:
    with pytest.raises(TypeError, match=f"must be a list of tools, got {named}$"):
        ToolDefinitions().use(tools)


def test_the_cached_estimate_follows_the_set_by_name_and_object() -> None:
    tools: dict[str, Any] = {"read_file": SpecTool()}
    cache = ToolDefinitions()
    cache.use(lambda: tools)
    alone = cache.tokens(None)
    assert alone == estimate_tool_definitions([tools["read_file"]], None)
    tools["glob"] = SchemaTool()
    assert cache.tokens(None) == estimate_tool_definitions(list(tools.values()), None) > alone
    tools["glob"] = SpecTool()  # the same name, another object: priced again
    assert cache.tokens(None) == estimate_tool_definitions(list(tools.values()), None)
    cache.use(None)
    assert cache.tokens(None) == 0


# --- _ids -------------------------------------------------------------------------------------


def _call(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": i, "tool": "t"} for i in ids]}


def _assign(history: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    assigner = IdAssigner()
    return [assigner.add(m, p).calls for p, m in enumerate(history)]


def test_derived_ids_after_a_second_collision_are_spelled_the_same_every_time() -> None:
    # "a" at 3 collides; its first derived spelling a_r3 and the next a_r3_1 are taken too.
    history = [_call("a"), _call("a_r3"), _call("a_r3_1"), _call("a")]
    assert _assign(history)[3] == ("a_r3_2",)
    assert _assign(history) == _assign(list(history))  # a second request: the same ids
    long = "b" * SHORT_ID_LIMIT
    history = [_call(long), _call(long[:-3] + "_r2"), _call(long)]
    derived = _assign(history)[2][0]
    assert derived == long[:-5] + "_r2_1" and len(derived) == SHORT_ID_LIMIT


def test_a_repeated_id_is_first_derived_from_its_position_alone() -> None:
    # The shortest spelling comes first: the numbered ones only when it is taken.
    assert _assign([_call("a"), _call("b"), _call("a")])[2] == ("a_r2",)


def _idless_call() -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [{"tool": "t"}]}


def test_an_idless_call_is_named_from_its_position_alone() -> None:
    # Giving an earlier call an id of its own leaves a later call's derived id as it was, so
    # such an edit moves no later byte of the prompt.
    later = [_idless_call(), _call("c"), _idless_call()]
    assert _assign([_idless_call(), *later])[3] == ("call_r3",)
    assert _assign([_call("x"), *later])[3] == ("call_r3",)


def test_an_id_providers_refuse_is_spelled_with_its_safe_characters_and_its_position() -> None:
    # What the agent wrote stays legible in the derived id: each unsafe character becomes "_".
    assert _assign([_call("call 1"), _call("ok"), _call("fn.read:0")]) == [
        ("call_1_r0",),
        ("ok",),
        ("fn_read_0_r2",),
    ]


# --- _render ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 200_000),
    st.lists(st.floats(0, 1), min_size=4, max_size=4),
    st.booleans(),
    st.sampled_from(["minimal", "normal", "verbose"]),
)
def test_the_reserved_notice_is_the_widest_this_history_could_get(
    size: int, shares: list[float], relaxed: bool, verbosity: str
) -> None:
    largest = NoticeFigures.largest(size)
    widest = max(
        estimate_message_tokens(notice_message(f, verbosity))
        for f in (largest, NoticeFigures(*[largest.removed] * 4, relaxed=False))
    )
    top = size + 1000  # no figure of a notice for this history reaches it
    figures = NoticeFigures(*[int(s * top) for s in shares], relaxed=relaxed)
    assert estimate_message_tokens(notice_message(figures, verbosity)) <= widest
    # ...and it is no wider than a notice with figures of the same number of digits.
    digits = len(str(top))
    assert len(str(largest.removed)) == digits and largest.relaxed


# --- _session ---------------------------------------------------------------------------------


async def _metered_session() -> Session:
    session = await Session.start(max_tokens=10_800)
    await session.manager.add_message({"role": "user", "content": "Collect the build logs."})
    for _ in range(3):
        await session.tool_turn(30)
    view = await session.view()
    await session.respond(tokens(view) * 2)
    await session.view()
    stats = session.manager.token_meter_stats
    assert stats is not None and stats["latest_reading"] is not None
    return session


async def _fresh_after(session: Session) -> None:
    manager = session.manager
    assert manager.token_meter_stats is None
    await session.tool_turn(5)
    await session.view()
    stats = manager.token_meter_stats
    assert stats is not None
    assert stats["measured"] is None and stats["latest_reading"] is None
    assert stats["source"] == "estimate"  # no reading of the old history answers this view


async def test_after_clear_the_meter_starts_afresh() -> None:
    session = await _metered_session()
    await session.manager.clear()
    await session.manager.add_message({"role": "user", "content": "Start over."})
    await _fresh_after(session)


async def test_after_set_messages_the_meter_starts_afresh() -> None:
    session = await _metered_session()
    await session.manager.set_messages([{"role": "user", "content": "Start over."}])
    await _fresh_after(session)


# --- _budget ----------------------------------------------------------------------------------


class WindowProvider:
    """Publishes a 200k window and a 16k output through ``get_info().defaults``."""

    def get_info(self) -> dict[str, Any]:
        return {"defaults": {"context_window": 200_000, "max_output_tokens": 16_000}}


class FailingLookup:
    """Its model lookups raise: the explicit budget stands, the failure is logged."""

    def get_model_info(self) -> None:
        raise RuntimeError("model registry down")

    def get_info(self) -> None:
        raise RuntimeError("info down")


async def _derive(**kwargs: Any) -> Budget:
    settings = {"max_tokens": None, "max_tokens_fallback": 100_000, "output_reserve_fraction": 1.0}
    return await derive_budget(**{"token_budget": None, "provider": None, **settings, **kwargs})


async def test_the_budgets_words_say_when_max_tokens_caps_it() -> None:
    capped = await _derive(token_budget=90_000, max_tokens=50_000)
    assert capped.capped and capped.effective_budget == 50_000
    assert capped.parts_text() == (
        "the budget is 50,000 tokens (explicit), capped by max_tokens 50,000"
    )
    for room in (40_000, 50_000):  # below max_tokens, or exactly at it: nothing is capped
        under = await _derive(token_budget=room, max_tokens=50_000)
        assert (
            not under.capped and under.parts_text() == f"the budget is {room:,} tokens (explicit)"
        )
    windowed = await _derive(
        provider=WindowProvider(), max_tokens=30_000, held_back=lambda _name: (1_000, 0)
    )
    assert windowed.capped and windowed.effective_budget == 29_000
    words = windowed.parts_text()
    assert words.startswith("the 200,000-token window less 16,000 for the output")
    assert words.endswith(", capped by max_tokens 30,000")


async def test_a_failing_model_name_lookup_is_logged_and_the_budget_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="amplifier_module_context_simple.sizing._budget"):
        budget = await _derive(token_budget=40_000, provider=FailingLookup())
    assert budget.effective_budget == 40_000 and budget.model_name is None
    logged = [r.getMessage() for r in caplog.records]
    assert "Provider get_model_info() failed" in logged
    assert "Provider get_info() failed" in logged
    assert all(r.levelno == logging.DEBUG for r in caplog.records)  # quiet: a name only


# --- _measured --------------------------------------------------------------------------------


class Undercount(Ref):
    """Counts 500 tokens less than the view's own estimate: nothing beyond the view."""

    async def count_view(self, view: list[dict[str, Any]]) -> dict[str, Any]:
        envelope = await super().count_view(view)
        decision = envelope["budget_decision"]
        decision["estimated_input_tokens"] -= TOOLS_OVERHEAD + 500
        decision["measurement"]["input_tokens"] -= TOOLS_OVERHEAD + 500
        return envelope


@pytest.mark.parametrize(("counter", "overhead"), [(Ref, TOOLS_OVERHEAD), (Undercount, 0)])
async def test_the_measured_overhead_is_what_the_count_holds_beyond_the_view(
    counter: type[Ref], overhead: int
) -> None:
    manager, recorder = await measured(max_tokens=12_000)
    result = await call(manager, counter(manager))
    assert await result["transaction"].commit() is True
    [event] = recorder.named("context:compaction")
    assert event["overhead_tokens"] == overhead
    assert event["measured_tokens"] == result["measured_before"]


async def test_the_estimate_fallback_counts_the_escalated_view_once_more() -> None:
    manager, recorder = await measured(max_tokens=12_000)
    ref = Ref(manager, faults_from=(1, "none"))
    result = await call(manager, ref)
    assert result["outcome"] == "measurement_unavailable"
    assert result["count_calls"] == 2 == len(ref.counted)
    assert result["base_view"] is ref.counted[-1] is not ref.counted[0]
    assert await result["transaction"].commit() is True
    [event] = recorder.named("context:compaction")
    assert event["count_calls"] == 2 and event["overhead_tokens"] is None


async def test_a_kept_compaction_settles_the_transaction() -> None:
    manager, coordinator = await mounted()
    measured_view = coordinator.get_capability("context.measured_request_view")
    result = await measured_view(
        provider=None, retain_contents=[], count_view=Ref(manager).count_view
    )
    transaction = result["transaction"]
    late: list[bool] = []

    async def after(event: str, data: dict[str, Any]) -> HookResult:
        transaction.rollback()  # too late: the compaction was kept
        late.append(await transaction.commit())
        return HookResult(action="continue")

    # context:budget comes after the compaction was kept (after context:post_compact).
    coordinator.hooks.register("context:budget", after, name="late-rollback")
    assert await transaction.commit() is True
    assert late == [True] and transaction.done
    assert manager.compaction_level > 0
    assert await transaction.commit() is True
