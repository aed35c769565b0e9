"""``SimpleContextManager``: wiring, admission and the public methods. Requests are planned
by ``_planner``, committed and announced by ``_session``, and driven by ``_retention`` /
``_measured`` for their capabilities."""

from __future__ import annotations

__all__ = ["SimpleContextManager"]

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self

from . import _events as events
from . import _measured, _retention
from ._admission import Clock, admit, admit_all
from ._budget_now import budget_now
from ._config import ContextConfig, unknown_keys_text
from ._decisions import Decisions
from ._envelope import FitOutput, fit, read_envelope
from ._estimate import estimate_message_tokens
from ._history import HistoryIndex
from ._meter import TokenMeter
from ._planner import Planner
from ._session import Pipeline, SessionState
from ._shape_warnings import ShapeWarnings
from ._system_prompt import SystemPromptFactory
from ._thinking_loss import ThinkingLoss
from ._turns import after_rewrite
from .request_view import request_view

logger = logging.getLogger(__name__)


class SimpleContextManager:
    """Holds a session's messages and hands out views that fit the model's window.

    The constructor takes every configuration key as a keyword (the fields of
    ``ContextConfig``, same names and defaults; a test keeps the two in step) and keeps each
    value readable as an attribute of the same name. The configuration is frozen: the
    attributes report it, they do not change it.

    Compatibility surface for subclasses (``amplifier-module-context-persistent``): a mutable
    ``self.messages`` list that every request reads (it may be reassigned, and may hold dicts
    that never passed through ``add_message``), ``self._estimate_tokens(messages)``, the
    config attributes, ``get_messages_for_request(token_budget, provider)`` called
    positionally, ``get_messages()`` / ``clear()`` via ``super()``, and
    ``_last_token_meter_stats``. For example::

        class FileBackedContext(SimpleContextManager):
            path = "transcript.jsonl"

            async def get_messages_for_request(self, token_budget=None, provider=None):
                self.messages = load_jsonl(self.path)  # fresh dicts, same order
                return await super().get_messages_for_request(token_budget, provider)

    ``amplifier-module-context-managed`` subclasses it too. Besides the above it overrides
    ``get_messages_for_request_retaining`` and ``get_measured_request_view``, and reads thin
    names over what the request paths do (none is a second implementation):
    ``_calculate_budget(token_budget, provider)`` (sync: the whole-request budget),
    ``_strip_internal_metadata(rows)`` (``request_view(rows, strip_sequence=True)``, the same
    public-history projection every view applies), ``_measured_budget_decision(envelope)``,
    ``await _fit_measured_output(fit_output, view, attempt)`` (the measured path's envelope
    validators) and ``_system_prompt_factory`` (the factory ``set_system_prompt_factory``
    registered). The module ``amplifier_module_context_simple.request_view`` holds
    ``request_view``.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # A misspelt keyword is a programming error: it raises, as Python would, but names the
        # key it was meant to be (the mount config logs the same words and goes on).
        if cls.__init__ is SimpleContextManager.__init__:
            unknown = [k for k in kwargs if k not in _KEYS and k not in _OTHER_KEYWORDS]
            if unknown:
                raise TypeError(f"SimpleContextManager(): {unknown_keys_text(unknown)}")
        return super().__new__(cls)

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        max_tokens_fallback: int = 200_000,
        compact_threshold: float = 0.92,
        target_usage: float = 0.50,
        protected_recent: float = 0.30,
        protected_tool_results: int = 5,
        truncate_chars: int = 250,
        compaction_notice_enabled: bool = True,
        compaction_notice_token_reserve: int = 800,
        compaction_notice_verbosity: str = "normal",
        compaction_notice_min_level: int = 1,
        compaction_notice_placement: str = "in_place",
        compaction_map_share: float = 0.05,
        output_reserve_fraction: float = 1.0,
        token_meter: str = "estimate",
        max_tool_result_bytes: int = 131_072,
        token_family: str | None = None,
        escalate_at_turn_start: bool = True,
        cache_ttl_seconds: float = 300.0,
        cold_cache_distance: float = 0.15,
        hooks: Any = None,
        clock: Clock | None = None,
    ) -> None:
        # Every parameter but ``hooks`` is a ContextConfig field (tests/test_planner.py checks).
        config = ContextConfig.from_mapping({k: v for k, v in locals().items() if k in _KEYS})
        self.config = config
        if config.target_not_below_trigger:
            logger.warning(
                "context-simple: target_usage %s is not below compact_threshold %s: a "
                "compaction aims for a view no smaller than the one that starts it, so it "
                "reduces next to nothing",
                config.target_usage,
                config.compact_threshold,
            )
        self.hooks = hooks
        self._clock = clock
        """Admission's clock (None: the current UTC time): the timestamps the history records,
        which the cold-cache rule reads."""
        self.messages: list[dict[str, Any]] = []
        self._index = HistoryIndex(estimate_message_tokens, json_cap=config.max_tool_result_bytes)
        self._index.on_rewrite = self._history_rewritten
        self._state = SessionState()
        self._planner = Planner(config, self._index)
        self._pipeline = Pipeline(self, self._planner, self._state)
        self._shapes = ShapeWarnings()
        self.thinking_loss = ThinkingLoss()
        """What the provider reported of the thinking blocks prefix edits cost (``mount``
        registers its handler for the provider's events)."""

    def __getattr__(self, name: str) -> Any:
        """The configuration keys, read from the one frozen record (``manager.max_tokens``)."""
        # Only reached for names not found the usual way, so nothing else pays for it.
        if name in _KEYS:
            return getattr(self.config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------------ history

    async def add_message(self, message: dict[str, Any]) -> None:
        """Admit one message; a structurally broken one is refused before anything is stored."""
        stored, clips = admit(
            message, len(self.messages), self.config.max_tool_result_bytes, clock=self._clock
        )
        state = self._state
        if state.walked == len(self.messages):
            # Appended to a history this manager has followed from its start: it plans (or
            # chose not to plan) its own request points, none of them is walked again.
            state.walked += 1
        self._shapes.check(stored, len(self.messages))
        self.messages.append(stored)
        for clip in clips:
            await events.safe_emit(self.hooks, events.INGRESS_TRUNCATED, clip)

    async def get_messages(self) -> list[dict[str, Any]]:
        """The whole canonical history, as a new list."""
        return list(self.messages)

    async def set_messages(self, messages: list[dict[str, Any]]) -> None:
        """Replace the history (session resume). All-or-nothing: one bad message refuses all."""
        if not isinstance(messages, list | tuple):
            raise TypeError(
                f"set_messages expects a list of messages, got {type(messages).__name__}"
            )
        stored, clips = admit_all(messages, self.config.max_tool_result_bytes, clock=self._clock)
        self._shapes.check_all(stored)
        self._reset_derived()
        self.messages = stored
        for clip in clips:
            await events.safe_emit(self.hooks, events.INGRESS_TRUNCATED, clip)

    async def clear(self) -> None:
        """Empty the history and forget everything derived from it."""
        self.messages = []
        self._reset_derived()

    def _history_rewritten(self, position: int) -> None:
        """``self.messages`` was reassigned with a history that differs from ``position`` on.

        Runs inside the request's synchronous scope step, before its plan reads the decisions.
        """
        state = self._state
        state.decisions = after_rewrite(
            self._index, state.decisions, position, self.config.truncate_chars
        )
        if state.stats is not None:
            state.stats = state.stats.rewritten()

    def _reset_derived(self) -> None:
        self._index.reset()
        self._state.reset()
        self._planner.reset()

    # ------------------------------------------------------------------ requests

    async def set_system_prompt_factory(self, factory: SystemPromptFactory | None) -> None:
        """Register an async callable whose text becomes the view's first system message."""
        self._planner.system_prompt.factory = factory

    def set_tool_definitions(self, tools: Iterable[Any] | Callable[[], Any] | None) -> None:
        """Tell the budget which tool definitions every request will carry.

        ``tools`` is a list (tool objects with ``name``, ``description`` and ``input_schema``,
        or definitions as a provider receives them), a callable returning the current tools
        (``mount`` passes the coordinator's mounted tools this way), or ``None`` for none.
        Their estimate is held back from the budget and recomputed only when the set changes.
        """
        self._planner.tools.use(tools)

    async def get_messages_for_request(
        self,
        token_budget: int | None = None,
        provider: Any = None,
        *,
        max_output_tokens: int | None = None,
    ) -> list[dict[str, Any]]:
        """The provider-facing view for the next request (a new list, history unchanged).

        ``max_output_tokens`` is the output the request will ask for, when the orchestrator
        sets one; otherwise the budget holds back what the provider publishes it sends.
        Protection wins over the target here: when protected content alone is too large the
        view is returned anyway, with a warning. Orchestrators that want a hard ceiling use
        ``get_messages_for_request_retaining(..., hard_fit=True)``, which fails closed.
        """
        pipeline = self._pipeline
        scope = await pipeline.scope(token_budget, provider, requested_output=max_output_tokens)
        plan = pipeline.plan(scope)
        await pipeline.deliver(plan)
        return plan.view  # type: ignore[return-value]

    async def get_messages_for_request_retaining(
        self,
        *,
        retain_contents: Iterable[str],
        provider: Any = None,
        token_budget: int | None = None,
        hard_fit: bool = False,
        max_output_tokens: int | None = None,
    ) -> list[dict[str, Any]]:
        """A view that keeps the named reminder envelopes whole (``context.request_retention``).

        ``hard_fit`` targets the budget itself instead of ``target_usage``. Raises
        ``ValueError`` for a body that was never admitted and ``ContextLengthError`` when the
        required set cannot fit (the tool definitions and output included); either way
        nothing changes.
        """
        return await _retention.get_messages_for_request_retaining(
            self._pipeline,
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
        count_view: _measured.CountView,
        fit_output: _measured.FitOutput | None = None,
    ) -> dict[str, Any]:
        """Walk the ladder on the orchestrator's provider counts (``token_meter='actual'``)."""
        return await _measured.get_measured_request_view(
            self._pipeline,
            provider=provider,
            retain_contents=retain_contents,
            count_view=count_view,
            fit_output=fit_output,
        )

    def claim_foreground_usage(self) -> Callable[..., bool]:
        """For an orchestrator that owns the token count: returns its usage recorder."""
        return self._state.meter.claim_foreground_usage()

    def _estimate_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Estimated tokens of ``messages`` (kept for subclasses that call it)."""
        return sum(self._index.estimate(m) for m in messages)

    @property
    def decisions(self) -> Decisions:
        """The sticky decisions in force (removed / truncated / stubbed positions, level)."""
        return self._state.decisions

    @property
    def compaction_level(self) -> int:
        return self._state.decisions.level

    @property
    def compaction_stats(self) -> dict[str, Any] | None:
        stats = self._state.stats
        return None if stats is None else stats.payload()

    @property
    def token_meter_stats(self) -> dict[str, Any] | None:
        """Meter statistics of the latest request (read-only copy)."""
        stats = self._state.meter_stats
        return None if stats is None else {**stats, **self.thinking_loss.stats()}

    @property
    def _last_token_meter_stats(self) -> dict[str, Any] | None:
        """The latest meter statistics (the name the spec and subclasses use)."""
        return self._state.meter_stats

    @_last_token_meter_stats.setter
    def _last_token_meter_stats(self, stats: dict[str, Any] | None) -> None:
        self._state.meter_stats = stats

    # -------------------------------------------- subclass surface (context-managed)

    def _calculate_budget(self, token_budget: int | None, provider: Any) -> int:
        """The whole-request budget for ``provider``, synchronously.

        An explicit ``token_budget`` wins over the provider; otherwise the window the provider
        publishes (``get_model_info()``, then ``get_info().defaults``) less the output it
        asks for and the safety margin, or ``max_tokens_fallback`` without one (no provider,
        no model info). ``max_tokens`` caps it on every path. This is the figure a request
        derives as ``request_budget`` (``_budget.derive_budget``, run without an event loop by
        ``_budget_now``); it differs on purpose from the spec's
        ``context_window - 0.5 * max_output_tokens - 4096``, which held back neither the output
        a provider really asks for nor what the request carries besides the messages.
        """
        return budget_now(self.config, token_budget, provider).request_budget

    def _strip_internal_metadata(self, rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The final execution projection: ``request_view(rows, strip_sequence=True)``."""
        return request_view(rows, strip_sequence=True)

    def _measured_budget_decision(self, envelope: object) -> tuple[int, int, int, str] | None:
        """``(count, estimate, limit, source)`` of a counted envelope, as the measured path reads
        it: ``None`` without a usable ``provider_count`` measurement (or a ``budget_decision`` of
        ``None``); a malformed envelope raises ``TypeError`` naming what is wrong."""
        reading = read_envelope(envelope)
        return None if reading is None else reading.figures()

    async def _fit_measured_output(
        self, fit_output: FitOutput, view: list[dict[str, Any]], attempt: Mapping[str, Any]
    ) -> tuple[Mapping[str, Any], tuple[int, int, int, str], int] | None:
        """Await ``fit_output(view, attempt)`` and validate its envelope as the measured path
        does: ``(envelope, (count, estimate, limit, source), count_calls)``, ``None`` when the
        orchestrator has no smaller output; ``TypeError`` for a malformed envelope and
        ``ContextLengthError`` for one still over the limit."""
        fitted = await fit(fit_output, view, attempt)
        if fitted is None:
            return None
        envelope, reading, calls = fitted
        return envelope, reading.figures(), calls

    @property
    def _system_prompt_factory(self) -> SystemPromptFactory | None:
        """The factory ``set_system_prompt_factory`` registered (an async callable or ``None``)."""
        return self._planner.system_prompt.factory

    @_system_prompt_factory.setter
    def _system_prompt_factory(self, factory: SystemPromptFactory | None) -> None:
        self._planner.system_prompt.factory = factory

    # ------------------------------------------------------------------ state

    @property
    def meter(self) -> TokenMeter:
        """The token meter (its ``on_llm_response`` is the ``llm:response`` hook)."""
        return self._state.meter

    @property
    def planner(self) -> Planner:
        """The request planner (its ``rendered_messages`` counts what requests rendered)."""
        return self._planner

    @property
    def view_repairs(self) -> tuple[str, ...]:
        """What the latest view repaired or projected, one ``"kind: detail"`` string each.

        Kinds come from ``REPAIR_KINDS``: pairing repairs (placeholders added, orphan or stray
        results left out) and projections onto the host's model (images, calls, ids...).
        """
        return self._state.diagnostics.repairs


_KEYS = frozenset(ContextConfig.__dataclass_fields__)
_OTHER_KEYWORDS = frozenset({"hooks", "clock"})
"""The constructor's keywords that are no config key."""
