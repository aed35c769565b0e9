"""The settings a replay runs with, and where each one came from.

A setting comes from one of four places, named in the report by these labels:

* ``"flag"``: the command line. A flag always wins, key by key;
* ``"session events"``: the recorded session (its ``session:config`` context config, a
  ``context:budget`` event, the model and ``max_tokens`` of its requests);
* ``"model table"``: :mod:`.known_windows`, looked up by the model and the provider config;
* ``"default"``: nothing said otherwise.

:func:`resolve_settings` picks each value; :func:`describe_settings` lists them as the report
shows them, and :func:`add_budget_setting` adds the budget once a replay has derived it (the
budget comes from ``derive_budget``, so it is read off its event, not computed twice). The
budget listed is the request budget (what the whole request's input may take: the window less
the output held back and the margin, capped by ``max_tokens``), which only the settings
decide; the tool definitions and the learned overhead that come off it for the messages come
from the payloads and the readings, and the report's Budget line shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ... import ContextConfig
from ...sizing._estimate import family_for_model
from ..findings.records import request_budget
from ..provider.simulation import DEFAULT_MAX_OUTPUT, Window
from ..recordings.known_windows import known_window
from ..recordings.session_dir import RecordedSession
from .config_options import build_config

__all__ = [
    "CONTEXT_MODULES",
    "DEFAULT",
    "FLAG",
    "MODEL_TABLE",
    "SESSION_EVENTS",
    "ResolvedSettings",
    "Setting",
    "add_budget_setting",
    "describe_settings",
    "resolve_settings",
]

SESSION_EVENTS = "session events"
MODEL_TABLE = "model table"
FLAG = "flag"
DEFAULT = "default"

CONTEXT_MODULES = frozenset({"context-simple", "amplifier-module-context-simple"})
"""The names a recorded ``session:config`` gives this module."""

_CONFIG_KEYS = tuple(f.name for f in fields(ContextConfig))
_DEFAULTS = ContextConfig()
_PROVIDER_BUDGETS = frozenset({"provider_model_info", "provider_defaults"})


@dataclass(frozen=True)
class Setting:
    """One setting the report shows: its value and where it came from."""

    name: str
    value: Any
    source: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source}


@dataclass(frozen=True)
class ResolvedSettings:
    """What to replay with, each value beside its source."""

    config_values: dict[str, Any]
    """``ContextConfig`` key -> value: the recorded ones, then the flags over them."""
    config_sources: dict[str, str]
    model: str | None
    model_source: str
    context_window: int | None
    window_source: str
    max_output_tokens: int | None
    max_output_source: str
    ignored_keys: list[str] = field(default_factory=list[str])
    """Recorded context-config keys this module does not have (``auto_compact``)."""
    warnings: list[str] = field(default_factory=list[str])


def resolve_settings(
    session: RecordedSession | None,
    *,
    config_flags: Mapping[str, Any],
    model: str | None,
    context_window: int | None,
    max_output_tokens: int | None,
    default_window: Window | None = None,
) -> ResolvedSettings:
    """Each setting from the flags, else the session, else the model table, else the default.

    ``config_flags`` holds the command line's config values (``None``: not given, on/off
    flags included, so ``--notice`` wins over a session that recorded the notice off).
    ``default_window`` is the window used when nothing names one
    (the built-in example's).
    """
    warnings: list[str] = []
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    ignored: list[str] = []
    if session is not None:
        ignored = _recorded_config(session, values, sources, warnings)
    for key, value in config_flags.items():
        if value is None:
            continue
        values[key], sources[key] = value, FLAG
    model_name, model_source = _pick(
        (model, FLAG), (session.model if session else None, SESSION_EVENTS)
    )
    budget = (session.budget_event if session else None) or {}
    # One table for every input: a model named by --model gets the window and output it
    # gets from a session's or a log's records.
    table = known_window(model_name, session.provider_config if session else None)
    recorded_window = _positive(budget.get("context_window"))
    window, window_source = _pick(
        (context_window, FLAG),
        (recorded_window, SESSION_EVENTS),
        (table.context_window if table else None, MODEL_TABLE),
        (default_window.context_window if default_window else None, DEFAULT),
    )
    max_output, max_output_source = _pick(
        (max_output_tokens, FLAG),
        (_positive(budget.get("max_output_tokens")) if recorded_window else None, SESSION_EVENTS),
        (session.max_output_tokens if session else None, SESSION_EVENTS),
        (table.max_output_tokens if table else None, MODEL_TABLE),
        (default_window.max_output_tokens if default_window and window_source == DEFAULT else None,
         DEFAULT),
    )  # fmt: skip
    if window is None and max_output_source != FLAG:
        max_output = None  # no window: nothing to hold output back from
    recorded = window_source == SESSION_EVENTS and family_for_model(model_name) is not None
    if model_name and table is None and not recorded:  # a recorded window needs no table
        warnings.append(_unknown_model_text(model_name, model_source, window, window_source))
    return ResolvedSettings(
        values, sources, model_name, model_source, window, window_source,
        max_output, max_output_source, ignored, warnings,
    )  # fmt: skip


def _unknown_model_text(model: str, source: str, window: int | None, window_source: str) -> str:
    """The warning for a model the table does not know: what it leaves unknown."""
    named = f"--model {model!r}" if source == FLAG else f"the session's model {model!r}"
    text = f"{named} is not in the model table (replay/recordings/known_windows.py)"
    if window is None:
        text += ": no window is known; give --context-window (and --max-output-tokens)"
    elif window_source == DEFAULT:
        text += ": the default window is used; give --context-window for its own"
    else:
        text += f": the window from the {window_source} is used"
    if family_for_model(model) is None:
        text += "; its tokenizer family is unknown too, so estimates are conservative"
    return text


def _recorded_config(
    session: RecordedSession,
    values: dict[str, Any],
    sources: dict[str, str],
    warnings: list[str],
) -> list[str]:
    """Take the recorded context config into ``values``; return the keys it ignored."""
    module = session.context_module
    if module is not None and module not in CONTEXT_MODULES:
        warnings.append(
            f"the session ran context module {module!r}, not context-simple: its config is "
            "not replayed (defaults and flags only)"
        )
        return []
    ignored: list[str] = []
    for key, value in session.context_config.items():
        if key not in _CONFIG_KEYS:
            ignored.append(key)
            continue
        try:
            # The same checks as a flag's, so a recorded value fails here and not later.
            build_config({key: value}, model=None, window=True)
        except ValueError as exc:
            warnings.append(f"the session's {key} is unusable ({exc}); the default is used")
            continue
        values[key], sources[key] = value, SESSION_EVENTS
    return ignored


def describe_settings(
    resolved: ResolvedSettings, config: ContextConfig, window: Window | None
) -> list[Setting]:
    """The settings as the report lists them: model and window first, then the config keys.

    A config key is listed when it was given (by flag or session) or differs from its default.
    """
    family = config.token_family
    if family is not None:
        family_source = resolved.config_sources.get("token_family", resolved.model_source)
    else:
        family = family_for_model(resolved.model)
        family_source = resolved.model_source if family else DEFAULT
    max_output = window.max_output_tokens if window else None
    max_output_source = resolved.max_output_source
    if window is not None and resolved.max_output_tokens is None:
        max_output, max_output_source = DEFAULT_MAX_OUTPUT, DEFAULT
    listed = [
        Setting("model", resolved.model, resolved.model_source),
        Setting("token_family", family, family_source),
        Setting("context_window", window.context_window if window else None,
                resolved.window_source if window else DEFAULT),
        Setting("max_output_tokens", max_output, max_output_source if window else DEFAULT),
    ]  # fmt: skip
    for key in _CONFIG_KEYS:
        value = getattr(config, key)
        source = resolved.config_sources.get(key)
        if key == "token_family" or (source is None and value == getattr(_DEFAULTS, key)):
            continue
        listed.append(Setting(key, value, source or DEFAULT))
    return listed


def add_budget_setting(
    source: dict[str, Any],
    budget: Mapping[str, Any] | None,
    first: Mapping[str, Any] | None = None,
) -> None:
    """Put the derived request budget into ``source["settings"]``, after the window's entries.

    ``budget`` is the last ``context:budget`` payload of the replay (the one the summary
    reads), ``first`` the first: the entry's ``value`` is the last request budget, and a
    ``first`` key holds the first one when it differs. Its source is that of what decided
    it: ``max_tokens`` when it capped the budget, else the window, else
    ``max_tokens_fallback``. Nothing happens without settings or a budget event.
    """
    settings: list[dict[str, Any]] | None = source.get("settings")
    if settings is None or not budget:
        return
    by_name = {s["name"]: s["source"] for s in settings}
    if budget.get("capped"):
        decided_by = "max_tokens"
    elif budget.get("source") in _PROVIDER_BUDGETS:
        decided_by = "context_window"
    else:
        decided_by = "max_tokens_fallback"
    entry: dict[str, Any] = {
        "name": "budget",
        "value": request_budget(budget),
        "source": by_name.get(decided_by, DEFAULT),
    }
    if first and request_budget(first) != entry["value"]:
        entry["first"] = request_budget(first)
    # A new list: the same source dict may be replayed again (a sweep), never append twice.
    rest = [s for s in settings if s["name"] != "budget"]
    at = next((i + 1 for i, s in enumerate(rest) if s["name"] == "max_output_tokens"), len(rest))
    source["settings"] = [*rest[:at], entry, *rest[at:]]


def _pick(*candidates: tuple[Any, str]) -> tuple[Any, str]:
    """The first candidate value that is not ``None``, with its source; else ``None``."""
    for value, source in candidates:
        if value is not None:
            return value, source
    return None, DEFAULT


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
