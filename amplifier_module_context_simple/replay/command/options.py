"""The options ``replay`` and ``inspect`` share, declared once, and how flags show in the help.

:func:`shared_options` adds them to a command: the command declares only its own parameters
and receives the shared ones as one :class:`~.inputs.SharedOptions`. Typer reads a command's
parameters from its signature, so the decorator gives the command a signature with the shared
parameters appended (after the command's own, which keeps each help panel's order). The
context-config options come from ``config_options.config_option_specs()``. :class:`FlagsBare`
is the commands' class: their help shows an on/off flag without a ``<bool>`` placeholder.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperCommand

from ..engine.config_options import config_option_specs
from ..provider.simulation import DEFAULT_MAX_OUTPUT, EXAMPLE_WINDOW
from ..recordings.transcripts import ACCEPTED_LAYOUTS
from .help_text import render_command_help
from .inputs import EXAMPLE_MESSAGES, EXAMPLE_SEED, SharedOptions

__all__ = ["FlagsBare", "bare_flags", "shared_options"]

_CONFIG_PANEL = "Context config"
_PROVIDER_PANEL = "Simulated provider"
_INPUT_PANEL = "Input"


@dataclass(frozen=True)
class _Parameter:
    name: str
    annotation: Any
    default: Any


def _option(
    name: str, value_type: type, default: Any, text: str, panel: str, *flags: str
) -> _Parameter:
    """A parameter ``name``; any option may be left out (``None``: not given).

    On/off flags too: a flag given at its default must still win over a session's value. The
    help is Rich markup to Typer, where ``[estimate]`` or ``[from --model]`` would be taken for
    a style tag and vanish: escaped, every ``[default]`` shows as written.
    """
    option = typer.Option(*flags, help=escape(text), rich_help_panel=panel)
    annotation = value_type | None
    return _Parameter(name, Annotated[annotation, option], default)


def _on_off(flag: str) -> str:
    """``--notice`` -> ``--notice/--no-notice``: Click's declaration of an on/off flag."""
    return f"{flag}/--no-{flag.removeprefix('--')}"


_TRANSCRIPT = _Parameter(
    "transcript",
    Annotated[
        str | None,
        typer.Argument(
            help=escape(
                f"What to replay. Read: {ACCEPTED_LAYOUTS}. Omit it to replay the built-in "
                "example session."
            ),
            show_default=False,
        ),
    ],
    None,
)
_CONFIG = [
    _option(
        spec.key,
        spec.value_type,
        spec.default,
        spec.help,
        _CONFIG_PANEL,
        _on_off(spec.flag) if spec.value_type is bool else spec.flag,
    )
    for spec in config_option_specs()
]
_WINDOW = [
    _option(
        "context_window",
        int,
        None,
        "Simulate a provider window of N tokens "
        f"(built-in example: {EXAMPLE_WINDOW.context_window}).",
        _PROVIDER_PANEL,
    ),
    _option(
        "max_output_tokens",
        int,
        None,
        "The model's max output tokens; a session directory's own figure when it recorded one "
        f"[{DEFAULT_MAX_OUTPUT}].",
        _PROVIDER_PANEL,
    ),
    _option(
        "model",
        str,
        None,
        "Model name: its window and max output from the model table (any input) and the "
        "estimator's tokenizer family; a model the table lacks is named in a warning.",
        _PROVIDER_PANEL,
    ),
    _option(
        "overhead",
        int,
        None,
        "Tokens a bare transcript lacks (system prompt, tool definitions, injections): held "
        "back by the replayed budget as mounted tools are, and counted in the window breakdown.",
        _PROVIDER_PANEL,
    ),
]
_INPUT = [
    _option(
        "strict",
        bool,
        False,
        "Fail on the first unusable line instead of skipping it.",
        _INPUT_PANEL,
    ),
    _option(
        "conversation",
        int,
        None,
        "Which conversation to replay (1-based) of a file holding one per line "
        '({"messages": [...]}, as fine-tuning and eval files do); needed when it holds several.',
        _INPUT_PANEL,
    ),
    _option("seed", int, None, f"Built-in example: random seed [{EXAMPLE_SEED}].", _INPUT_PANEL),
    _option(
        "messages",
        int,
        None,
        f"Built-in example: number of messages [{EXAMPLE_MESSAGES}].",
        _INPUT_PANEL,
    ),
]
_SHARED: list[_Parameter] = [_TRANSCRIPT, *_CONFIG, *_WINDOW, *_INPUT]
_CONFIG_KEYS = tuple(p.name for p in _CONFIG)


def shared_options(
    command: Callable[..., None], *, without: Collection[str] = ()
) -> Callable[..., None]:
    """``command(options: SharedOptions, **own)`` as a Typer command with the shared options.

    ``without``: config keys the command declares itself (``sweep``'s lists); they reach
    ``SharedOptions`` as not given.
    """
    signature = inspect.signature(command, eval_str=True)  # Typer needs the real types
    own = [p for p in signature.parameters.values() if p.name != "options"]

    def run(**given: Any) -> None:
        # The parameters are named as SharedOptions' fields; the config ones go in one dict.
        shared: dict[str, Any] = {
            p.name: None if p.name in without else given.pop(p.name) for p in _SHARED
        }
        config_values = {key: shared.pop(key) for key in _CONFIG_KEYS}
        command(SharedOptions(config_values=config_values, **shared), **given)

    added = [
        inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=p.default,
                          annotation=p.annotation)
        for p in _SHARED
        if p.name not in without
    ]  # fmt: skip
    run.__signature__ = inspect.Signature([*own, *added])  # type: ignore[attr-defined]
    run.__name__ = command.__name__
    run.__qualname__ = command.__qualname__
    run.__doc__ = command.__doc__
    run.__module__ = command.__module__
    return run


def bare_flags(params: list[Any]) -> list[Any]:
    """The help shows no ``<bool>`` placeholder after an on/off flag: it takes no value."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class FlagsBare(TyperCommand):
    """A command whose help shows its flags without a value placeholder (:func:`bare_flags`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return bare_flags(super().get_params(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        render_command_help(self, ctx)
