"""``context-simple``: replay a transcript through the context manager and report on it.

``context-simple replay [TRANSCRIPT]`` feeds a recorded session (or, with no argument, the
built-in example session) through a real ``SimpleContextManager``, asking for a view before
every assistant message as an orchestrator would, and reports the budget, every compaction and
how full each request got. ``context-simple inspect TRANSCRIPT --at N`` shows the exact view of
request N. Needs the ``cli`` extra (Typer and Rich); ``--plot`` needs the ``plot`` extra.

The runtime module never imports this file, so its dependencies stay optional.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

try:
    import typer
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table
    from typer.core import TyperGroup
except ModuleNotFoundError as _missing:  # pragma: no cover - depends on the installation
    sys.stderr.write(
        f"context-simple: error: the command needs the 'cli' extra ({_missing.name} is not "
        "installed): pip install 'amplifier-module-context-simple[cli]'\n"
    )
    raise SystemExit(2) from None

from ._budget import SAFETY_MARGIN_TOKENS
from ._config import ContextConfig
from ._estimate import family_for_model
from ._example_session import generate_session
from ._report import (
    DEFAULT_MAX_OUTPUT,
    HOST_CHECK_RUN,
    ReplayError,
    ReplayOutcome,
    ReplayReport,
    ViewRow,
    Window,
    build_config,
    build_window,
    describe_view,
    replay,
)
from ._transcripts import TranscriptError, load_transcript

EXAMPLE_WINDOW = Window(context_window=128_000, max_output_tokens=16_384)
"""The window simulated for the built-in example (a GPT-4o-sized model), so compaction shows."""
PROGRESS_MIN_MESSAGES = 300
SHOWN_SKIPPED_LINES = 5


class CliError(Exception):
    """A problem with the input or the options: shown as one line, exit status 1."""

    exit_code = 1

    def format_message(self) -> str:
        return str(self)


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
        except typer.Abort:
            typer.echo("context-simple: aborted", err=True)
            code = 1
        except Exception as exc:
            # Usage errors are Click's (or, in newer Typer, its vendored copy's) exceptions:
            # recognised by their interface so any supported Typer version works.
            code = getattr(exc, "exit_code", None)
            if isinstance(code, int) and callable(getattr(exc, "format_message", None)):
                message = _one_line(str(exc.format_message()))  # type: ignore[attr-defined]
                if message:  # empty when the help was shown for a bare `context-simple`
                    hint = "" if isinstance(exc, CliError) else " (see --help)"
                    typer.echo(f"context-simple: error: {message}{hint}", err=True)
            elif os.environ.get("CONTEXT_SIMPLE_DEBUG"):
                raise
            else:
                typer.echo(
                    f"context-simple: internal error: {type(exc).__name__}: "
                    f"{_one_line(str(exc))} (set CONTEXT_SIMPLE_DEBUG=1 for the traceback)",
                    err=True,
                )
                code = 3
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    cls=_OneLineErrors,
    name="context-simple",
    help="Replay a session through amplifier-module-context-simple and see its budget, every "
    "compaction and what the model was sent.",
    add_completion=False,
    no_args_is_help=True,
)

# --- options shared by replay and inspect ---------------------------------------------------

_C = "Context config"
_W = "Simulated provider"
_S = "Input"


def _opt(text: str, panel: str = _C, *names: str) -> Any:
    return typer.Option(*names, help=text, rich_help_panel=panel)


Transcript = Annotated[
    str | None,
    typer.Argument(
        help="transcript.jsonl, a session directory, OpenAI-style chat JSONL, or - for stdin. "
        "Omit it to replay the built-in example session.",
        show_default=False,
    ),
]
MaxTokens = Annotated[int | None, _opt("Cap on the budget.")]
Fallback = Annotated[int | None, _opt("Budget when no window is simulated [200000].")]
Threshold = Annotated[float | None, _opt("Compact at this share of the budget [0.92].")]
Target = Annotated[float | None, _opt("Share of the budget compaction aims for [0.5].")]
Recent = Annotated[float | None, _opt("Share of recent messages never left out [0.3].")]
ToolResults = Annotated[int | None, _opt("Latest N tool results kept whole [5].")]
TruncChars = Annotated[int | None, _opt("Characters a shortened result keeps [250].")]
Meter = Annotated[str | None, _opt("estimate or actual [estimate].")]
Family = Annotated[str | None, _opt("o200k, claude3 or claude47 [from --model].")]
IngressCap = Annotated[int | None, _opt("Ingress cap on a tool result, bytes [131072].")]
Notice = Annotated[bool, _opt("Append the compaction notice.", _C, "--notice/--no-notice")]
Verbosity = Annotated[str | None, _opt("Notice: minimal, normal or verbose [normal].")]
ReserveFraction = Annotated[float | None, _opt("Share of max output held back [0.5].")]
ContextWindow = Annotated[
    int | None, _opt("Simulate a provider window of N tokens (built-in example: 128000).", _W)
]
MaxOutput = Annotated[
    int | None, _opt(f"The model's max output tokens [{DEFAULT_MAX_OUTPUT}].", _W)
]
Model = Annotated[str | None, _opt("Model name: picks the estimator's tokenizer family.", _W)]
Strict = Annotated[bool, _opt("Fail on the first unusable line instead of skipping it.", _S)]
Seed = Annotated[int | None, _opt("Built-in example: random seed [7].", _S)]
Messages = Annotated[int | None, _opt("Built-in example: number of messages [400].", _S)]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


@dataclass
class _Input:
    messages: list[dict[str, Any]]
    source: dict[str, Any]
    config: ContextConfig
    window: Window | None


def _prepare(transcript: str | None, strict: bool, seed: int | None, count: int | None,
             window_options: tuple[int | None, int | None, str | None],
             config_values: dict[str, Any]) -> _Input:  # fmt: skip
    """Validate the options and load the messages; every problem is a :class:`CliError`."""
    context_window, max_output, model = window_options
    try:
        config = build_config(config_values, model=model, window=context_window is not None)
    except ValueError as exc:
        raise CliError(_one_line(str(exc))) from None
    if transcript is None:
        seed = 7 if seed is None else seed
        count = 400 if count is None else count
        if count < 2:
            raise CliError(f"--messages must be at least 2; got {count}")
        messages = generate_session(count, seed=seed)
        source = {"name": f"the built-in example session (seed {seed})",
                  "format": "example", "messages": count, "skipped_lines": []}  # fmt: skip
        source["window_given"] = context_window is not None
        if context_window is None:
            context_window = EXAMPLE_WINDOW.context_window
            max_output = max_output or EXAMPLE_WINDOW.max_output_tokens
    else:
        if seed is not None or count is not None:
            raise CliError("--seed and --messages only apply to the built-in example session")
        try:
            loaded = load_transcript(transcript, strict=strict)
        except TranscriptError as exc:
            raise CliError(_one_line(str(exc))) from None
        messages = loaded.messages
        skipped = [{"line": e.line_number, "reason": e.reason} for e in loaded.skipped]
        name = "standard input" if transcript == "-" else transcript
        source = {"name": name, "format": loaded.format, "messages": len(messages),
                  "skipped_lines": skipped}  # fmt: skip
        for error in loaded.skipped[:SHOWN_SKIPPED_LINES]:
            typer.echo(f"context-simple: warning: skipped {error}", err=True)
        if len(loaded.skipped) > SHOWN_SKIPPED_LINES:
            more = len(loaded.skipped) - SHOWN_SKIPPED_LINES
            typer.echo(f"context-simple: warning: skipped {more} more line(s)", err=True)
    try:
        window = build_window(context_window, max_output, model, config)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return _Input(messages, source, config, window)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _run(data: _Input, *, show_progress: bool, stop_at: int | None = None) -> ReplayOutcome:
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


# --- commands --------------------------------------------------------------------------------


@app.command("replay")
def replay_command(
    transcript: Transcript = None,
    as_json: AsJson = False,
    plot: Annotated[
        Path | None, typer.Option(help="Write a chart (.png or .svg); needs the plot extra.")
    ] = None,
    requests: Annotated[bool, typer.Option("--requests", help="Also list every request.")] = False,
    max_tokens: MaxTokens = None,
    max_tokens_fallback: Fallback = None,
    compact_threshold: Threshold = None,
    target_usage: Target = None,
    protected_recent: Recent = None,
    protected_tool_results: ToolResults = None,
    truncate_chars: TruncChars = None,
    token_meter: Meter = None,
    token_family: Family = None,
    max_tool_result_bytes: IngressCap = None,
    notice: Notice = True,
    notice_verbosity: Verbosity = None,
    output_reserve_fraction: ReserveFraction = None,
    context_window: ContextWindow = None,
    max_output_tokens: MaxOutput = None,
    model: Model = None,
    strict: Strict = False,
    seed: Seed = None,
    messages: Messages = None,
) -> None:
    """Replay a transcript (default: a built-in example) and report budget and compactions."""
    pyplot = _pyplot_for(plot) if plot is not None else None
    data = _prepare(
        transcript, strict, seed, messages, (context_window, max_output_tokens, model),
        _config_values(locals()),
    )  # fmt: skip
    report = _run(data, show_progress=not as_json).report
    if as_json:
        typer.echo(json.dumps(report.as_json(), indent=2))
    else:
        _render_report(_console(), report, show_requests=requests)
    if pyplot is not None and plot is not None and report.requests:
        _write_plot(pyplot, report, plot)
        typer.echo(f"context-simple: chart written to {plot}", err=True)
    elif plot is not None:
        typer.echo("context-simple: no chart: the transcript made no request", err=True)


@app.command("inspect")
def inspect_command(
    at: Annotated[int, typer.Option("--at", help="Request number (1-based).", show_default=False)],
    transcript: Transcript = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the view itself as JSON.")] = False,
    max_tokens: MaxTokens = None,
    max_tokens_fallback: Fallback = None,
    compact_threshold: Threshold = None,
    target_usage: Target = None,
    protected_recent: Recent = None,
    protected_tool_results: ToolResults = None,
    truncate_chars: TruncChars = None,
    token_meter: Meter = None,
    token_family: Family = None,
    max_tool_result_bytes: IngressCap = None,
    notice: Notice = True,
    notice_verbosity: Verbosity = None,
    output_reserve_fraction: ReserveFraction = None,
    context_window: ContextWindow = None,
    max_output_tokens: MaxOutput = None,
    model: Model = None,
    strict: Strict = False,
    seed: Seed = None,
    messages: Messages = None,
) -> None:
    """Show the exact view the model received at request N (roles, sizes, markers)."""
    if at < 1:
        raise CliError(f"--at must be 1 or more; got {at}")
    data = _prepare(
        transcript, strict, seed, messages, (context_window, max_output_tokens, model),
        _config_values(locals()),
    )  # fmt: skip
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
    family = data.config.token_family or family_for_model(model)
    rows, left_out = describe_view(outcome.view, outcome.history, family=family)
    _render_view(_console(), outcome, rows, left_out, at)


def _config_values(options: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "max_tokens", "max_tokens_fallback", "compact_threshold", "target_usage",
        "protected_recent", "protected_tool_results", "truncate_chars", "token_meter",
        "token_family", "max_tool_result_bytes", "output_reserve_fraction",
    )  # fmt: skip
    values = {key: options[key] for key in keys}
    values["compaction_notice_enabled"] = options["notice"]
    values["compaction_notice_verbosity"] = options["notice_verbosity"]
    return values


def _pyplot_for(path: Path) -> Any:
    """Check the chart can be written before a long replay: format and matplotlib."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise CliError(f"--plot writes .png or .svg files; got {path.name!r}")
    try:
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        return importlib.import_module("matplotlib.pyplot")
    except ImportError:
        raise CliError(
            "--plot needs matplotlib, which is not installed: "
            "pip install 'amplifier-module-context-simple[plot]' (or: uv sync --extra plot)"
        ) from None


# --- output ----------------------------------------------------------------------------------


def _render_report(console: Console, report: ReplayReport, *, show_requests: bool) -> None:
    s, src, n = report.summary(), report.source, len(report.requests)
    skipped = len(src.get("skipped_lines", []))
    console.print(
        f"[bold]Replayed[/] {escape(str(src.get('name')))}: {src.get('format')}, "
        f"{s['messages']:,} messages" + (f", {skipped} unusable line(s) skipped" if skipped else "")
    )
    if n == 0:
        console.print("No assistant message, so no request was made: nothing to report.")
        return
    console.print(f"[bold]Budget[/]  {_budget_text(report)}")
    console.print(
        f"[bold]Trigger[/] {s['trigger_tokens']:,} tokens (compact_threshold "
        f"{report.config.compact_threshold} of the budget less the notice reserve); compaction "
        f"aims for target_usage {report.config.target_usage}"
    )
    console.print(
        f"[bold]Tokens[/]  the module's estimates, tokenizer family "
        f"{report.token_family or 'none given (conservative estimate; see --model)'}"
    )
    table = Table(title="Summary", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for label, value in (
        ("Requests (one before each assistant message)", f"{n:,}"),
        ("Compactions", f"{s['compactions']:,} (final level {s['final_level']})"),
        ("Budget used, max / mean", f"{s['max_utilisation']:.1%} / {s['mean_utilisation']:.1%}"),
        ("Largest view", f"{s['peak_view_tokens']:,} tokens"),
        ("History at the end", f"{s['messages']:,} messages, {s['history_tokens']:,} tokens"),
        ("Tokens saved, last request", f"{s['final_tokens_saved']:,}"),
        ("Tokens saved, all requests", f"{s['tokens_saved']:,}"),
        ("Prefix-stable requests", f"{s['prefix_stable_requests']:,} / {n:,}"),
        ("Valid views", f"{n - s['invalid_views']:,} / {n:,}" + _host_note(s)),
        ("Views over the budget", f"{s['over_budget_requests']:,}"),
        ("Tool results clipped at ingress", f"{s['ingress_truncations']:,}"),
    ):  # fmt: skip
        table.add_row(label, value)
    console.print(table)
    if report.compactions:
        console.print(_compactions_table(report))
    else:
        console.print("No compaction: every view stayed under the trigger.")
    if show_requests:
        console.print(_requests_table(report))
    bad = next((r for r in report.requests if not r.valid), None)
    if bad is not None:
        console.print(
            f"[red]First invalid view[/] (request {bad.request}): {escape(bad.violations[0])}"
        )
    if report.warnings:
        total = sum(report.warnings.values())
        first = escape(next(iter(report.warnings)))
        console.print(
            f"[yellow]The manager logged {total} warning(s)[/] (all in --json); first: {first}"
        )
    if not show_requests:
        console.print("[dim]Every request: --requests or --json. One view: inspect --at N.[/]")


def _host_note(summary: dict[str, Any]) -> str:
    """What "valid" covered: check_view always, the host's model only where it is installed."""
    if summary["host_check"] != HOST_CHECK_RUN:
        return f" (check_view only; host model check {summary['host_check']})"
    return f" (check_view + host model; host refused {summary['host_invalid_views']:,})"


def _console() -> Console:
    console = Console(highlight=False)
    # Piped or captured output: wide enough that the tables do not wrap.
    return console if console.is_terminal else Console(highlight=False, width=150)


def _budget_text(report: ReplayReport) -> str:
    b = report.budget_event or {}
    text = f"{b.get('effective_budget', 0):,} tokens"
    if b.get("source") == "provider_defaults":
        text += (
            f" = simulated {b['context_window']:,}-token window - {b['reserved_output']:,} "
            f"reserved output - {SAFETY_MARGIN_TOKENS:,} margin (provider_defaults)"
        )
        if report.source.get("format") == "example" and not report.source.get("window_given"):
            text += (
                "\n        (the built-in example's default window; change it with --context-window)"
            )
    else:
        text += f" ({b.get('source')}: no provider window simulated; see --context-window)"
    if b.get("capped"):
        text += f", capped by --max-tokens {b.get('max_tokens'):,}"
    return text


def _compactions_table(report: ReplayReport) -> Table:
    table = Table(title="Compactions", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("#", "request", "level", "view tokens before → after",
                 "messages before → after", "removed", "truncated", "stubbed"):  # fmt: skip
        table.add_column(name, justify="right")
    for i, c in enumerate(report.compactions, 1):
        table.add_row(
            str(i), str(c.request), str(c.level), f"{c.before_tokens:,} → {c.after_tokens:,}",
            f"{c.before_messages} → {c.after_messages}", str(c.removed), str(c.truncated),
            str(c.stubbed),
        )  # fmt: skip
    return table


def _requests_table(report: ReplayReport) -> Table:
    table = Table(title="Requests", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("request", "history msgs", "history tok", "view msgs", "view tok", "used",
                 "level", "left out", "shortened", "stubs", "notice", "ok"):  # fmt: skip
        table.add_column(name, justify="right")
    for r in report.requests:
        flags = ("" if r.valid else "INVALID ") + ("" if r.prefix_stable else "new prefix")
        table.add_row(
            f"{r.request}{'*' if r.compacted else ''}", str(r.history_messages),
            f"{r.history_tokens:,}", str(r.view_messages), f"{r.view_tokens:,}",
            f"{r.utilisation:.0%}", str(r.level), str(r.left_out), str(r.shortened),
            str(r.stubs), "yes" if r.notice else "", flags or "ok",
        )  # fmt: skip
    table.caption = "* compaction at this request; ok: view valid and prefix-stable"
    return table


def _render_view(
    console: Console, outcome: ReplayOutcome, rows: list[ViewRow], left_out: list[int], at: int
) -> None:
    record = outcome.report.requests[at - 1]
    console.print(
        f"[bold]Request {at}[/] (before history message {record.at_message}): "
        f"{record.view_messages} of {record.history_messages} messages, "
        f"~{record.view_tokens:,} tokens = "
        f"{record.utilisation:.1%} of the {record.budget:,}-token budget; compaction level "
        f"{record.level}; view {'valid' if record.valid else 'INVALID'}"
        + ("" if record.host_valid is not None else " (host model check not run)")
    )
    table = Table(
        caption="hist: position in the history (0-based); blank: added by the view",
        box=box.SIMPLE_HEAD,
    )
    for name, width in (("#", 3), ("hist", 5), ("tokens", 7), ("chars", 7)):
        table.add_column(name, justify="right", no_wrap=True, min_width=width)
    table.add_column("role", no_wrap=True, min_width=9)
    table.add_column("markers", no_wrap=True)
    table.add_column("tool call ids", no_wrap=True)
    table.add_column("content", no_wrap=True, overflow="ellipsis", max_width=36)
    for row in rows:
        table.add_row(
            str(row.index), "" if row.position is None else str(row.position),
            f"{row.tokens:,}", f"{row.chars:,}", row.role, escape(", ".join(row.markers)),
            escape("\n".join(row.tool_call_ids)), escape(row.preview),
        )  # fmt: skip
    console.print(table)
    console.print(f"Left out of this view ({len(left_out)}): {_ranges(left_out) or 'nothing'}")
    for violation in record.violations:
        console.print(f"[red]violation:[/] {escape(violation)}")


def _thousands(value: float, _position: int) -> str:
    return f"{value / 1000:,.0f}k"


def _ranges(positions: list[int]) -> str:
    parts: list[str] = []
    for p in positions:
        if parts and parts[-1].split("-")[-1] == str(p - 1):
            parts[-1] = parts[-1].split("-")[0] + f"-{p}"
        else:
            parts.append(str(p))
    return ", ".join(parts)


def _write_plot(pyplot: Any, report: ReplayReport, path: Path) -> None:
    requests = report.requests
    s = report.summary()
    x = [r.request for r in requests]
    fig, ax = pyplot.subplots(figsize=(11, 5.5), dpi=110)
    ax.plot(x, [r.history_tokens for r in requests], color="#9aa0a6", label="history")
    ax.plot(x, [r.view_tokens for r in requests], color="#1a73e8", lw=2, label="view sent")
    ax.axhline(s["budget"], color="#d93025", ls="--", label=f"budget {s['budget']:,}")
    ax.axhline(s["trigger_tokens"], color="#f29900", ls=":", lw=2,
               label=f"compaction trigger {s['trigger_tokens']:,}")  # fmt: skip
    if report.compactions:
        ax.scatter([c.request for c in report.compactions],
                   [c.before_tokens for c in report.compactions], marker="v", color="#d93025",
                   zorder=3, label="compaction (view before it; L = ladder level)")  # fmt: skip
        for c in report.compactions:
            ax.annotate(f"L{c.level}", (c.request, c.before_tokens), textcoords="offset points",
                        xytext=(0, 7), ha="center", fontsize=8, color="#d93025")  # fmt: skip
    ax.set_title(f"{report.source.get('name')}: {s['requests']} requests, "
                 f"{s['compactions']} compactions")  # fmt: skip
    ax.set_xlabel("request (one before each assistant message)")
    ax.set_ylabel("estimated tokens")
    ax.yaxis.set_major_formatter(
        importlib.import_module("matplotlib.ticker").FuncFormatter(_thousands)
    )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path, format=path.suffix.lower().lstrip("."))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        pyplot.close(fig)


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
