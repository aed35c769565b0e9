"""A command's ``--help``, laid out by the tables' own fitting rule.

Typer's help squeezes every column of an options panel alike when the terminal is narrow, so
at 80 columns a long option name ended in an ellipsis (``--max-tokens-fallba…``) and at 60
two options read the same (``--protected-…``). Here an option's names are a ``word`` column
(never cut or wrapped: an on/off flag's two names stand on two lines, a value's placeholder
beside the name), and the help text wraps between words; below the narrowest such table the
rows become lists (:mod:`..output.table_fit`). The panels, their order and the texts are
Typer's: only the layout is this module's.
"""

from __future__ import annotations

import inspect
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape

from ..output.table_fit import Column, fit_table

__all__ = ["render_command_help"]

_ARGUMENTS = "Arguments"
_OPTIONS = "Options"


def render_command_help(command: Any, ctx: Any) -> None:
    """Print ``command``'s help (a Click command as Typer builds it) for ``ctx``."""
    console = Console(highlight=False)
    console.print(f"Usage: {escape(command.get_usage(ctx).removeprefix('Usage: '))}")
    for paragraph in inspect.cleandoc(command.help or "").split("\n\n"):
        if paragraph.strip():
            console.print()
            console.print(" ".join(paragraph.split()))
    panels: dict[str, list[list[str]]] = {}
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        default_panel = _ARGUMENTS if param.param_type_name == "argument" else _OPTIONS
        panel = getattr(param, "rich_help_panel", None) or default_panel
        panels.setdefault(panel, []).append(_row(param, ctx))
    columns = [Column("", kind="word"), Column("", kind="text")]
    for name, rows in _ordered(panels):
        console.print()
        console.print(fit_table(columns, rows, title=name, box=box.SIMPLE))


def _ordered(panels: dict[str, list[list[str]]]) -> list[tuple[str, list[list[str]]]]:
    """Arguments, then Options, then the named panels in the order their options come."""
    first = [p for p in (_ARGUMENTS, _OPTIONS) if p in panels]
    rest = [p for p in panels if p not in first]
    return [(p, panels[p]) for p in [*first, *rest]]


def _row(param: Any, ctx: Any) -> list[str]:
    if param.param_type_name == "argument":
        names = [param.name]
    else:
        names = [*param.opts, *param.secondary_opts]
    value = param.display_type_rich(ctx) if hasattr(param, "display_type_rich") else None
    if value:  # the placeholder beside the last name: "--max-tokens <int>"
        names[-1] = f"{names[-1]} {value}"
    # The help texts are Rich markup already (options.py escapes every "[default]").
    return ["\n".join(escape(n) for n in names), param.help or ""]
