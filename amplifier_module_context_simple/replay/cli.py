"""``context-simple``: replay a transcript through the context manager and report on it.

``context-simple replay [TRANSCRIPT]`` feeds a recorded session (or, with no argument, the
built-in example session) through a real ``SimpleContextManager``, asking for a view before
every assistant message as an orchestrator would, and reports the budget, every compaction and
how full each request got. ``context-simple inspect TRANSCRIPT --at N`` shows the exact view of
request N. Needs the ``cli`` extra (Typer and Rich); ``--plot`` needs the ``plot`` extra.

The runtime package never imports this one, so its dependencies stay optional.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

try:
    import typer
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from typer.core import TyperGroup
except ModuleNotFoundError as _missing:  # pragma: no cover - depends on the installation
    sys.stderr.write(
        f"context-simple: error: the command needs the 'cli' extra ({_missing.name} is not "
        "installed): pip install 'amplifier-module-context-simple[cli]'\n"
    )
    raise SystemExit(2) from None

from .._estimate import family_for_model
from .engine import ReplayError, ReplayOutcome, replay
from .errors import CliError, one_line
from .inputs import ReplayInput, SharedOptions, prepare
from .options import shared_options
from .output import render_report, render_view, stdout_console
from .plot import pyplot_for, write_plot
from .view import describe_view

__all__ = ["app", "main"]

PROGRESS_MIN_MESSAGES = 300


class _OneLineErrors(TyperGroup):
    """Every failure ends as one ``context-simple: error: ...`` line on stderr, no traceback."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )
            code = result if isinstance(result, int) else 0
        except BrokenPipeError:
            # The reader went away (`context-simple replay | head -1`): what it read is all
            # it wanted, so this is a success. Standard output is pointed at /dev/null so the
            # interpreter's last flush cannot fail again.
            _silence_stdout()
            code = 0
        except typer.Abort:
            typer.echo("context-simple: aborted", err=True)
            code = 1
        except Exception as exc:
            # Usage errors are Click's (or, in newer Typer, its vendored copy's) exceptions:
            # recognised by their interface so any supported Typer version works.
            code = getattr(exc, "exit_code", None)
            if isinstance(code, int) and callable(getattr(exc, "format_message", None)):
                message = one_line(str(exc.format_message()))  # type: ignore[attr-defined]
                if message:  # empty when the help was shown for a bare `context-simple`
                    hint = "" if isinstance(exc, CliError) else " (see --help)"
                    typer.echo(f"context-simple: error: {message}{hint}", err=True)
            elif os.environ.get("CONTEXT_SIMPLE_DEBUG"):
                raise
            else:
                typer.echo(
                    f"context-simple: internal error: {type(exc).__name__}: "
                    f"{one_line(str(exc))} (set CONTEXT_SIMPLE_DEBUG=1 for the traceback)",
                    err=True,
                )
                code = 3
        if standalone_mode:
            sys.exit(code)
        return code


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (captured output): nothing to do
        pass


app = typer.Typer(
    cls=_OneLineErrors,
    name="context-simple",
    help="Replay a session through amplifier-module-context-simple and see its budget, every "
    "compaction and what the model was sent.",
    add_completion=False,
    no_args_is_help=True,
)


# --- commands --------------------------------------------------------------------------------


@app.command("replay")
@shared_options
def replay_command(
    options: SharedOptions,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    plot: Annotated[
        Path | None, typer.Option(help="Write a chart (.png or .svg); needs the plot extra.")
    ] = None,
    requests: Annotated[bool, typer.Option("--requests", help="Also list every request.")] = False,
) -> None:
    """Replay a transcript (default: a built-in example) and report budget and compactions."""
    pyplot = pyplot_for(plot) if plot is not None else None
    data = prepare(options)
    report = _run(data, show_progress=not as_json).report
    if as_json:
        typer.echo(json.dumps(report.as_json(), indent=2))
    else:
        render_report(stdout_console(), report, show_requests=requests)
    if pyplot is not None and plot is not None and report.requests:
        write_plot(pyplot, report, plot)
        typer.echo(f"context-simple: chart written to {plot}", err=True)
    elif plot is not None:
        typer.echo("context-simple: no chart: the transcript made no request", err=True)


@app.command("inspect")
@shared_options
def inspect_command(
    options: SharedOptions,
    at: Annotated[int, typer.Option("--at", help="Request number (1-based).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the view itself as JSON.")] = False,
) -> None:
    """Show the exact view the model received at request N (roles, sizes, markers)."""
    if at < 1:
        raise CliError(f"--at must be 1 or more; got {at}")
    data = prepare(options)
    outcome = _run(data, show_progress=not as_json, stop_at=at)
    if outcome.view is None:
        count = len(outcome.report.requests)
        raise CliError(
            f"--at {at} is past the end: the transcript makes {count} request(s) "
            "(one before each assistant message)"
        )
    if as_json:
        typer.echo(json.dumps(outcome.view, indent=2, ensure_ascii=False, default=str))
        return
    family = data.config.token_family or family_for_model(options.model)
    rows, left_out = describe_view(outcome.view, outcome.history, family=family)
    render_view(stdout_console(), outcome, rows, left_out, at)


def _run(data: ReplayInput, *, show_progress: bool, stop_at: int | None = None) -> ReplayOutcome:
    err = Console(stderr=True)
    show = show_progress and len(data.messages) > PROGRESS_MIN_MESSAGES and err.is_terminal
    with Progress(
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("messages"),
        console=err,
        transient=True,
        disable=not show,
    ) as progress:
        task = progress.add_task("replay", total=len(data.messages))
        try:
            return asyncio.run(
                replay(
                    data.messages,
                    config=data.config,
                    window=data.window,
                    source=data.source,
                    progress=lambda n: progress.advance(task, n),
                    stop_at=stop_at,
                )
            )
        except ReplayError as exc:
            raise CliError(str(exc)) from None


def main() -> None:
    """Console-script entry point."""
    app()
