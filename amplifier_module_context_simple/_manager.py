"""``SimpleContextManager``: wiring, admission and the public methods. Requests are planned
by ``_planner``, committed and announced by ``_session``, and driven by ``_retention`` /
``_measured`` for their capabilities."""

from __future__ import annotations

__all__ = ["SimpleContextManager"]

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .history._admission import Admission, Clock
from .history._history import HistoryIndex
from .planning._config import ContextConfig, unknown_keys_text, warn_about_settings
from .planning._planner import Planner
from .planning._system_prompt import SystemPromptFactory
from .readings._meter import TokenMeter
from .readings._thinking_loss import ThinkingLoss
from .request_view import request_view
from .session import _measured, _retention
from .session._budget_now import budget_now
from .session._session import Pipeline, SessionState
from .sizing._envelope import FitOutput, decision_figures, fitted_figures
from .sizing._estimate import estimate_message_tokens
from .views._decisions import Decisions
from .vocabulary import _events as events

logger = logging.getLogger(__name__)


class SimpleContextManager:
    """Holds a session's messages and hands out views that fit the model's window.

    The constructor takes the configuration keys as keywords (the fields of ``ContextConfig``,
    whose defaults and checks they get) and keeps each value readable as an attribute of the
    same name. The configuration is frozen: the
    attributes report it, they do not change it. What subclasses may rely on (a reassignable
    ``self.messages``, the names ``context-persistent`` and ``context-managed`` read or
    override) is listed in docs/api.md, "Subclass surface": each such name here is a thin
    name over what the request paths do, never a second implementation.
    """

    def __init__(self, *, hooks: Any = None, clock: Clock | None = None, **settings: Any) -> None:
        # ``clock``: admission's (the cold-cache rule reads its stamps). A misspelt key is a
        # programming error: it raises, naming the key meant (a mount config logs it).
        if unknown := [k for k in settings if k not in _KEYS]:
            raise TypeError(f"SimpleContextManager(): {unknown_keys_text(unknown)}")
        config = ContextConfig.from_mapping(settings)
        self.config = config
        warn_about_settings(config)
        self.hooks = hooks
        self.messages: list[dict[str, Any]] = []
        self._admission = Admission(config.max_tool_result_bytes, clock)
        index = HistoryIndex(estimate_message_tokens, json_cap=config.max_tool_result_bytes)
        self._state = SessionState()
        self._planner = Planner(config, index)
        self._pipeline = Pipeline(self, self._planner, self._state)
        index.on_rewrite = self._pipeline.rewritten
        self.thinking_loss = ThinkingLoss()  # the provider's thinking events (``mount``)

    def __getattr__(self, name: str) -> Any:
        """The configuration keys, read from the one frozen record (``manager.max_tokens``)."""
        # Only reached for names not found the usual way, so nothing else pays for it.
        if name in _KEYS:
            return getattr(self.config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------------ history

    async def add_message(self, message: dict[str, Any]) -> None:
        """Admit one message; a structurally broken one is refused before anything is stored."""
        stored, clips = self._admission.one(message, len(self.messages))
        self._state.admitted(len(self.messages))
        self.messages.append(stored)
        await events.safe_emit_each(self.hooks, events.INGRESS_TRUNCATED, clips)

    async def get_messages(self) -> list[dict[str, Any]]:
        """The whole canonical history, as a new list."""
        return list(self.messages)

    async def set_messages(self, messages: list[dict[str, Any]]) -> None:
        """Replace the history (session resume). All-or-nothing: one bad message refuses all."""
        stored, clips = self._admission.all(messages)
        self._pipeline.reset()
        self.messages = stored
        await events.safe_emit_each(self.hooks, events.INGRESS_TRUNCATED, clips)

    async def clear(self) -> None:
        """Empty the history and forget everything derived from it."""
        self.messages = []
        self._pipeline.reset()

    # ------------------------------------------------------------------ requests

    async def set_system_prompt_factory(self, factory: SystemPromptFactory | None) -> None:
        """Register an async callable whose text becomes the view's first system message."""
        self._planner.system_prompt.factory = factory

    def set_tool_definitions(self, tools: Iterable[Any] | Callable[[], Any] | None) -> None:
        """Tell the budget which tool definitions every request will carry: a list (tool
        objects or definitions as a provider receives them), a callable returning the current
        tools (``mount`` passes the mounted ones), or ``None``. Their estimate is held back
        from the budget and recomputed only when the set changes."""
        self._planner.tools.use(tools)

    async def get_messages_for_request(
        self,
        token_budget: int | None = None,
        provider: Any = None,
        *,
        max_output_tokens: int | None = None,
    ) -> list[dict[str, Any]]:
        """The provider-facing view for the next request (a new list, history unchanged).

        ``max_output_tokens``: the output the request will ask for, when the orchestrator sets
        one. When protected content alone is too large the view is returned anyway, with a
        warning; ``get_messages_for_request_retaining(..., hard_fit=True)`` fails closed.
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
        """A view that keeps the named reminder envelopes whole (``context.request_retention``);
        ``hard_fit`` targets the budget itself and raises ``ContextLengthError`` when the
        required set cannot fit (``ValueError`` for a body never admitted; nothing changes)."""
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
        return sum(self._planner.index.estimate(m) for m in messages)

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
        """The whole-request budget for ``provider``, synchronously: the ``request_budget`` a
        request derives (``_budget.derive_budget``, run without an event loop)."""
        return budget_now(self.config, token_budget, provider).request_budget

    def _strip_internal_metadata(self, rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The final execution projection: ``request_view(rows, strip_sequence=True)``."""
        return request_view(rows, strip_sequence=True)

    def _measured_budget_decision(self, envelope: object) -> tuple[int, int, int, str] | None:
        """``(count, estimate, limit, source)`` of a counted envelope (``decision_figures``)."""
        return decision_figures(envelope)

    async def _fit_measured_output(
        self, fit_output: FitOutput, view: list[dict[str, Any]], attempt: Mapping[str, Any]
    ) -> tuple[Mapping[str, Any], tuple[int, int, int, str], int] | None:
        """``fit_output(view, attempt)``'s envelope, validated (``fitted_figures``)."""
        return await fitted_figures(fit_output, view, attempt)

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
        """What the latest view repaired or projected (``REPAIR_KINDS``), ``"kind: detail"``."""
        return self._state.diagnostics.repairs


_KEYS = frozenset(ContextConfig.__dataclass_fields__)
