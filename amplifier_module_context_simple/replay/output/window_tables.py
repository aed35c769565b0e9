"""Rich tables for what the window held (:mod:`.payload`) and for cache reuse (:mod:`.cache_reuse`).

They fit the console by :mod:`.table_fit`'s rule: figures whole, optional columns left out
(and named) in the order declared here.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from ..payloads.payload import UsageComparison, WindowBreakdown
from ..payloads.space_parts import Part
from ..provider.cache_reuse import CacheReport, CacheRequest
from ..provider.cache_rules import CAUSE_MEANINGS, Difference
from .table_fit import Cell, Column, Note, fit_table

__all__ = ["render_cache", "render_window"]


def _gap(comparison: UsageComparison | None) -> tuple[str, str, str]:
    if comparison is None:
        return "", "", ""
    share = comparison.gap_share
    return (
        f"{comparison.provider:,}",
        f"{comparison.gap:+,}",
        "" if share is None else f"{share:+.1%}",
    )


def render_window(
    console: Console,
    breakdowns: Sequence[WindowBreakdown],
    comparisons: Sequence[UsageComparison | None] = (),
    *,
    numbers: Sequence[int] | None = None,
    not_recorded: set[int] | frozenset[int] = frozenset(),
    window_known: bool = True,
) -> None:
    """Per request: the window by category, ours beside the provider's; then the last one.

    ``not_recorded``: the request numbers of a recorded session that have no payload (marked
    ``*``; meaningful only beside recorded ones, whose columns they share). ``window_known``:
    false when no window was simulated or recorded, and the figure is the fallback budget."""
    if not breakdowns:
        console.print("No request payload: nothing to break down.")
        return
    numbers = list(numbers or range(1, len(breakdowns) + 1))
    compared = list(comparisons) + [None] * (len(breakdowns) - len(comparisons))
    # A bare transcript's rows (no payload at all) have the given overhead; a recorded
    # session's rows past its recording share the recorded rows' columns.
    given = all(b.overhead is not None for b in breakdowns)
    marked = {n for n in not_recorded if not given}
    last = breakdowns[-1]
    size = (
        f"{last.context_window:,} tokens"
        if window_known
        else f"none known: its place is taken by the {last.context_window:,}-token budget "
        "(max_tokens_fallback, a guess)"
    )
    console.print(
        f"[bold]Window[/]  {size}; figures are the module's estimates "
        f"(tokenizer family {last.family or 'none: conservative'}) over "
        + ("the transcript" if given else "each recorded request payload")
        + ", never scaled to the provider's figure"
    )
    provided = any(c is not None for c in compared)
    if given and provided and not last.overhead:
        console.print(
            "[yellow]The figures exclude what the log does not hold[/] (system prompt, tool "
            "definitions): the provider's figure beside them counts it, and the summary's "
            "whole-request figures are built on it"
        )
    elif given and last.overhead:
        console.print(
            f"[yellow]The figures exclude what was not given:[/] the transcript holds no system "
            f"prompt, tool definitions or injections; --overhead {last.overhead:,} stands for them"
        )
    elif given:
        console.print(
            "[yellow]The figures exclude what the transcript does not hold[/] (system prompt, "
            "tool definitions, injections): give --overhead TOKENS to count them"
        )
    head = [Column("overhead")] if given else [Column("system"), Column("tools")]
    # Left out first: what the categories table below shows for the last request (notice,
    # output, free); last: the comparison with the provider, beside its figure.
    # With no provider figure at all (a bare transcript) the comparison columns would be empty.
    comparison_columns = (
        [Column("provider"), Column("gap", drop=4), Column("gap %", drop=6)] if provided else []
    )
    unlogged = any(b.unlogged for b in breakdowns)
    columns = [
        Column("req"), *head, Column("msgs"), Column("injected", drop=5),
        Column("notice", drop=1), *([Column("not in\nthe log")] if unlogged else []),
        Column("free", drop=3), Column("output", drop=2), Column("ours"), *comparison_columns,
    ]  # fmt: skip

    rows: list[list[str]] = []
    for number, b, comparison in zip(numbers, breakdowns, compared, strict=False):
        system = [f"{b.overhead or 0:,}"] if given else [f"{b.system:,}", f"{b.tools:,}"]
        label = f"{number}*" if number in marked else str(number)
        rows.append([
            label, *system, f"{b.conversation:,}", f"{b.injected:,}", f"{b.notice:,}",
            *([f"{b.unlogged:,}"] if unlogged else []), f"{b.free:,}", f"{b.max_output:,}",
            f"{b.estimated:,}", *(_gap(comparison) if provided else ()),
        ])  # fmt: skip
    title = "What the window held, per request (tokens)"
    caption = "ours: what the request held by the module's estimate (the columns before free)"
    if unlogged:
        caption = (
            "ours: what the request held by the module's estimate (the columns before free, "
            "but not in the log); not in the log: what the provider counted beyond ours, the "
            "system prompt and tools the log does not hold, never free space"
        )
    if given:
        caption += "; overhead: the --overhead given, for what the transcript lacks"
    caption += (
        "; provider: input_tokens + cache_write_tokens; gap: ours - provider"
        if provided
        else "; no provider figure was recorded to compare with"
    )
    if marked:
        caption += (
            "; *: not recorded (the replayed view with the last recorded tool definitions; "
            "injections unknown)"
        )
    console.print(fit_table(columns, rows, title=title, caption=caption))
    _render_categories(console, numbers[-1], last, recorded=numbers[-1] not in marked)
    if numbers[-1] in marked:
        console.print(f"Request {numbers[-1]} was not recorded: its injections are unknown.")
    else:
        _render_parts(console, numbers[-1], "tool definitions, per tool", last.tool_parts,
                      last.tools, "tool")  # fmt: skip
        _render_parts(console, numbers[-1], "system prompt, per part", last.system_parts,
                      last.system, "part")  # fmt: skip
        _render_injections(console, numbers[-1], last)


PARTS_SHOWN = 12
"""The most parts a breakdown lists (the rest are summed on one line; --json has them all)."""


def _render_parts(
    console: Console, number: int, what: str, parts: Sequence[Part], whole: int, header: str
) -> None:
    """One category's parts, largest first, each with its share of the category."""
    if len(parts) < 2:  # one part is the category itself
        return

    def share(tokens: int) -> str:
        return f"{tokens / whole:.1%}" if whole else ""

    rows: list[list[Cell]] = [
        [escape(p.name), f"{p.tokens:,}", share(p.tokens)] for p in parts[:PARTS_SHOWN]
    ]
    rest = parts[PARTS_SHOWN:]
    if rest:
        rest_tokens = sum(p.tokens for p in rest)
        rows.append([Note(f"… {len(rest)} more"), f"{rest_tokens:,}", share(rest_tokens)])
    columns = [Column(header, kind="text"), Column("tokens"), Column("share", drop=1)]
    caption = f"each priced alone; together {sum(p.tokens for p in parts):,} (whole: {whole:,})"
    # The title on a line of its own: a table this narrow would wrap it to its own width.
    console.print(f"Request {number}: {what} (largest first; all in --json)")
    console.print(fit_table(columns, rows, caption=caption))


def _render_categories(
    console: Console, number: int, b: WindowBreakdown, *, recorded: bool = True
) -> None:
    title = f"Request {number}: the {b.context_window:,}-token window" + (
        "" if recorded else " (not recorded: the replayed view, the last recorded tools)"
    )
    rows = [
        [escape(label), f"{tokens:,}", f"{tokens / b.context_window:.1%}"]
        for label, tokens in b.categories()
    ]
    if b.over:
        rows.append(["[red]over the window by[/]", f"{b.over:,}", ""])
    columns = [Column("category", kind="text"), Column("tokens"), Column("share")]
    caption = (
        "overhead (given): the --overhead stated for what the transcript lacks (system prompt, "
        "tool definitions, injections)"
        if b.overhead is not None
        else None
    )
    console.print(fit_table(columns, rows, title=title, caption=caption))


def _render_injections(console: Console, number: int, b: WindowBreakdown) -> None:
    if not b.injections:
        console.print(f"No ephemeral injection in request {number}.")
        return
    columns = [Column("msg"), Column("block"), Column("after #"), Column("tokens"),
               Column("first line", kind="preview")]  # fmt: skip
    rows = [
        [str(i.message_index), "whole" if i.block_index is None else str(i.block_index),
         "" if i.position is None else str(i.position), f"{i.tokens:,}", escape(i.first_line)]
        for i in b.injections
    ]  # fmt: skip
    title = f"Request {number}: ephemeral injections (in the payload, not in the transcript)"
    caption = "after #: the transcript position it was appended to (blank: own message)"
    console.print(fit_table(columns, rows, title=title, caption=caption))


def _reach(request: CacheRequest) -> str:
    if request.read_reach is None:
        return "nothing"
    if request.read_reach == 0:
        return "sys+tools"
    return f"+{request.read_reach} msgs"


def _where(d: Difference | None) -> str:
    if d is None:
        return "none"
    if d.part != "messages":
        return f"{d.part} {d.index}"
    return f"msg {d.index}" + ("" if d.block_index is None else f".{d.block_index}")


def render_cache(console: Console, report: CacheReport, *, only_breaks: bool = False) -> None:
    """The headline (share from cache, breaks by cause) and one row per request (or per
    cache break, with ``only_breaks``)."""
    if not report.requests:
        console.print("No recorded request: no cache report.")
        return
    share = report.share
    causes = ", ".join(f"{n} {cause}" for cause, n in report.causes().items())
    console.print(
        f"[bold]Cache[/]   {report.read:,} of {report.occupancy:,} input tokens served from "
        f"cache ({'n/a' if share is None else f'{share:.1%}'}); {report.breaks} cache "
        f"break(s)" + (f": {causes}" if causes else "")
    )
    later = [r for r in report.requests[1:] if r.cache_read]
    if later and all(r.read_reach == 0 for r in later):
        console.print(
            "No message token was served from the cache: every read covered tools and system only."
        )
    columns = [
        Column("req"), Column("read"), Column("wrote"), Column("occupancy", drop=2),
        Column("cached", drop=1), Column("covers", kind="word", drop=3),
        Column("differs at", kind="word"), Column("hist"), Column("cause", kind="text"),
    ]  # fmt: skip
    rows: list[list[str]] = []
    first = report.requests[0].number
    for r in report.requests:
        if only_breaks and not r.is_break:
            continue
        d = r.difference
        cached = r.cache_read / r.occupancy if r.occupancy and r.cache_read else 0.0
        rows.append([
            str(r.number), f"{r.cache_read or 0:,}", f"{r.cache_write or 0:,}",
            "" if r.occupancy is None else f"{r.occupancy:,}", f"{cached:.0%}", _reach(r),
            "(first)" if r.number == first else _where(d),
            "" if d is None or d.position is None else str(d.position),
            "" if d is None else escape(d.cause),
        ])  # fmt: skip
    for r in () if only_breaks else report.sub_agents:
        cached = r.cache_read / r.occupancy if r.occupancy and r.cache_read else 0.0
        rows.append([
            f"s{r.number}", f"{r.cache_read or 0:,}", f"{r.cache_write or 0:,}",
            "" if r.occupancy is None else f"{r.occupancy:,}", f"{cached:.0%}", _reach(r),
            "(sub-agent)", "", "",
        ])  # fmt: skip
    title = "Cache reuse, per request (tokens)"
    caption = (
        "occupancy: the prompt as the provider counted it (input + cache writes); covers: what "
        "the read served; differs at: where a request stops matching the one before (msg M.B: "
        "the payload's message M, its content block B, both 0-based; none: it extends it); "
        "hist: transcript position"
    ) + (
        "; sN: a sub-agent's request N (another conversation: in the totals, never a break)"
        if report.sub_agents
        else ""
    )
    console.print(fit_table(columns, rows, title=title, caption=caption))
    for cause in report.causes():
        console.print(f"[dim]{escape(cause)}: {escape(CAUSE_MEANINGS.get(cause, cause))}[/]")
