"""Replaying a conversation through a real ``SimpleContextManager`` and reporting on it.

This is the engine behind ``context-simple replay`` and ``inspect``; it has no third-party
dependency (the command line, tables and plots live in ``cli.py``). A replay does what an
orchestrator does: before every assistant message it asks the manager for a view, then adds the
assistant message; every other message is simply added. Each request is recorded with the
history and view sizes, the budget in force, what compaction changed and whether the view is
valid and prefix-stable.

"Valid" means both checks an orchestrator's request goes through: ``check_view(view,
history=...)`` against the whole history so far (pairing, unique ids, the turn invariants), and
the host's own model — every message as ``amplifier_core.message_models.Message`` and the list
as a ``ChatRequest``. amplifier-core is the host's package, not a dependency of this one, so it
is imported lazily; when it is not installed the host check is reported as not run (the
``host_check`` of the summary, ``host_valid: null`` per request) and "valid" rests on
``check_view`` alone.

Token figures are the module's own estimates (the same estimator and tokenizer family the
manager uses for its decisions), not provider counts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from . import _events as events
from ._budget import SAFETY_MARGIN_TOKENS
from ._config import TOKEN_METER_MODES, ContextConfig
from ._estimate import estimate_message_tokens, family_for_model
from ._invariants import check_view
from ._manager import SimpleContextManager
from ._messages import call_ids, has_image, metadata, result_ids
from ._render import NOTICE_SOURCE, text_of

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "HOST_CHECK_NOT_RUN",
    "HOST_CHECK_RUN",
    "CompactionRecord",
    "HostModelCheck",
    "ReplayError",
    "ReplayOutcome",
    "ReplayReport",
    "RequestRecord",
    "SimulatedProvider",
    "ViewRow",
    "Window",
    "build_config",
    "build_window",
    "describe_view",
    "is_notice",
    "replay",
    "trigger_tokens",
]

_PACKAGE_LOGGER = "amplifier_module_context_simple"
DEFAULT_MAX_OUTPUT = 8_192
"""Max output tokens assumed when only ``--context-window`` is given."""
_FLAGS = {
    "compaction_notice_enabled": "--notice",
    "compaction_notice_verbosity": "--notice-verbosity",
}
_MAX_WARNINGS = 20
HOST_CHECK_RUN = "run"
HOST_CHECK_NOT_RUN = "not run: amplifier-core is not installed"


class ReplayError(Exception):
    """The replay cannot go on (a message the manager rejects); the text is one line."""


@dataclass(frozen=True)
class Window:
    """A simulated provider window."""

    context_window: int
    max_output_tokens: int
    model: str | None = None


@dataclass(frozen=True)
class _ProviderInfo:
    model: str | None
    defaults: dict[str, Any]


class SimulatedProvider:
    """The smallest provider ``derive_budget`` reads: ``get_info().defaults`` with a window."""

    def __init__(self, window: Window) -> None:
        self.window = window

    def get_info(self) -> _ProviderInfo:
        defaults: dict[str, Any] = {
            "context_window": self.window.context_window,
            "max_output_tokens": self.window.max_output_tokens,
        }
        if self.window.model:
            defaults["model"] = self.window.model
        return _ProviderInfo(model=self.window.model, defaults=defaults)


class _Recorder:
    """The hooks object handed to the manager: keeps every event it emits."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, event: str, data: dict[str, Any]) -> None:
        self.events.append((event, data))


class _WarningCollector(logging.Handler):
    """Collects the module's log warnings so they are reported instead of interleaved."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage().splitlines()[0] if record.getMessage() else ""
        self.seen[text] = self.seen.get(text, 0) + 1


class HostModelCheck:
    """Validates views as the host does, when the host's package is installed.

    ``available`` is ``False`` when ``amplifier_core.message_models`` cannot be imported;
    :meth:`check` then returns ``None`` (not run). Verdicts on messages in ``stable`` (the
    replay's history dicts, which it keeps alive and never changes) are cached by identity, so
    a long replay validates each history message once, not once per request.
    """

    def __init__(self) -> None:
        try:
            from amplifier_core.message_models import ChatRequest, Message
        except ImportError:
            self.available = False
            return
        self.available = True
        self._message = Message
        self._request = ChatRequest
        self._verdicts: dict[int, tuple[Any, str]] = {}  # id -> (model or None, problem)

    def check(
        self, view: Sequence[Mapping[str, Any]], stable: Mapping[int, object] | None = None
    ) -> list[str] | None:
        """The host model's objections to ``view`` (empty: accepted), or ``None``: not run."""
        if not self.available:
            return None
        problems: list[str] = []
        models: list[Any] = []
        for index, message in enumerate(view):
            key = id(message)
            verdict = self._verdicts.get(key)
            if verdict is None:
                verdict = self._validate(message)
                if stable is not None and key in stable:
                    self._verdicts[key] = verdict
            model, problem = verdict
            if problem:
                problems.append(f"view[{index}]: the host's Message model refuses it: {problem}")
            else:
                models.append(model)
        if not problems:
            try:
                self._request(messages=models)
            except Exception as exc:
                problems.append(f"the host's ChatRequest model refuses the view: {_reason(exc)}")
        return problems

    def _validate(self, message: Mapping[str, Any]) -> tuple[Any, str]:
        try:
            return self._message(**message), ""
        except Exception as exc:  # ValidationError, or TypeError for a non-string key
            return None, _reason(exc)


_UNION_BRANCHES = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _is_branch_label(part: object) -> bool:
    """``str`` / ``list[tagged-union[...]]`` in a pydantic location; ``[key]`` is kept."""
    return isinstance(part, str) and (part in _UNION_BRANCHES or ("[" in part and part != "[key]"))


def _reason(exc: Exception) -> str:
    """One line saying why a model refused: its most specific error, location first.

    Pydantic reports a failed union once per branch (``content.str``, ``content.list[...]``);
    the branch labels are left out of the location and the deepest location wins, so an
    ``image_url`` part reads ``content.0: Input tag 'image_url' ... does not match ...``.
    """
    errors: Callable[[], Any] | None = getattr(exc, "errors", None)
    found: list[dict[str, Any]] = []
    if callable(errors):
        try:
            found = [e for e in errors() if isinstance(e, dict)]
        except Exception:
            found = []
    if not found:
        text = str(exc).splitlines()
        return text[0] if text and text[0] else type(exc).__name__
    located: list[tuple[tuple[str, ...], str]] = []
    for error in found:
        loc = tuple(str(part) for part in error.get("loc", ()) if not _is_branch_label(part))
        located.append((loc, str(error.get("msg", ""))))
    deepest = max(len(loc) for loc, _ in located)
    where = next(loc for loc, _ in located if len(loc) == deepest)
    messages = list(dict.fromkeys(msg for loc, msg in located if loc == where))
    return f"{'.'.join(where) or 'message'}: {'; or '.join(messages)}"


@dataclass
class RequestRecord:
    """One request: what the history held and what the view sent."""

    request: int
    """1-based request number."""
    at_message: int
    """0-based position (in the replayed messages) of the assistant message that followed."""
    history_messages: int
    history_tokens: int
    view_messages: int
    view_tokens: int
    budget: int
    budget_source: str
    utilisation: float
    """view_tokens / budget."""
    level: int
    compacted: bool
    """An escalation happened at this request (the figures below are what it added)."""
    removed: int
    truncated: int
    stubbed: int
    left_out: int
    """History messages not in the view, in total (sticky decisions included)."""
    shortened: int
    """Truncated tool results in the view, in total."""
    stubs: int
    repaired: int
    """Placeholder results for calls that never got one."""
    notice: bool
    valid: bool
    """No ``check_view`` violation, and the host model accepts the view (when it was run)."""
    host_valid: bool | None
    """The host's ``Message`` / ``ChatRequest`` models accept the view; ``None``: not run."""
    violations: list[str]
    """``check_view``'s violations, then the host model's objections."""
    prefix_stable: bool
    """The view without its notice begins with the previous view without its notice."""


@dataclass
class CompactionRecord:
    """One escalation, from its ``context:compaction`` event."""

    request: int
    at_message: int
    level: int
    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    removed: int
    truncated: int
    stubbed: int
    target_tokens: int
    budget: int
    """The usable budget the ladder worked against (the budget less the notice reserve)."""


@dataclass
class ReplayReport:
    """Everything a replay found; ``as_json()`` is the ``--json`` document."""

    source: dict[str, Any]
    config: ContextConfig
    window: Window | None
    token_family: str | None = None
    requests: list[RequestRecord] = field(default_factory=list[RequestRecord])
    compactions: list[CompactionRecord] = field(default_factory=list[CompactionRecord])
    budget_event: dict[str, Any] | None = None
    ingress_truncations: int = 0
    warnings: dict[str, int] = field(default_factory=dict[str, int])
    history_messages: int = 0
    history_tokens: int = 0
    host_check: str = HOST_CHECK_RUN
    """``HOST_CHECK_RUN``, or ``HOST_CHECK_NOT_RUN`` when amplifier-core is not installed."""

    def summary(self) -> dict[str, Any]:
        requests = self.requests
        utilisation = [r.utilisation for r in requests]
        budget = self.budget_event or {}
        effective = int(budget.get("effective_budget", 0))
        return {
            "messages": self.history_messages,
            "history_tokens": self.history_tokens,
            "requests": len(requests),
            "compactions": len(self.compactions),
            "final_level": requests[-1].level if requests else 0,
            "max_utilisation": round(max(utilisation, default=0.0), 4),
            "mean_utilisation": round(sum(utilisation) / len(utilisation), 4)
            if utilisation
            else 0.0,
            "peak_view_tokens": max((r.view_tokens for r in requests), default=0),
            "tokens_saved": sum(r.history_tokens - r.view_tokens for r in requests),
            "final_tokens_saved": (
                requests[-1].history_tokens - requests[-1].view_tokens if requests else 0
            ),
            "prefix_stable_requests": sum(r.prefix_stable for r in requests),
            "invalid_views": sum(not r.valid for r in requests),
            "host_check": self.host_check,
            "host_invalid_views": sum(r.host_valid is False for r in requests),
            "over_budget_requests": sum(r.view_tokens > r.budget for r in requests),
            "ingress_truncations": self.ingress_truncations,
            "budget": effective,
            "budget_source": budget.get("source"),
            "budget_capped": bool(budget.get("capped", False)),
            "trigger_tokens": trigger_tokens(self.config, effective),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "config": asdict(self.config),
            "window": asdict(self.window) if self.window else None,
            "token_family": self.token_family,
            "budget": self.budget_event,
            "summary": self.summary(),
            "compactions": [asdict(c) for c in self.compactions],
            "requests": [asdict(r) for r in self.requests],
            "warnings": [{"message": m, "count": n} for m, n in self.warnings.items()],
        }


@dataclass
class ReplayOutcome:
    report: ReplayReport
    view: list[dict[str, Any]] | None
    """The view of the request the replay stopped at (``stop_at``), else ``None``."""
    history: list[dict[str, Any]]
    """The manager's history when the replay ended."""


def build_config(values: Mapping[str, Any], *, model: str | None, window: bool) -> ContextConfig:
    """The config from command-line values (``None``: not given); errors name the option."""
    given = {k: v for k, v in values.items() if v is not None}
    # Two keys only warn in a mount config; on a command line a bad value is an error.
    if given.get("max_tokens", 1) <= 0:
        raise ValueError(f"--max-tokens must be a positive integer; got {given['max_tokens']}")
    if given.get("token_meter", "estimate") not in TOKEN_METER_MODES:
        raise ValueError(
            f"--token-meter must be 'estimate' or 'actual'; got {given['token_meter']!r}"
        )
    if model and not window and "token_family" not in given:
        given["token_family"] = family_for_model(model)  # no provider to carry the name
    try:
        return ContextConfig.from_mapping(given)
    except ValueError as exc:
        text = str(exc)
        match = re.search(r"context-simple config '(\w+)'", text)
        if match is None:
            raise
        key = match.group(1)
        flag = _FLAGS.get(key, "--" + key.replace("_", "-"))
        raise ValueError(flag + text[match.end() :]) from None


def build_window(
    context_window: int | None, max_output: int | None, model: str | None, config: ContextConfig
) -> Window | None:
    """The simulated window, or ``None``; ``ValueError`` when it would leave no budget."""
    if context_window is None:
        if max_output is not None:
            raise ValueError("--max-output-tokens needs --context-window")
        return None
    max_output = DEFAULT_MAX_OUTPUT if max_output is None else max_output
    if context_window <= 0 or max_output <= 0:
        raise ValueError("--context-window and --max-output-tokens must be positive integers")
    reserved = int(max_output * config.output_reserve_fraction)
    if context_window - reserved - SAFETY_MARGIN_TOKENS <= 0:
        raise ValueError(
            f"--context-window {context_window} leaves no budget after {reserved} reserved "
            f"output tokens and the {SAFETY_MARGIN_TOKENS}-token safety margin"
        )
    return Window(context_window, max_output, model)


def trigger_tokens(config: ContextConfig, effective_budget: int) -> int:
    """The view size at which compaction fires (mirrors the manager's usable budget)."""
    reserve = config.compaction_notice_token_reserve if config.compaction_notice_enabled else 0
    usable = effective_budget - reserve if reserve < effective_budget else effective_budget
    return int(config.compact_threshold * usable)


def is_notice(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and metadata(message).get("source") == NOTICE_SOURCE


async def replay(
    messages: Sequence[Mapping[str, Any]],
    *,
    config: ContextConfig,
    window: Window | None,
    source: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    stop_at: int | None = None,
) -> ReplayOutcome:
    """Feed ``messages`` through a manager and report on every request.

    With ``stop_at`` (a 1-based request number) the replay stops right after that request
    and the outcome carries its view; otherwise the whole conversation is replayed. Raises
    :class:`ReplayError` when the manager refuses a message.
    """
    report = ReplayReport(source=dict(source or {}), config=config, window=window)
    recorder = _Recorder()
    manager = SimpleContextManager(**asdict(config), hooks=recorder)
    provider = SimulatedProvider(window) if window is not None else None
    family = config.token_family or family_for_model(window.model if window else None)
    report.token_family = family
    known: dict[int, int] = {}  # id(history dict) -> tokens; history keeps the dicts alive
    previous_prefix: Sequence[Mapping[str, Any]] | None = None
    host = HostModelCheck()
    report.host_check = HOST_CHECK_RUN if host.available else HOST_CHECK_NOT_RUN
    collector = _WarningCollector()
    package_logger = logging.getLogger(_PACKAGE_LOGGER)
    package_logger.addHandler(collector)
    try:
        for position, message in enumerate(messages):
            if message.get("role") == "assistant":
                seen = len(recorder.events)
                view = await manager.get_messages_for_request(provider=provider)
                fresh = recorder.events[seen:]
                record = _record(report, manager.messages, host, view, fresh, known, family)
                record.request = len(report.requests) + 1
                record.at_message = position
                record.level = manager.compaction_level
                record.prefix_stable = _extends(previous_prefix, view, record.notice)
                report.requests.append(record)
                _note_compaction(report, record, fresh)
                previous_prefix = view[:-1] if record.notice else view
                if stop_at is not None and record.request == stop_at:
                    _finish(report, collector, recorder)
                    return ReplayOutcome(report, view, list(manager.messages))
            try:
                await manager.add_message(dict(message))
            except (TypeError, ValueError) as exc:
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ReplayError(
                    f"message {position + 1} was rejected by the context manager: {text}"
                ) from None
            stored = manager.messages[-1]
            tokens = estimate_message_tokens(stored, family=family)
            known[id(stored)] = tokens
            report.history_messages += 1
            report.history_tokens += tokens
            if progress is not None:
                progress(1)
    finally:
        package_logger.removeHandler(collector)
    _finish(report, collector, recorder)
    return ReplayOutcome(report, None, list(manager.messages))


def _finish(report: ReplayReport, collector: _WarningCollector, recorder: _Recorder) -> None:
    report.ingress_truncations = sum(
        1 for name, _ in recorder.events if name == events.INGRESS_TRUNCATED
    )
    report.warnings = dict(list(collector.seen.items())[:_MAX_WARNINGS])


def _record(
    report: ReplayReport,
    history: Sequence[Mapping[str, Any]],
    host: HostModelCheck,
    view: list[dict[str, Any]],
    fresh: list[tuple[str, dict[str, Any]]],
    known: dict[int, int],
    family: str | None,
) -> RequestRecord:
    for name, data in fresh:
        if name == events.BUDGET:
            report.budget_event = dict(data)
    budget = report.budget_event or {}
    effective = int(budget.get("effective_budget", 0))
    view_tokens = 0
    for m in view:
        cached = known.get(id(m))
        view_tokens += cached if cached is not None else estimate_message_tokens(m, family=family)
    notice = bool(view) and is_notice(view[-1])
    repaired = sum(1 for m in view if m.get("_repaired"))
    compaction = next((d for name, d in fresh if name == events.COMPACTION), None)
    # The whole history: the turn invariants compare the view's structure with the history's
    # (where a prompt follows a tool result, how the active turn opens), which no digest of a
    # few marked messages can stand in for. Measured: ~2 ms a request at 10,000 messages.
    violations = check_view(view, history=history)
    host_problems = host.check(view, known)
    violations += host_problems or []
    return RequestRecord(
        request=0,
        at_message=0,
        history_messages=len(history),
        history_tokens=report.history_tokens,
        view_messages=len(view),
        view_tokens=view_tokens,
        budget=effective,
        budget_source=str(budget.get("source", "")),
        utilisation=round(view_tokens / effective, 4) if effective else 0.0,
        level=0,
        compacted=compaction is not None,
        removed=int(compaction["messages_removed"]) if compaction else 0,
        truncated=int(compaction["messages_truncated"]) if compaction else 0,
        stubbed=int(compaction["user_messages_stubbed"]) if compaction else 0,
        left_out=len(history) - (len(view) - int(notice) - repaired),
        shortened=sum(1 for m in view if m.get("_truncated")),
        stubs=sum(1 for m in view if m.get("_stubbed")),
        repaired=repaired,
        notice=notice,
        valid=not violations,
        host_valid=None if host_problems is None else not host_problems,
        violations=violations,
        prefix_stable=True,
    )


def _extends(
    previous: Sequence[Mapping[str, Any]] | None, view: Sequence[Mapping[str, Any]], notice: bool
) -> bool:
    """Whether the view without its notice begins with ``previous`` (the first always does)."""
    if previous is None:
        return True
    prefix = view[:-1] if notice else view
    return len(prefix) >= len(previous) and all(
        a is b or a == b for a, b in zip(previous, prefix, strict=False)
    )


def _note_compaction(
    report: ReplayReport, record: RequestRecord, fresh: list[tuple[str, dict[str, Any]]]
) -> None:
    for name, data in fresh:
        if name != events.COMPACTION:
            continue
        report.compactions.append(
            CompactionRecord(
                request=record.request,
                at_message=record.at_message,
                level=int(data["strategy_level"]),
                before_tokens=int(data["before_tokens"]),
                after_tokens=int(data["after_tokens"]),
                before_messages=int(data["before_messages"]),
                after_messages=int(data["after_messages"]),
                removed=int(data["messages_removed"]),
                truncated=int(data["messages_truncated"]),
                stubbed=int(data["user_messages_stubbed"]),
                target_tokens=int(data["target_tokens"]),
                budget=int(data["budget"]),
            )
        )


# --- describing one view (``inspect``) -----------------------------------------------------


@dataclass
class ViewRow:
    """One message of a view, as ``inspect`` shows it."""

    index: int
    position: int | None
    """Its position in the history (None for the notice and placeholder results)."""
    role: str
    tokens: int
    chars: int
    markers: list[str]
    tool_call_ids: list[str]
    preview: str


def describe_view(
    view: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    *,
    family: str | None,
    preview_chars: int = 60,
) -> tuple[list[ViewRow], list[int]]:
    """The rows of ``view`` and the history positions it leaves out."""
    by_id = {id(m): i for i, m in enumerate(history)}
    by_meta = {id(m["metadata"]): i for i, m in enumerate(history) if "metadata" in m}
    rows: list[ViewRow] = []
    shown: set[int] = set()
    for index, message in enumerate(view):
        position = by_id.get(id(message))
        if position is None and not (message.get("_repaired") or is_notice(message)):
            # Truncated, stubbed or content-fixed copies share the history's metadata dict.
            position = by_meta.get(id(message.get("metadata")))
        if position is not None:
            shown.add(position)
        rows.append(
            ViewRow(
                index=index,
                position=position,
                role=str(message.get("role", "")),
                tokens=estimate_message_tokens(message, family=family),
                chars=len(text_of(message)),
                markers=_markers(message),
                tool_call_ids=list(call_ids(message) or result_ids(message)),
                preview=_preview(message, preview_chars),
            )
        )
    left_out = [i for i in range(len(history)) if i not in shown]
    return rows, left_out


def _markers(message: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    if message.get("_truncated"):
        found.append(f"truncated (was {message.get('_original_tokens')} tok)")
    if message.get("_stubbed"):
        found.append(f"stub (was {message.get('_original_length')} chars)")
    if message.get("_repaired"):
        found.append("placeholder")
    if is_notice(message):
        found.append("notice")
    if has_image(message):
        found.append("image")
    return found


def _preview(message: Mapping[str, Any], limit: int) -> str:
    text = " ".join(text_of(message).split())
    if not text:
        names = _tool_names(message)
        return f"calls {', '.join(names)}" if names else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_names(message: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping):
            function = call.get("function")
            name = call.get("tool") or call.get("name")
            if name is None and isinstance(function, Mapping):
                name = function.get("name")
            names.append(str(name))
    return names
