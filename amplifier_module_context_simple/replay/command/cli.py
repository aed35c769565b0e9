"""``context-simple``: replay a transcript through the context manager and report on it.

``context-simple replay [TRANSCRIPT]`` feeds a recorded session (or, with no argument, the
built-in example session) through a real ``SimpleContextManager``, asking for a view before
every assistant message as an orchestrator would, and reports the budget, every compaction and
how full each request got, what each compaction dropped and which views a provider would
refuse (``--check``: exit status :data:`CHECK_FAILED` when any would be). ``context-simple
inspect TRANSCRIPT --at N`` shows the exact view of request N and what it left out; ``--why
POSITION`` tells when message POSITION left the view. ``context-simple sweep TRANSCRIPT
--compact-threshold 0.6,0.8`` replays once per setting and compares them. Needs the ``cli``
extra (Typer and Rich); ``--plot`` needs the ``plot`` extra.

The runtime package never imports this one, so its dependencies stay optional.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import sys
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from functools import partial
from importlib import metadata
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

from ..engine.engine import ReplayError, ReplayOutcome, replay
from ..engine.report import SCHEMA_VERSION
from ..engine.setting_checks import warn_settings
from ..engine.sweep import SWEPT_KEYS, SweepRow, parse_values, row_for, settings
from ..engine.sweep import as_json as sweep_json
from ..engine.view import describe_view
from ..errors import CliError, one_line
from ..findings.drops import drops_at, explain, left_by_agent
from ..findings.evidence import map_findings
from ..findings.records import not_recorded_check_text
from ..findings.refusals import assess
from ..output.evidence_output import render_evidence
from ..output.findings_output import (
    render_drops,
    render_left_out,
    render_refusals,
    render_sweep,
    render_why,
)
from ..output.first_screen import FULL_FLAG, render_first_screen
from ..output.json_text import json_text
from ..output.output import render_report, render_view, stdout_console
from ..output.plot import pyplot_for, write_plot
from ..provider.cache_reuse import CacheReport
from .inputs import ReplayInput, SharedOptions, prepare
from .options import FlagsBare, bare_flags, shared_options

__all__ = ["CHECK_FAILED", "app", "main"]

PROGRESS_MIN_MESSAGES = 300
CHECK_FAILED = 4
"""``replay --check``'s exit status when a provider would refuse a view. The others: 0 fine,
1 a problem with the input or the options, 2 a usage error, 3 an internal error."""


class _OneLineErrors(TyperGroup):
    """Every failure ends as one ``context-simple: error: ...`` line on stderr, no traceback."""

    def get_params(self, ctx: Any) -> list[Any]:
        return bare_flags(super().get_params(ctx))

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

DISTRIBUTION = "amplifier-module-context-simple"


def package_version() -> str:
    """The installed package's version; a note instead when it is not installed as a package
    (the source imported from a checkout that was never installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed as a package)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"context-simple {package_version()} ({DISTRIBUTION})")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Replay a session through amplifier-module-context-simple and see its budget, every
    compaction and what the model was sent."""


# --- commands --------------------------------------------------------------------------------


@app.command("replay", cls=FlagsBare)
@shared_options
def replay_command(
    options: SharedOptions,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    plot: Annotated[
        Path | None, typer.Option(help="Write a chart (.png or .svg); needs the plot extra.")
    ] = None,
    requests: Annotated[bool, typer.Option("--requests", help="Also list every request.")] = False,
    full: Annotated[
        bool,
        typer.Option(
            FULL_FLAG,
            help="The whole report: the settings, the budget arithmetic, the window, "
            "compaction and drop tables, and the notes (default: the first screen).",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help=f"Exit with status {CHECK_FAILED} when a provider would refuse any view (above "
            "the window, or invalid); 0 when none would.",
        ),
    ] = False,
) -> None:
    """Replay a transcript (default: a built-in example) and report budget and compactions.

    Exit status: 0 done, 1 bad input or options, 2 usage, 3 internal, 4 a view refused (--check).
    """
    pyplot = pyplot_for(plot) if plot is not None else None
    # Reading, replaying and reporting: see _collector_paused. Nothing after the report
    # needs the collector when the process ends with the command.
    with _collector_paused(last=_process_ends_with_command):
        data = prepare(options)
        report = _run(data, show_progress=not as_json).report
        report.rework = data.rework(report.token_family)
        if as_json:
            typer.echo(json_text(report.as_json()))
        else:
            console = stdout_console()
            if full:
                render_report(console, report, show_requests=requests)
                if report.requests:
                    render_drops(console, report)
                    render_evidence(console, report)
                    render_refusals(console, assess(report))
            else:
                render_first_screen(console, report, show_requests=requests)
    if pyplot is not None and plot is not None and report.requests:
        write_plot(pyplot, report, plot)
        typer.echo(f"context-simple: chart written to {plot}", err=True)
    elif plot is not None:
        typer.echo("context-simple: no chart: the transcript made no request", err=True)
    if check:
        refusals = assess(report)
        unjudged = not_recorded_check_text(refusals.not_recorded, refusals.requests)
        if unjudged is not None:
            typer.echo(f"context-simple: check: {unjudged}", err=True)
        if refusals.refused:
            first = refusals.refused[0]
            typer.echo(
                f"context-simple: check failed: {refusals.refused_views} of "
                f"{refusals.requests} view(s) would be refused; first, request {first.request}: "
                f"{one_line(first.reasons[0])}",
                err=True,
            )
            raise typer.Exit(CHECK_FAILED)


@app.command("inspect", cls=FlagsBare)
@shared_options
def inspect_command(
    options: SharedOptions,
    at: Annotated[
        int | None, typer.Option("--at", help="Request number (1-based).", show_default=False)
    ] = None,
    why: Annotated[
        int | None,
        typer.Option(
            "--why",
            help="History position (0-based, the 'hist' column): at which request the message "
            "left the view, was shortened or stubbed, and by which compaction level.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the view (with --why: its changes) as a JSON document."),
    ] = False,
) -> None:
    """Show the exact view of request N, or with --why POSITION what the views did to one message.

    Lists the view's roles, sizes and markers, and the history messages it left out.
    """
    if at is None and why is None:
        raise CliError("give --at N (a request) or --why POSITION (a history message)")
    if at is not None and why is not None:
        raise CliError("give --at or --why, not both")
    if why is not None:
        _why(options, why, as_json=as_json)
        return
    assert at is not None
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
    if as_json:  # a document like --why's: the view is one of its keys
        document = {"schema_version": SCHEMA_VERSION, "request": at, "view": outcome.view}
        typer.echo(json_text(document, ensure_ascii=False, default=str))
        return
    family = data.token_family
    rows, left_out = describe_view(
        outcome.view, outcome.history, family=family, start=outcome.history_start
    )
    console = stdout_console()
    render_view(console, outcome, rows, left_out, at)
    render_left_out(console, outcome.history, left_out, outcome.report.drops, family=family)


def _why(options: SharedOptions, position: int, *, as_json: bool) -> None:
    data = prepare(options)
    if not 0 <= position < len(data.messages):
        raise CliError(
            f"--why {position} is not a history position: the transcript has "
            f"{len(data.messages)} message(s), positions 0-{len(data.messages) - 1}"
        )
    outcome = _run(data, show_progress=not as_json)
    report = outcome.report
    findings = map_findings(outcome.history[position], report.evidence)
    if as_json:
        changes = [dataclasses.asdict(d) for d in drops_at(report.drops, position)]
        document = {
            "schema_version": SCHEMA_VERSION,
            "position": position,
            "changes": changes,
            "findable_through_map": [dataclasses.asdict(f) for f in findings],
        }
        typer.echo(json_text(document))
        return
    family = report.token_family
    # Before each request every earlier message was added (across the agent's compactions).
    history_at = [r.at_message for r in report.requests]
    agent_left = left_by_agent(position, data.boundaries(), history_at)
    lines = explain(
        position, outcome.history, report.drops, history_at, family=family, agent_left=agent_left
    )
    lines += [
        f"request {f.request}: the next call used `{f.string}`, no longer shown; the notice's "
        f"map kept it findable: {f.line}"
        for f in findings
    ]
    render_why(stdout_console(), position, lines)


_SWEEP_PANEL = "Swept (comma lists; every combination is one replay)"


@app.command("sweep", cls=FlagsBare)
@partial(shared_options, without=tuple(SWEPT_KEYS))
def sweep_command(
    options: SharedOptions,
    thresholds: Annotated[
        str | None,
        typer.Option(
            "--compact-threshold",
            help="Compact at these shares of the budget, e.g. 0.6,0.8,0.92.",
            rich_help_panel=_SWEEP_PANEL,
        ),
    ] = None,
    targets: Annotated[
        str | None,
        typer.Option(
            "--target-usage",
            help="Shares of the budget compaction aims for, e.g. 0.4,0.5.",
            rich_help_panel=_SWEEP_PANEL,
        ),
    ] = None,
    caps: Annotated[
        str | None,
        typer.Option(
            "--max-tokens",
            help="Caps on the budget, e.g. 100000,200000.",
            rich_help_panel=_SWEEP_PANEL,
        ),
    ] = None,
    reserves: Annotated[
        str | None,
        typer.Option(
            "--notice-reserve",
            help="Tokens held back for the compaction notice, e.g. 300,800.",
            rich_help_panel=_SWEEP_PANEL,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Replay once per setting and compare, one row per combination of the listed values.

    Rows cheapest first: priced input, history kept, compactions, prefix breaks, peak, refusals.
    """
    given = {
        "compact_threshold": thresholds,
        "target_usage": targets,
        "max_tokens": caps,
        "compaction_notice_token_reserve": reserves,
    }
    try:
        lists = {k: parse_values(k, text) for k, text in given.items() if text is not None}
        rows = settings(lists)
    except ValueError as exc:
        raise CliError(one_line(str(exc))) from None
    if not lists:
        raise CliError(
            "give a list to sweep: --compact-threshold, --target-usage, --max-tokens or "
            "--notice-reserve"
        )
    data = prepare(options)
    found: list[SweepRow] = []
    recorded_cache: CacheReport | None = None
    warned: set[str] = set()  # a warning every row shares is said once
    for setting in rows:  # one replay each, with the progress bar and errors of a replay
        one = dataclasses.replace(data, config=dataclasses.replace(data.config, **setting))
        report = _run(one, show_progress=not as_json, warned=warned).report
        found.append(row_for(setting, report))
        recorded_cache = report.cache
    if as_json:
        document = {
            "schema_version": SCHEMA_VERSION,
            "source": data.source,
            "window": dataclasses.asdict(data.window) if data.window else None,
            "rows": sweep_json(found),
        }
        typer.echo(json_text(document))
        return
    console = stdout_console()
    render_sweep(console, found)
    if recorded_cache is not None and recorded_cache.breaks:
        causes = ", ".join(f"{n} {c}" for c, n in recorded_cache.causes().items())
        console.print(
            f"The recorded requests broke the provider's cache {recorded_cache.breaks} time(s) "
            f"({causes}); those breaks are in the payloads the session sent, not in the views, "
            "so no setting here changes them."
        )


def _run(
    data: ReplayInput,
    *,
    show_progress: bool,
    stop_at: int | None = None,
    warned: set[str] | None = None,
) -> ReplayOutcome:
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
        outcome: list[ReplayOutcome] = []

        async def run() -> None:
            # The outcome is handed out through ``outcome``, not as the task's result: when
            # asyncio.run puts back the SIGINT handler it formats the old one, which holds the
            # task, and that repr takes in the task's result: the whole report, every record
            # (0.7 s and 60 MB of peak memory on the 20 MB benchmark transcript).
            outcome.append(
                await replay(
                    data.messages,
                    config=data.config,
                    window=data.window,
                    source=data.source,
                    progress=(lambda n: progress.advance(task, n)) if show else None,
                    stop_at=stop_at,
                    recorded=data.recorded(),
                    overhead=data.overhead,
                    sub_agents=data.log.sub_agent_requests() if data.log is not None else (),
                    boundaries=frozenset(data.boundaries()),
                )
            )

        try:
            with _collector_paused():
                asyncio.run(run())
        except ReplayError as exc:
            raise CliError(str(exc)) from None
        warn_settings(outcome[0].report, set() if warned is None else warned)
        return outcome[0]


_process_ends_with_command = False
"""Set by :func:`main`: the command is the process's last work (not a test's invocation)."""


@contextmanager
def _collector_paused(*, last: bool = False) -> Generator[None, None, None]:
    """The cyclic garbage collector off for a replay, back on (if it was) afterwards.

    Its full passes walk every message and fact a replay holds (half a second on a 20 MB
    transcript) and find next to nothing: a replay's garbage is freed by reference counting,
    and what only the collector can free is the manager's graph once the replay is over (a
    test bounds it). Each replay of a ``sweep`` turns it back on, so those graphs are freed.
    With ``last`` (the process ends once the command has printed) every object is frozen
    first: turned back on, the collector would otherwise pass once over everything the
    replay made (a tenth of a second at 20 MB) just before the process exits.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if last:
                gc.freeze()
            gc.enable()


def main() -> None:
    """Console-script entry point."""
    global _process_ends_with_command
    _process_ends_with_command = True
    app()
