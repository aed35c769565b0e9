"""The command line's context-config options, read from ``ContextConfig``'s own fields.

A key is on the command line when its field carries a ``CommandLineOption`` (help text, and
its flag when that is not ``--key-name``); type and default come from the field itself, so a
key is written once, in ``_config``. ``options.py`` turns the specs into Typer parameters;
:func:`build_config` turns the values given back into a ``ContextConfig`` whose errors name
the flag.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from types import NoneType, UnionType
from typing import Any

from ... import ContextConfig
from ...planning._config import TOKEN_METER_MODES, command_line_option
from ...sizing._estimate import family_for_model
from ...vocabulary._numbers import is_int

__all__ = ["OptionSpec", "build_config", "config_option_specs"]


@dataclass(frozen=True)
class OptionSpec:
    """One config key's command-line option, resolved from its row and its field."""

    key: str
    flag: str
    value_type: type
    """``bool`` for an on/off flag, else the field's type without ``None``."""
    default: Any
    """Always ``None`` (not given), on/off flags included, so that a flag given at its default
    still wins over a session's value."""
    help: str


def config_option_specs() -> list[OptionSpec]:
    """The config keys that are options, in field order, with type, default and help."""
    hints = typing.get_type_hints(ContextConfig)
    specs: list[OptionSpec] = []
    for config_field in fields(ContextConfig):
        key = config_field.name
        row = command_line_option(key)
        if row is None:
            continue
        default = config_field.default
        assert default is not MISSING, f"{key} has no default"
        value_type = _without_none(hints[key])
        shown = row.default_text
        if shown is None and isinstance(default, bool):
            shown = "on" if default else "off"
        elif shown is None and default is not None:
            shown = str(default)
        text = row.help + (f" [{shown}]" if shown else "") + "."
        flag_default = None  # not given: a session's value (or the default) stands
        specs.append(OptionSpec(key, _flag(key), value_type, flag_default, text))
    return specs


def _without_none(hint: Any) -> type:
    if isinstance(hint, UnionType):
        (only,) = [t for t in typing.get_args(hint) if t is not NoneType]
        return only
    return hint


def _flag(key: str) -> str:
    row = command_line_option(key)
    if row is not None and row.flag is not None:
        return row.flag
    return "--" + key.replace("_", "-")


def build_config(values: Mapping[str, Any], *, model: str | None, window: bool) -> ContextConfig:
    """The config from command-line values (``None``: not given); errors name the option."""
    given = {k: v for k, v in values.items() if v is not None}
    # Two keys only warn in a mount config; on a command line a bad value is an error.
    cap = given.get("max_tokens", 1)
    if not is_int(cap) or cap <= 0:  # a recorded value may be anything: "300000", say
        raise ValueError(f"--max-tokens must be a positive integer; got {cap!r}")
    meter = given.get("token_meter", "estimate")
    if not isinstance(meter, str) or meter not in TOKEN_METER_MODES:
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
