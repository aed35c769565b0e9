"""The subclass surface amplifier-module-context-managed relies on (issue 30).

``ManagedRequestContext`` below uses ``SimpleContextManager`` the way context-managed's request
context does: it keeps the public history itself (display-only rows, public copies, a ``_seq``
in every row's metadata), rolls old turns into a summary and assigns ``self.messages`` directly
(no admission, so no ingress clipping), sizes its boundary with ``_calculate_budget`` (without a
provider when it is built, with the request's provider before each request), reads
``_system_prompt_factory`` to charge the system prompt, projects with ``request_view`` before
counting and with ``_strip_internal_metadata`` before the orchestrator counts, reads counts with
``_measured_budget_decision`` and relieves the output with ``_fit_measured_output``, and
overrides ``get_messages_for_request_retaining`` and ``get_measured_request_view``. It is
mounted on the host's coordinator (``MockCoordinator`` is the real, Rust-backed
``ModuleCoordinator`` with its hook registry and capability registry) and driven the way an
orchestrator drives it: plain requests, a retaining hard-fit request through the capability, a
measured request through the capability, committed.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from typing import Any

import pytest
from amplifier_core import HookResult
from amplifier_core.llm_errors import ContextLengthError
from amplifier_core.message_models import ChatRequest, Message
from amplifier_core.testing import MockCoordinator
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import amplifier_module_context_simple as package
from amplifier_module_context_simple import SimpleContextManager, check_view, mount
from amplifier_module_context_simple.request_view import request_view
from amplifier_module_context_simple.sizing._budget import PROVIDER_WARNINGS

REFERENCE_ONLY = "amplifier_public_reference_only"
PUBLIC_KEYS = ("amplifier_public_message", "amplifier_public_copy_source", REFERENCE_ONLY)
SUMMARY_SOURCE = "context-managed-summary"
BIG = "collected 412 items; test_parser.py::test_nested FAILED at line 88\n" * 45  # ~900 tokens
REMINDER = '<system-reminder source="hooks-todo">Keep the todo list current.</system-reminder>'
WINDOW, OUTPUT = 24_000, 4_000
LIMIT = 30_000
"""The provider's hard input limit in the orchestrator double (above every request here)."""
SURFACE = (
    "_calculate_budget",
    "_strip_internal_metadata",
    "_measured_budget_decision",
    "_fit_measured_output",
    "_system_prompt_factory",
)

CountView = Callable[[list[dict[str, Any]]], Awaitable[Mapping[str, Any]]]
FitOutput = Callable[[list[dict[str, Any]], Mapping[str, Any]], Awaitable[Mapping[str, Any] | None]]


class ManagedRequestContext(SimpleContextManager):
    """A rolling-summary request context shaped like context-managed's (see the module doc)."""

    def __init__(self, *, summary_share: float = 0.5, **config: Any) -> None:
        super().__init__(**config)
        self.store: list[dict[str, Any]] = []
        """The public history as the session keeps it: every row, display-only ones too."""
        self.summarised = 0
        """How many leading store rows the summary stands for."""
        self.summary_share = summary_share
        # Built before any provider is known: its first boundary is the provider-less figure.
        self.boundary_budget = self._calculate_budget(None, None)
        self.rolls = 0
        self.factories_read: list[object] = []
        self.readings: list[tuple[int, int, int, str] | None] = []
        self.fits: list[tuple[tuple[int, int, int, str], int]] = []
        self.counted_rows: list[list[dict[str, Any]]] = []

    # --- the boundary engine ----------------------------------------------------------------

    async def add_message(self, message: dict[str, Any]) -> None:
        meta = dict(message.get("metadata") or {})
        meta["_seq"] = len(self.store)
        self.store.append({**message, "metadata": meta})
        self._rebuild()

    def _rebuild(self) -> None:
        rows = self.store[self.summarised :]
        if self.summarised:
            summary = {
                "role": "user",
                "content": f"[Summary of the first {self.summarised} messages: parser work]",
                "metadata": {"source": SUMMARY_SOURCE, "_seq": -1},
            }
            rows = [summary, *rows]
        self.messages = rows  # assigned directly: no admission, no ingress clipping

    def _prompts(self) -> list[int]:
        """Store positions of the prompts a person typed (turn boundaries safe to cut at)."""
        return [
            i
            for i, m in enumerate(self.store)
            if m.get("role") == "user"
            and isinstance(m.get("content"), str)
            and not m["metadata"].get(REFERENCE_ONLY)
            and not m["metadata"].get("ephemeral")
        ]

    async def _roll(self, token_budget: int | None, provider: Any) -> None:
        """Summarise whole old turns while what would be sent is over its share of the budget."""
        self.boundary_budget = self._calculate_budget(token_budget, provider)
        factory = self._system_prompt_factory
        self.factories_read.append(factory)
        system = ""
        if factory is not None:
            text = factory()
            system = await text if isinstance(text, Awaitable) else text  # pyright: ignore[reportUnknownVariableType]
        charged = self._estimate_tokens([{"role": "system", "content": system}]) if system else 0
        while (
            self._estimate_tokens(request_view(self.messages)) + charged
            > self.boundary_budget * self.summary_share
        ):
            later = [p for p in self._prompts()[:-1] if p > self.summarised]
            if not later:
                return
            self.summarised = later[0]
            self.rolls += 1
            self._rebuild()

    # --- the request paths it overrides -------------------------------------------------------

    async def get_messages_for_request(
        self,
        token_budget: int | None = None,
        provider: Any = None,
        *,
        max_output_tokens: int | None = None,
    ) -> list[dict[str, Any]]:
        await self._roll(token_budget, provider)
        return await super().get_messages_for_request(
            token_budget, provider, max_output_tokens=max_output_tokens
        )

    async def get_messages_for_request_retaining(
        self,
        *,
        retain_contents: Iterable[str],
        provider: Any = None,
        token_budget: int | None = None,
        hard_fit: bool = False,
        max_output_tokens: int | None = None,
    ) -> list[dict[str, Any]]:
        await self._roll(token_budget, provider)
        return await super().get_messages_for_request_retaining(
            retain_contents=retain_contents,
            provider=provider,
            token_budget=token_budget,
            hard_fit=hard_fit,
            max_output_tokens=max_output_tokens,
        )

    async def get_measured_request_view(
        self,
        *,
        provider: Any,
        retain_contents: Iterable[str],
        count_view: CountView,
        fit_output: FitOutput | None = None,
    ) -> dict[str, Any]:
        await self._roll(None, provider)

        async def count(view: list[dict[str, Any]]) -> Mapping[str, Any]:
            rows = self._strip_internal_metadata(view)
            self.counted_rows.append(rows)
            envelope = await count_view(rows)
            self.readings.append(self._measured_budget_decision(envelope))
            return envelope

        relieve: FitOutput | None = None
        if fit_output is not None:
            fit = fit_output

            async def relieve(
                view: list[dict[str, Any]], attempt: Mapping[str, Any]
            ) -> Mapping[str, Any] | None:
                rows = self._strip_internal_metadata(view)
                fitted = await self._fit_measured_output(fit, rows, attempt)
                if fitted is None:
                    return None
                envelope, reading, calls = fitted
                self.fits.append((reading, calls))
                return envelope

        return await super().get_measured_request_view(
            provider=provider, retain_contents=retain_contents, count_view=count, fit_output=relieve
        )


async def mount_managed(
    coordinator: Any, config: Mapping[str, Any] | None = None
) -> ManagedRequestContext:
    """Mounts like context-managed: its own instance at ``"context"``, the capabilities."""
    context = ManagedRequestContext(hooks=coordinator.hooks, **dict(config or {}))
    await coordinator.mount("context", context, name="context-managed")
    coordinator.register_capability(
        "context.request_retention", context.get_messages_for_request_retaining
    )
    if context.token_meter == "actual":
        coordinator.register_capability(
            "context.measured_request_view", context.get_measured_request_view
        )
    return context


class ModelInfoProvider:
    """Publishes its window through ``get_model_info()``; sync or async, as providers do."""

    def __init__(self, window: int = WINDOW, output: int = OUTPUT, *, asynchronous: bool = False):
        self.info = {"context_window": window, "max_output_tokens": output}
        self.asynchronous = asynchronous

    def get_model_info(self) -> Any:
        if not self.asynchronous:
            return self.info

        async def answer() -> dict[str, int]:
            return self.info

        return answer()


class Orchestrator:
    """Counts what it is handed (the estimate plus its tools), like the protocol tests' double;
    ``fit_output`` relieves the output by a fixed figure and counts once more."""

    def __init__(self, context: SimpleContextManager, *, tools: int = 300, relief: int = 0):
        self.context, self.tools, self.relief = context, tools, relief
        self.fitted: list[list[dict[str, Any]]] = []

    def envelope(self, view: list[dict[str, Any]], tokens: int, calls: int = 0) -> dict[str, Any]:
        envelope: dict[str, Any] = {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": LIMIT,
                "measurement": {
                    "kind": "provider_count",
                    "source": "double",
                    "input_tokens": tokens,
                },
            },
        }
        if calls:
            envelope["count_calls"] = calls
        return envelope

    async def count_view(self, view: list[dict[str, Any]]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.envelope(view, self.context._estimate_tokens(view) + self.tools)

    async def fit_output(
        self, view: list[dict[str, Any]], attempt: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        self.fitted.append(view)
        if not self.relief:
            return None
        tokens = attempt["budget_decision"]["estimated_input_tokens"] - self.relief
        return self.envelope(view, tokens, calls=1)


def public_markers(view: Iterable[Mapping[str, Any]]) -> list[str]:
    return [
        key
        for m in view
        if isinstance(m.get("metadata"), Mapping)
        for key in PUBLIC_KEYS
        if key in m["metadata"]
    ]


def assert_sendable(view: list[dict[str, Any]], context: ManagedRequestContext) -> None:
    assert public_markers(view) == [], "no display-only row, no public copy"
    assert check_view(view, history=context.messages) == []
    ChatRequest(messages=[Message(**m) for m in view])


async def turn(context: SimpleContextManager, n: int, rounds: int = 3) -> None:
    """A turn as Amplifier stores it: the typed prompt for display, the expanded one executed."""
    typed = f"Turn {n}: fix the failing test in @tests/test_parser.py"
    await context.add_message(
        {"role": "user", "content": typed, "metadata": {REFERENCE_ONLY: True}}
    )
    await context.add_message(
        {
            "role": "user",
            "content": f"Turn {n}: fix the failing test in <file>def test_nested(): ...</file>",
            "metadata": {
                "amplifier_public_message": {"role": "user", "content": typed},
                "amplifier_public_copy_source": "mention-expansion",
            },
        }
    )
    # The todo hook's reminder, persisted: an orchestrator may ask to retain it.
    reminder = {"ephemeral": True, "persisted": True, "source": "hook"}
    await context.add_message({"role": "user", "content": REMINDER, "metadata": reminder})
    for r in range(rounds):
        call_id = f"t{n}_r{r}"
        call = {"id": call_id, "tool": "bash", "arguments": {"cmd": "pytest -x"}}
        await context.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
        await context.add_message({"role": "tool", "tool_call_id": call_id, "content": BIG})
    await context.add_message({"role": "assistant", "content": f"Turn {n} is done."})


# --- the whole flow -----------------------------------------------------------------------------


async def test_the_stand_in_mounts_and_serves_plain_hard_fit_and_measured_requests() -> None:
    coordinator = MockCoordinator()
    seen: list[tuple[str, dict[str, Any]]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        seen.append((event, data))
        return HookResult(action="continue")

    for name in ("context:compaction", "context:budget"):
        coordinator.hooks.register(name, record, name=f"managed-{name}")
    context = await mount_managed(coordinator, {"token_meter": "actual", "summary_share": 0.6})
    assert coordinator.get("context") is context
    assert context.boundary_budget == 200_000, "built without a provider: max_tokens_fallback"

    async def system_prompt() -> str:
        return "You are a careful coding agent."

    assert context._system_prompt_factory is None
    await context.set_system_prompt_factory(system_prompt)
    assert context._system_prompt_factory is system_prompt

    provider = ModelInfoProvider()
    for n in range(6):  # several requests, one per turn
        await turn(context, n)
        view = await context.get_messages_for_request(None, provider)
        assert_sendable(view, context)
        assert view[0]["content"] == "You are a careful coding agent."
        assert view[-1]["content"] == f"Turn {n} is done."
    assert context.rolls > 0, "old turns were rolled into the summary"
    assert context.factories_read[-1] is system_prompt
    (budget, *_) = [d for e, d in seen if e == "context:budget"]
    assert context.boundary_budget == budget["request_budget"], "the budget a request derives"
    assert all(m["metadata"].get("_seq") is not None for m in context.messages)

    hard_fit = coordinator.get_capability("context.request_retention")
    budget = 3_500
    view = await hard_fit(retain_contents=[REMINDER], token_budget=budget, hard_fit=True)
    assert_sendable(view, context)
    assert any(m.get("content") == REMINDER for m in view)
    assert context._estimate_tokens(view) <= budget
    assert context.boundary_budget == budget, "an explicit budget wins"

    await turn(context, 6, rounds=4)
    orchestrator = Orchestrator(context)
    measured = coordinator.get_capability("context.measured_request_view")
    result = await measured(
        provider=provider,
        retain_contents=[REMINDER],
        count_view=orchestrator.count_view,
        fit_output=orchestrator.fit_output,
    )
    assert_sendable(result["base_view"], context)
    for rows in context.counted_rows:
        assert public_markers(rows) == []
        assert all("_seq" not in (m.get("metadata") or {}) for m in rows), "final projection"
    (count, estimate, limit, source) = context.readings[0] or (0, 0, 0, "")
    assert (count, limit, source) == (result["measured_before"], LIMIT, "double")
    assert estimate == count
    assert result["outcome"] in ("not_needed", "target_reached", "protected_floor")
    assert await result["transaction"].commit()

    # The public history is stored as it came: the keys are still there, on the stored rows.
    assert sum(REFERENCE_ONLY in m["metadata"] for m in context.store) == 7
    assert sum("amplifier_public_message" in m["metadata"] for m in context.store) == 7


async def test_a_measured_request_over_the_limit_is_relieved_through_fit_measured_output() -> None:
    coordinator = MockCoordinator()
    context = await mount_managed(coordinator, {"token_meter": "actual", "max_tokens": 200_000})
    for n in range(3):
        await turn(context, n)
    measured = coordinator.get_capability("context.measured_request_view")
    # Tools heavy enough that even the floor is over the limit: only a smaller output helps.
    orchestrator = Orchestrator(context, tools=LIMIT, relief=LIMIT)
    result = await measured(
        provider=None,
        retain_contents=[],
        count_view=orchestrator.count_view,
        fit_output=orchestrator.fit_output,
    )
    assert result["outcome"] == "reduced_output"
    ((reading, calls),) = context.fits
    assert calls == 1
    assert reading == (
        result["measured_after"],
        result["measured_after"],
        LIMIT,
        "double",
    )
    assert result["count_calls"] == len(context.counted_rows) + calls
    assert public_markers(orchestrator.fitted[0]) == []

    orchestrator.relief = 0  # no smaller output: the measured path fails closed
    with pytest.raises(ContextLengthError):
        await measured(
            provider=None,
            retain_contents=[],
            count_view=orchestrator.count_view,
            fit_output=orchestrator.fit_output,
        )


# --- each name ----------------------------------------------------------------------------------


def test_the_surface_stays_out_of_the_package_exports() -> None:
    assert not set(SURFACE) & set(package.__all__)
    assert "request_view" not in package.__all__
    for name in SURFACE:
        assert hasattr(SimpleContextManager, name), name


async def test_calculate_budget_on_a_bare_instance() -> None:
    bare = SimpleContextManager()
    assert bare._calculate_budget(None, None) == 200_000
    assert bare._calculate_budget(None, object()) == 200_000, "no model info: the fallback"
    assert bare._calculate_budget(7_000, ModelInfoProvider()) == 7_000, "explicit wins"
    capped = SimpleContextManager(max_tokens=9_000, max_tokens_fallback=50_000)
    assert capped._calculate_budget(None, None) == 9_000
    assert capped._calculate_budget(None, ModelInfoProvider()) == 9_000
    assert capped._calculate_budget(20_000, None) == 9_000, "max_tokens caps every path"
    with pytest.raises(ValueError, match="token_budget"):
        bare._calculate_budget(0, None)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_calculate_budget_is_the_request_budget_a_request_derives(
    asynchronous: bool,
) -> None:
    events: list[tuple[str, dict[str, Any]]] = []

    class Hooks:
        async def emit(self, event: str, data: dict[str, Any]) -> None:
            events.append((event, data))

    provider = ModelInfoProvider(asynchronous=asynchronous)
    manager = SimpleContextManager(hooks=Hooks())
    manager.set_tool_definitions(
        [{"name": "bash", "description": "run a command " * 40, "input_schema": {}}]
    )
    await manager.add_message({"role": "user", "content": "hi"})
    figure = manager._calculate_budget(None, provider)
    await manager.get_messages_for_request(None, provider)
    ((_, budget),) = [e for e in events if e[0] == "context:budget"]
    assert figure == budget["request_budget"]
    # The whole request's budget: the window less the output asked for and the margin, so
    # the view's own budget is smaller by the tool definitions it holds back.
    assert figure == WINDOW - OUTPUT - WINDOW // 16
    assert budget["effective_budget"] == figure - budget["tool_definitions_tokens"] < figure


async def test_calculate_budget_reads_a_provider_that_only_yields_to_the_loop() -> None:
    class Polite:
        async def get_model_info(self) -> dict[str, int]:
            await asyncio.sleep(0)  # lets others run, waits for nothing
            return {"context_window": WINDOW, "max_output_tokens": OUTPUT}

    assert SimpleContextManager()._calculate_budget(None, Polite()) == (
        WINDOW - OUTPUT - WINDOW // 16
    )


async def test_calculate_budget_with_a_provider_that_really_waits_falls_back_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Waiting:
        async def get_model_info(self) -> dict[str, int]:
            await asyncio.sleep(0.001)
            return {"context_window": WINDOW, "max_output_tokens": OUTPUT}

    manager = SimpleContextManager(max_tokens_fallback=60_000)
    with caplog.at_level(logging.WARNING):
        assert manager._calculate_budget(None, Waiting()) == 60_000
        assert manager._calculate_budget(None, Waiting()) == 60_000
    assert len([r for r in caplog.records if "asynchronously" in r.getMessage()]) <= 1
    # The request path awaits it and gets the window.
    await manager.add_message({"role": "user", "content": "hi"})
    await manager.get_messages_for_request(None, Waiting())


def test_the_synchronous_fallback_warns_once_per_provider_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Pending:
        """What an event loop would have to complete (``asyncio.sleep`` needs a running loop
        before it yields, so it fails outright here)."""

        def __await__(self) -> Generator[object, None, dict[str, int]]:
            yield self
            return {"context_window": WINDOW, "max_output_tokens": OUTPUT}

    class SlowWindow:
        async def get_model_info(self) -> dict[str, int]:
            return await Pending()

    class LateWindow(SlowWindow):
        pass

    PROVIDER_WARNINGS.clear()  # process-wide: an earlier test may have warned already
    manager = SimpleContextManager(max_tokens_fallback=60_000)
    with caplog.at_level(logging.WARNING):
        for provider in (SlowWindow(), SlowWindow(), LateWindow()):
            assert manager._calculate_budget(None, provider) == 60_000
    said = [r.getMessage() for r in caplog.records if "asynchronously" in r.getMessage()]
    # Once per provider, each named, with the setting the budget fell back on.
    assert said == [
        f"Provider {name} publishes its window only asynchronously; "
        "the synchronous budget uses max_tokens_fallback"
        for name in ("SlowWindow", "LateWindow")
    ]


async def test_system_prompt_factory_reads_what_was_registered() -> None:
    manager = SimpleContextManager()
    assert manager._system_prompt_factory is None

    def factory() -> str:
        return "Be brief."

    await manager.set_system_prompt_factory(factory)
    assert manager._system_prompt_factory is factory
    await manager.add_message({"role": "user", "content": "hi"})
    assert (await manager.get_messages_for_request())[0]["content"] == "Be brief."
    manager._system_prompt_factory = None  # a subclass that assigns it directly
    assert all(m["role"] != "system" for m in await manager.get_messages_for_request())
    await manager.set_system_prompt_factory(None)
    assert manager._system_prompt_factory is None


def test_strip_internal_metadata_is_the_final_request_view() -> None:
    rows = [
        {"role": "user", "content": "typed", "metadata": {REFERENCE_ONLY: True, "_seq": 0}},
        {
            "role": "user",
            "content": "expanded",
            "metadata": {"amplifier_public_message": {}, "_seq": 1, "source": "cli"},
        },
        {"role": "assistant", "content": "ok"},
    ]
    stored = copy.deepcopy(rows)
    stripped = SimpleContextManager()._strip_internal_metadata(rows)
    assert stripped == request_view(rows, strip_sequence=True)
    assert stripped == [
        {"role": "user", "content": "expanded", "metadata": {"source": "cli"}},
        {"role": "assistant", "content": "ok"},
    ]
    assert rows == stored


async def test_fit_measured_output_validates_as_the_measured_path_does() -> None:
    manager = SimpleContextManager(token_meter="actual")
    orchestrator = Orchestrator(manager)
    view = [{"role": "user", "content": "hi"}]
    attempt = orchestrator.envelope(view, 900)

    async def none(_view: list[dict[str, Any]], _attempt: Mapping[str, Any]) -> None:
        return None

    assert await manager._fit_measured_output(none, view, attempt) is None

    async def fitted(_view: list[dict[str, Any]], _attempt: Mapping[str, Any]) -> dict[str, Any]:
        return orchestrator.envelope(view, 700, calls=2)

    envelope, reading, calls = await manager._fit_measured_output(fitted, view, attempt) or (
        {},
        (),
        0,
    )
    assert envelope["count_calls"] == 2 and calls == 2
    assert reading == (700, 700, LIMIT, "double")

    async def no_calls(_view: list[dict[str, Any]], _attempt: Mapping[str, Any]) -> Any:
        return orchestrator.envelope(view, 700)

    with pytest.raises(TypeError, match="count_calls"):
        await manager._fit_measured_output(no_calls, view, attempt)

    async def malformed(_view: list[dict[str, Any]], _attempt: Mapping[str, Any]) -> Any:
        return ["not", "an", "envelope"]

    with pytest.raises(TypeError, match="fit_output"):
        await manager._fit_measured_output(malformed, view, attempt)

    async def still_over(_view: list[dict[str, Any]], _attempt: Mapping[str, Any]) -> Any:
        return orchestrator.envelope(view, LIMIT + 1, calls=1)

    with pytest.raises(ContextLengthError):
        await manager._fit_measured_output(still_over, view, attempt)


async def test_fit_measured_output_refuses_each_broken_rule_by_name() -> None:
    manager = SimpleContextManager(token_meter="actual")
    orchestrator = Orchestrator(manager)
    view = [{"role": "user", "content": "hi"}]
    attempt = orchestrator.envelope(view, 900)

    def returning(envelope: Any) -> Any:
        async def fit(_view: list[dict[str, Any]], _attempt: Mapping[str, Any]) -> Any:
            return envelope

        return fit

    # One count call is enough; the limit itself still fits.
    fitted = await manager._fit_measured_output(
        returning(orchestrator.envelope(view, LIMIT, calls=1)), view, attempt
    )
    assert fitted is not None and fitted[1:] == ((LIMIT, LIMIT, LIMIT, "double"), 1)
    for calls in (0, -1, True, "2"):
        envelope = orchestrator.envelope(view, 700)
        envelope["count_calls"] = calls
        with pytest.raises(TypeError, match="positive int 'count_calls'"):
            await manager._fit_measured_output(returning(envelope), view, attempt)
    not_counted = {"dispatch": {"messages": view}, "budget_decision": None, "count_calls": 1}
    heuristic = orchestrator.envelope(view, 700, calls=1)
    heuristic["budget_decision"]["measurement"]["kind"] = "heuristic"
    for envelope in (not_counted, heuristic):
        with pytest.raises(TypeError, match="no usable provider measurement"):
            await manager._fit_measured_output(returning(envelope), view, attempt)
    with pytest.raises(TypeError, match=r"^fit_output must return a mapping"):
        await manager._fit_measured_output(returning({"budget_decision": None}), view, attempt)
    over = orchestrator.envelope(view, LIMIT + 1, calls=1)
    with pytest.raises(ContextLengthError, match=rf"\({LIMIT + 1} > {LIMIT}\)"):
        await manager._fit_measured_output(returning(over), view, attempt)


# --- _measured_budget_decision and the measured path's own verdict ---------------------------

COUNTS = st.one_of(
    st.integers(-3, 3_000), st.booleans(), st.none(), st.just("120"), st.floats(0, 100)
)
MEASUREMENTS = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.fixed_dictionaries(
        {},
        optional={
            "kind": st.sampled_from(["provider_count", "heuristic", None]),
            "source": st.sampled_from(["provider", "", None, 3]),
            "input_tokens": COUNTS,
        },
    ),
)
DECISIONS = st.one_of(
    st.none(),
    st.integers(),
    st.fixed_dictionaries(
        {},
        optional={
            "estimated_input_tokens": COUNTS,
            "input_limit_tokens": st.one_of(COUNTS, st.integers(0, 10**6)),
            "measurement": MEASUREMENTS,
        },
    ),
)


@st.composite
def well_formed(draw: st.DrawFn) -> dict[str, Any]:
    """A decision with valid hard-safety fields; its count usable more often than not."""
    estimate = draw(st.integers(0, 3_000))
    limit = draw(st.one_of(st.integers(0, 3_000), st.just(10**6), st.just(10**6)))
    usable = {"kind": "provider_count", "source": "provider"}
    measurement = draw(
        st.one_of(
            st.builds(lambda n: {**usable, "input_tokens": n}, st.integers(0, estimate)),
            MEASUREMENTS,
        )
    )
    return {
        "estimated_input_tokens": estimate,
        "input_limit_tokens": limit,
        "measurement": measurement,
    }


COUNTED = st.fixed_dictionaries(
    {
        "dispatch": st.just({"messages": []}),
        "budget_decision": st.integers(0, 4).flatmap(
            lambda n: well_formed() if n < 3 else st.one_of(st.none(), DECISIONS)
        ),
    }
)
ENVELOPES = st.integers(0, 4).flatmap(
    # Mostly well formed (the verdict then turns on the figures), else anything at all.
    lambda n: (
        COUNTED
        if n < 4
        else st.one_of(
            st.none(),
            st.lists(st.integers(), max_size=2),
            st.fixed_dictionaries(
                {}, optional={"dispatch": st.just({"messages": []}), "budget_decision": DECISIONS}
            ),
        )
    )
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ENVELOPES)
async def test_measured_budget_decision_agrees_with_the_measured_path(envelope: Any) -> None:
    manager = SimpleContextManager(token_meter="actual")
    await manager.add_message({"role": "user", "content": "Refactor the parser."})
    await manager.add_message({"role": "assistant", "content": "On it."})
    expected: tuple[int, int, int, str] | None = None
    refused: TypeError | None = None
    try:
        expected = manager._measured_budget_decision(envelope)
    except TypeError as exc:
        refused = exc

    async def count_view(_view: list[dict[str, Any]]) -> Any:
        return envelope

    try:
        result = await manager.get_measured_request_view(
            provider=None, retain_contents=[], count_view=count_view
        )
    except TypeError as exc:
        assert refused is not None and str(exc) == str(refused)
        event("refused as malformed")
        return
    except ContextLengthError:
        # Known to be over the hard limit: refused whether or not the count was usable.
        assert refused is None
        decision = envelope["budget_decision"]
        assert decision["estimated_input_tokens"] > decision["input_limit_tokens"]
        event("over the hard limit")
        return
    assert refused is None
    assert result["measured_before"] == (None if expected is None else expected[0])
    event(f"outcome {result['outcome']}")
    if expected is None:
        assert result["outcome"] == "measurement_unavailable"
    else:
        count, estimate, limit, source = expected
        decision = envelope["budget_decision"]
        assert (estimate, limit) == (
            decision["estimated_input_tokens"],
            decision["input_limit_tokens"],
        )
        assert source == decision["measurement"]["source"] and count <= estimate <= limit
        assert result["measured_after"] == count


async def test_the_real_mount_still_registers_the_plain_manager() -> None:
    """context-managed mounts its own instance; this module's own mount is unchanged."""
    coordinator = MockCoordinator()
    cleanup = await mount(coordinator, {"token_meter": "actual"})
    manager = coordinator.get("context")
    assert type(manager) is SimpleContextManager
    assert manager._system_prompt_factory is None
    await cleanup()
