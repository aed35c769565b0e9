"""Rich tables for what the window held (:mod:`.payload`) and for cache reuse (:mod:`.cache_reuse`).

Both fit the console's width: numbers and headers are never cut (numeric columns do not wrap);
the optional columns are dropped, in a fixed order, until the table fits, and text columns
wrap or end in an ellipsis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .cache_reuse import CacheReport, CacheRequest, Difference
from .payload import UsageComparison, WindowBreakdown
from .space_parts import Part

__all__ = ["render_cache", "render_window"]


@dataclass(frozen=True)
class _Column:
    header: str
    optional: int
    """0: always shown; otherwise the higher, the earlier it is dropped."""
    numeric: bool = True


def _width(column: _Column, cells: Sequence[str], *, natural: bool) -> int:
    """The column's width: its longest cell, or for a text column that may wrap its longest
    word (``natural`` False)."""
    texts = [column.header, *cells]
    if column.numeric or natural:
        return max(len(t) for t in texts)
    return max(len(word) for t in texts for word in t.split() or [""])


def _fitted(
    console: Console, title: str, caption: str, columns: Sequence[_Column], rows: list[list[str]]
) -> Table:
    """The table with the most columns that fit the console (optional ones dropped first)."""
    cells = [[row[i] for row in rows] for i in range(len(columns))]
    natural = [_width(c, cells[i], natural=True) for i, c in enumerate(columns)]
    widths = [_width(c, cells[i], natural=False) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    for level in sorted({c.optional for c in columns if c.optional}, reverse=True):
        # Each column has one space of padding on either side, and the box one between;
        # optional columns go before any text has to wrap.
        if sum(natural[i] + 3 for i in shown) + 1 <= console.width:
            break
        shown = [i for i in shown if columns[i].optional != level]
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, caption=caption)
    for i in shown:
        if columns[i].numeric:
            table.add_column(columns[i].header, justify="right", no_wrap=True, min_width=widths[i])
        else:
            table.add_column(columns[i].header, overflow="fold", min_width=widths[i])
    for row in rows:
        table.add_row(*(escape(row[i]) for i in shown))
    return table


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
) -> None:
    """Per request: the window by category, ours beside the provider's; then the last one.

    ``not_recorded``: the request numbers of a recorded session that have no payload (marked
    ``*``; meaningful only beside recorded ones, whose columns they share)."""
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
    console.print(
        f"[bold]Window[/]  {last.context_window:,} tokens; figures are the module's estimates "
        f"(tokenizer family {last.family or 'none: conservative'}) over "
        + ("the transcript" if given else "each recorded request payload")
        + ", never scaled to the provider's figure"
    )
    if given and last.overhead:
        console.print(
            f"[yellow]The figures exclude what was not given:[/] the transcript holds no system "
            f"prompt, tool definitions or injections; --overhead {last.overhead:,} stands for them"
        )
    elif given:
        console.print(
            "[yellow]The figures exclude what the transcript does not hold[/] (system prompt, "
            "tool definitions, injections): give --overhead TOKENS to count them"
        )
    head = [_Column("overhead", 0)] if given else [_Column("system", 0), _Column("tools", 0)]
    columns = [
        _Column("req", 0), *head, _Column("msgs", 0), _Column("injected", 0),
        _Column("notice", 5), _Column("free", 3), _Column("output", 4), _Column("ours", 0),
        _Column("provider", 0), _Column("gap", 1), _Column("gap %", 0),
    ]  # fmt: skip

    rows: list[list[str]] = []
    for number, b, comparison in zip(numbers, breakdowns, compared, strict=False):
        system = [f"{b.overhead or 0:,}"] if given else [f"{b.system:,}", f"{b.tools:,}"]
        label = f"{number}*" if number in marked else str(number)
        rows.append([
            label, *system, f"{b.conversation:,}", f"{b.injected:,}", f"{b.notice:,}",
            f"{b.free:,}", f"{b.max_output:,}", f"{b.used:,}", *_gap(comparison),
        ])  # fmt: skip
    title = "What the window held, per request (tokens)"
    caption = "provider: input_tokens + cache_write_tokens; gap: ours - provider"
    if marked:
        caption += (
            "; *: not recorded (the replayed view with the last recorded tool definitions; "
            "injections unknown)"
        )
    console.print(_fitted(console, title, caption, columns, rows))
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
    shown = parts[:PARTS_SHOWN]
    rows = [[p.name, f"{p.tokens:,}", f"{p.tokens / whole:.1%}" if whole else ""] for p in shown]
    rest = parts[PARTS_SHOWN:]
    if rest:
        rest_tokens = sum(p.tokens for p in rest)
        share = f"{rest_tokens / whole:.1%}" if whole else ""
        rows.append([f"… {len(rest)} more", f"{rest_tokens:,}", share])
    columns = [_Column(header, 0, numeric=False), _Column("tokens", 0), _Column("share", 1)]
    caption = f"each priced alone; together {sum(p.tokens for p in parts):,} (whole: {whole:,})"
    # The title on its own line: a table as narrow as this one would wrap it.
    console.print(f"[italic]Request {number}: {what} (largest first; all in --json)[/]")
    console.print(_fitted(console, "", caption, columns, rows))


def _render_categories(
    console: Console, number: int, b: WindowBreakdown, *, recorded: bool = True
) -> None:
    table = Table(
        title=f"Request {number}: the {b.context_window:,}-token window"
        + ("" if recorded else " (not recorded: the replayed view, the last recorded tools)"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("category", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    for label, tokens in b.categories():
        table.add_row(label, f"{tokens:,}", f"{tokens / b.context_window:.1%}")
    if b.over:
        table.add_row("[red]over the window by[/]", f"{b.over:,}", "")
    console.print(table)


def _render_injections(console: Console, number: int, b: WindowBreakdown) -> None:
    if not b.injections:
        console.print(f"No ephemeral injection in request {number}.")
        return
    columns = [_Column("msg", 0), _Column("block", 0), _Column("after #", 0),
               _Column("tokens", 0), _Column("first line", 0, numeric=False)]  # fmt: skip
    rows = [
        [str(i.message_index), "whole" if i.block_index is None else str(i.block_index),
         "" if i.position is None else str(i.position), f"{i.tokens:,}", i.first_line]
        for i in b.injections
    ]  # fmt: skip
    # The first line is a preview: it ends in an ellipsis rather than wrap.
    room = console.width - sum(_width(c, [r[k] for r in rows], natural=True) + 3
                               for k, c in enumerate(columns[:-1])) - 4  # fmt: skip
    room = max(room, len(columns[-1].header))
    for row in rows:
        row[-1] = row[-1] if len(row[-1]) <= room else row[-1][: room - 1] + "…"
    title = f"Request {number}: ephemeral injections (in the payload, not in the transcript)"
    caption = "after #: the transcript position it was appended to (blank: own message)"
    console.print(_fitted(console, title, caption, columns, rows))


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
        _Column("req", 0), _Column("read", 0), _Column("wrote", 0), _Column("occupancy", 2),
        _Column("cached", 3), _Column("covers", 1, numeric=False),
        _Column("differs at", 0, numeric=False), _Column("hist", 0),
        _Column("cause", 0, numeric=False),
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
            "" if d is None else d.cause,
        ])  # fmt: skip
    title = "Cache reuse, per request (tokens)"
    caption = (
        "covers: what the read served; differs at: where a request stops matching the one "
        "before (msg M.B: the payload's message M, its content block B, both 0-based; none: it "
        "extends it); hist: transcript position"
    )
    console.print(_fitted(console, title, caption, columns, rows))
