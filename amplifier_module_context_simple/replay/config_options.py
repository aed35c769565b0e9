"""The command line's context-config options: one row per ``ContextConfig`` key, in one table.

Each key is either an option (its help text, and its flag when that is not ``--key-name``) or
``None``: deliberately not on the command line. Type and default come from the field itself,
and a test checks that every field has a row, so adding a config key is one edit here (plus
its test). ``options.py`` turns the rows into Typer parameters; :func:`build_config` turns the
values given back into a ``ContextConfig`` whose errors name the flag.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from types import NoneType, UnionType
from typing import Any

from .. import ContextConfig
from .._config import TOKEN_METER_MODES
from .._estimate import family_for_model

__all__ = ["CONFIG_OPTIONS", "ConfigOption", "OptionSpec", "build_config", "config_option_specs"]


@dataclass(frozen=True)
class ConfigOption:
    """How one config key shows on the command line."""

    help: str
    """What it does, without the closing full stop; ``[default]`` and the stop are added."""
    flag: str | None = None
    """The option's name, when it is not ``--`` and the key with dashes."""
    default_text: str | None = None
    """What ``[...]`` shows, when it is not the field's default (or the default is ``None``)."""


CONFIG_OPTIONS: dict[str, ConfigOption | None] = {
    # In the order the help lists them.
    "max_tokens": ConfigOption("Cap on the budget"),
    "max_tokens_fallback": ConfigOption("Budget when no window is simulated"),
    "compact_threshold": ConfigOption("Compact at this share of the budget"),
    "target_usage": ConfigOption("Share of the budget compaction aims for"),
    "protected_recent": ConfigOption("Share of recent messages never left out"),
    "protected_tool_results": ConfigOption("Latest N tool results kept whole"),
    "truncate_chars": ConfigOption("Characters a shortened result keeps"),
    "token_meter": ConfigOption("estimate or actual"),
    "token_family": ConfigOption("o200k, claude3 or claude47", default_text="from --model"),
    "max_tool_result_bytes": ConfigOption("Ingress cap on a tool result, bytes"),
    "compaction_notice_enabled": ConfigOption("Append the compaction notice", flag="--notice"),
    "compaction_notice_verbosity": ConfigOption(
        "Notice: minimal, normal or verbose", flag="--notice-verbosity"
    ),
    "output_reserve_fraction": ConfigOption("Share of max output held back"),
    # Tuning a replay does not need: the mount config's defaults stand.
    "compaction_notice_token_reserve": None,
    "compaction_notice_min_level": None,
}


@dataclass(frozen=True)
class OptionSpec:
    """One config key's command-line option, resolved from its row and its field."""

    key: str
    flag: str
    value_type: type
    """``bool`` for an on/off flag, else the field's type without ``None``."""
    default: Any
    """The flag's default: the field's for an on/off flag, else ``None`` (not given)."""
    help: str


def config_option_specs() -> list[OptionSpec]:
    """The rows of :data:`CONFIG_OPTIONS` that are options, with type, default and help."""
    by_name = {f.name: f for f in fields(ContextConfig)}
    hints = typing.get_type_hints(ContextConfig)
    specs: list[OptionSpec] = []
    for key, row in CONFIG_OPTIONS.items():
        if row is None:
            continue
        default = by_name[key].default
        assert default is not MISSING, f"{key} has no default"
        value_type = _without_none(hints[key])
        shown = row.default_text
        if shown is None and default is not None and value_type is not bool:
            shown = str(default)
        text = row.help + (f" [{shown}]" if shown else "") + "."
        flag_default = default if value_type is bool else None
        specs.append(OptionSpec(key, _flag(key), value_type, flag_default, text))
    return specs


def _without_none(hint: Any) -> type:
    if isinstance(hint, UnionType):
        (only,) = [t for t in typing.get_args(hint) if t is not NoneType]
        return only
    return hint


def _flag(key: str) -> str:
    row = CONFIG_OPTIONS.get(key)
    if row is not None and row.flag is not None:
        return row.flag
    return "--" + key.replace("_", "-")


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
        raise ValueError(_flag(match.group(1)) + text[match.end() :]) from None
