"""The tables of what the views dropped, what a provider would refuse, and a sweep's rows.

Numbers and headers never wrap or get cut (``no_wrap``); text columns (tool, first line) give
way with an ellipsis, and optional columns are dropped on a narrow console.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import estimate_message_tokens
from .drops import LEFT, Drop, PositionIndex, call_text, first_line
from .records import not_recorded_check_text
from .refusals import STORM_MIN, STREAK_MIN, RefusalReport
from .report import ReplayReport
from .sweep import SHARE_OF_WINDOW, SWEPT_KEYS, SweepRow

__all__ = [
    "DROP_ROWS",
    "LEFT_OUT_ROWS",
    "REFUSED_ROWS",
    "render_drops",
    "render_left_out",
    "render_refusals",
    "render_sweep",
    "render_why",
]

DROP_ROWS = 5
"""Rows shown per request in the drops table (the largest first); ``--json`` has them all."""
LEFT_OUT_ROWS = 20
REFUSED_ROWS = 10
_TEXT_SHARE = 24
"""The most a text column other than the last one (the call: tool and argument) takes."""
_NARROW = 100
"""Below this width the optional columns go."""


class _Grid:
    """A table whose fixed columns (numbers, short words) are as wide as their widest cell, so
    Rich never cuts them; only the flexible text columns give way, with an ellipsis."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.columns: list[tuple[str, bool, bool, bool]] = []  # header, fixed, right, wraps
        self.rows: list[tuple[list[str], bool]] = []  # (cells, ends a section)
        self.caption: str | None = None

    def number(self, name: str) -> None:
        self.columns.append((name, True, True, False))

    def word(self, name: str) -> None:
        self.columns.append((name, True, False, False))

    def text(self, name: str, *, wraps: bool = False) -> None:
        self.columns.append((name, False, False, wraps))

    def add(self, *cells: str) -> None:
        self.rows.append((list(cells), False))

    def end_section(self) -> None:
        if self.rows:
            self.rows[-1] = (self.rows[-1][0], True)

    def table(self, width: int) -> Table:
        """The Rich table for a console ``width`` wide: the text columns get what the fixed
        ones leave (Rich, left to itself, squeezes short number columns to nothing)."""
        table = Table(title=self.title, title_justify="left", box=box.SIMPLE_HEAD)
        table.caption = self.caption
        natural = [
            max([*map(cell_len, name.split("\n")), *(cell_len(cells[i]) for cells, _ in self.rows)])
            for i, (name, *_) in enumerate(self.columns)
        ]
        fixed = sum(
            w for w, (_, is_fixed, *_) in zip(natural, self.columns, strict=True) if is_fixed
        )
        room = width - fixed - 3 * len(self.columns) - 1  # padding and separators
        texts = [i for i, (_, is_fixed, *_) in enumerate(self.columns) if not is_fixed]
        shares: dict[int, int] = {}
        for i in texts[:-1]:  # the earlier text columns (a tool name) take a modest share
            shares[i] = max(4, min(natural[i], _TEXT_SHARE, room // len(texts)))
            room -= shares[i]
        if texts:
            shares[texts[-1]] = max(4, min(natural[texts[-1]], room))
        for i, (name, is_fixed, right, wraps) in enumerate(self.columns):
            if is_fixed:
                table.add_column(
                    name, justify="right" if right else "left", no_wrap=True,
                    min_width=natural[i],
                )  # fmt: skip
            else:
                table.add_column(
                    name, no_wrap=not wraps, overflow="fold" if wraps else "ellipsis",
                    max_width=shares[i],
                )  # fmt: skip
        for cells, section in self.rows:
            table.add_row(*cells, end_section=section)
        return table


def _tokens(d: Drop) -> str:
    return f"{d.tokens_before:,} → {d.tokens_after:,}"


def render_drops(console: Console, report: ReplayReport) -> None:
    """Per request that changed the history's place in the view: the largest changes."""
    if not report.drops:
        return
    by_request: dict[int, list[Drop]] = {}
    for d in report.drops:
        by_request.setdefault(d.request, []).append(d)
    wide = console.width >= _NARROW
    grid = _Grid("What each compaction dropped (largest first; all in --json)")
    grid.number("req")
    grid.number("pos")
    if wide:  # narrow: the tokens say it ("→ 0": left out) and the role tells a stub
        grid.word("change")
    grid.word("role")
    grid.text("call")
    grid.number("tokens")
    if wide:
        grid.number("level")
    grid.text("first line")
    for request, drops in by_request.items():
        shown = sorted(drops, key=lambda d: (-d.tokens_before, d.position))[:DROP_ROWS]
        for i, d in enumerate(shown):
            change, level = ([d.change], [str(d.level)]) if wide else ([], [])
            mark = "" if d.compacted else "°"  # left out with no compaction at the request
            grid.add(
                f"{request}{mark}" if i == 0 else "", str(d.position), *change, d.role,
                escape(call_text(d.tool, d.call_argument)), _tokens(d), *level,
                escape(d.first_line),
            )  # fmt: skip
        if len(drops) > len(shown):
            filler = [""] * (len(grid.columns) - 1)
            filler[-1] = f"… {len(drops) - len(shown)} more ({_counts(drops)})"
            grid.add("", *filler)
        grid.end_section()
    if any(not d.compacted for d in report.drops):
        grid.caption = "° no compaction at that request: a pairing repair left the message out"
    console.print(grid.table(console.width))


def _counts(drops: Sequence[Drop]) -> str:
    found: dict[str, int] = {}
    for d in drops:
        found[d.change] = found.get(d.change, 0) + 1
    return ", ".join(f"{n} {change}" for change, n in found.items())


def render_refusals(console: Console, refusals: RefusalReport) -> None:
    """The headline: views a provider would refuse, streaks, storms, repairs."""
    n = refusals.requests
    if refusals.context_window is None:
        window = "no window known, so views above it are not judged (see --context-window)"
    else:
        window = (
            f"judged against the {refusals.context_window:,}-token window with "
            f"{refusals.max_output_tokens or 0:,} output tokens requested"
        )
    verdict = (
        f"[red]{refusals.refused_views:,} of {n:,} views[/] ({refusals.above_window:,} above "
        f"the window, {refusals.invalid:,} invalid)"
        if refusals.refused_views
        else f"none of {n:,} views"
    )
    console.print(f"[bold]Refused by a provider[/] {verdict}; {window}")
    unjudged = not_recorded_check_text(refusals.not_recorded, n)
    if unjudged is not None:
        console.print(f"[yellow]Not judged whole[/]: {escape(unjudged)}")
    streak, storm = refusals.longest_over_budget, refusals.longest_compaction_run
    console.print(
        "[bold]Over-budget streak[/] "
        + (
            f"[yellow]{streak.length} consecutive requests ({streak.first_request}-"
            f"{streak.last_request})[/]"
            if refusals.over_budget_streak
            else f"none (longest run {streak.length}; a streak is {STREAK_MIN}+)"
        )
        + "; [bold]compaction storm[/] "
        + (
            f"[yellow]{storm.length} consecutive compacting requests ({storm.first_request}-"
            f"{storm.last_request})[/]"
            if refusals.storm
            else f"none (longest run {storm.length}; a storm is {STORM_MIN}+)"
        )
    )
    if refusals.repairs:
        parts = [
            f"{kind} in {c.views:,} view(s), {c.distinct:,} distinct"
            for kind, c in refusals.repairs.items()
        ]
        console.print(f"[bold]Repairs the views needed[/] {escape('; '.join(parts))}")
    else:
        console.print("[bold]Repairs the views needed[/] none")
    if refusals.refused:
        grid = _Grid("Refused views (all in --json)")
        grid.number("request")
        grid.text("why", wraps=True)
        for verdict_row in refusals.refused[:REFUSED_ROWS]:
            grid.add(str(verdict_row.request), escape("; ".join(verdict_row.reasons)))
        if len(refusals.refused) > REFUSED_ROWS:
            grid.add("", f"… {len(refusals.refused) - REFUSED_ROWS} more")
        console.print(grid.table(console.width))


def render_left_out(
    console: Console,
    history: Sequence[Mapping[str, Any]],
    left_out: Sequence[int],
    drops: Sequence[Drop],
    *,
    family: str | None,
) -> None:
    """What a view left out, message by message, with the request each one left at."""
    if not left_out:
        return
    index = PositionIndex()
    index.sync(history)
    left_at = {d.position: d for d in drops if d.change == LEFT}
    wide = console.width >= _NARROW
    grid = _Grid(f"What this view left out ({len(left_out):,} messages)")
    grid.number("pos")
    grid.word("role")
    grid.text("call")
    grid.number("tokens")
    grid.number("left at")
    if wide:
        grid.number("level")
    grid.text("first line")
    for position in left_out[:LEFT_OUT_ROWS]:
        message = history[position]
        d = left_at.get(position)
        level = [str(d.level) if d else ""] if wide else []
        grid.add(
            str(position), str(message.get("role", "")),
            escape(call_text(index.tool(message), index.call_argument(message))),
            f"{estimate_message_tokens(message, family=family):,}",
            f"req {d.request}" if d else "", *level, escape(first_line(message)),
        )  # fmt: skip
    if len(left_out) > LEFT_OUT_ROWS:
        filler = [""] * (len(grid.columns) - 1)
        filler[-1] = f"… {len(left_out) - LEFT_OUT_ROWS} more (replay --json lists every drop)"
        grid.add("", *filler)
    console.print(grid.table(console.width))


def render_why(console: Console, position: int, lines: Sequence[str]) -> None:
    console.print(f"[bold]Message {position}[/] " + escape(lines[0]))
    for line in lines[1:]:
        console.print("  " + escape(line))


def render_sweep(console: Console, rows: Sequence[SweepRow]) -> None:
    if not rows:
        return
    keys = list(rows[0].setting)
    share = "window" if rows[0].share_of == SHARE_OF_WINDOW else "budget"
    grid = _Grid(f"Sweep: {len(rows)} setting(s), one replay each")
    for key in keys:  # headers on two lines: three swept keys still fit 80 columns
        grid.number(SWEPT_KEYS[key][0].removeprefix("--").replace("-", "\n", 1))
    wide = console.width >= _NARROW
    if wide:
        for name in ("priced\ninput", "at the\nmarkers", "kept\nmean", "kept\nmin"):
            grid.number(name)
    for name in ("compactions", "cache\nbreaks", f"peak of\n{share}", "refused"):
        grid.number(name)
    if wide:
        grid.number("budget")
    for r in sorted(rows, key=lambda row: row.priced_input_tokens):
        cost = [
            f"{r.priced_input_tokens:,.0f}", f"{r.priced_at_markers:,.0f}",
            f"{r.kept_mean:.1%}", f"{r.kept_min:.1%}",
        ] if wide else []  # fmt: skip
        budget = [f"{r.budget:,}"] if wide else []
        grid.add(
            *(_value(r.setting[k]) for k in keys), *cost, f"{r.compactions:,}",
            f"{r.cache_breaks:,}", f"{r.peak_share:.1%}", f"{r.refused_views:,}", *budget,
        )  # fmt: skip
    grid.caption = (
        "cheapest first. priced input: base-price tokens through a simulated 5-minute cache "
        "(requests a minute apart), every message cached / only at the provider's markers; "
        "kept: share of the history's tokens a view sent; cache breaks: views whose prefix is "
        f"not the previous view's; peak: largest view plus overhead over the {share}; refused: "
        "views a provider would refuse"
    )
    if not wide:
        grid.caption += (
            "; not shown at this width: priced input, at the markers, kept mean, kept min, "
            "budget (see --json, or a wider COLUMNS)"
        )
    console.print(grid.table(console.width))


def _value(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)
