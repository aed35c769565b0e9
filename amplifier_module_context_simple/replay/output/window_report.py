"""The window and cache part of ``replay``'s text report: the tables of ``window_tables``,
chosen for the report's length.

Short replays (and ``--requests``) show every request; long ones show the request whose window
was fullest and, for the cache, only the requests that broke it, so the report stays readable
at thousands of requests while ``--json`` keeps every figure.
"""

from __future__ import annotations

from rich.console import Console

from ..engine.report import ReplayReport
from .window_tables import render_cache, render_window

__all__ = ["EVERY_REQUEST_UP_TO", "render_window_report"]

EVERY_REQUEST_UP_TO = 12
"""Replays with at most this many requests list each one without ``--requests``."""


def render_window_report(console: Console, report: ReplayReport, *, show_requests: bool) -> None:
    entries = report.windows
    if not entries:
        return
    every = show_requests or len(entries) <= EVERY_REQUEST_UP_TO
    shown = entries if every else [max(entries, key=lambda e: e.window.used)]
    if not every:
        console.print(
            f"[dim]The fullest window of {len(entries):,} requests (every one: --requests or "
            "--json):[/]"
        )
    render_window(
        console,
        [e.window for e in shown],
        [e.comparison for e in shown],
        numbers=[e.request for e in shown],
        not_recorded={e.request for e in shown if not e.recorded},
        window_known=report.window is not None,
    )
    if report.cache is not None:
        render_cache(console, report.cache, only_breaks=not every)
