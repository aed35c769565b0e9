"""The report's "Settings" block: each setting the replay ran with and where it came from.

Reads ``report.source``: ``settings`` (``{"name", "value", "source"}`` each), and for a session
directory the events file read, the recorded config keys ignored and how many recorded requests
were matched. Kept apart from ``output`` so the block has one owner.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from ..engine.report import ReplayReport
from ..recordings.agent_logs import AGENT_LOG_FORMATS
from .table_fit import Column, fit_table

__all__ = ["render_settings", "setting_value_text"]


def render_settings(console: Console, report: ReplayReport) -> None:
    """Print the Settings table and the session notes; nothing when there are no settings."""
    src = report.source
    settings: list[dict[str, Any]] = src.get("settings") or []
    if not settings:
        return
    rows: list[list[str]] = []
    for s in settings:
        value = setting_value_text(s["value"])
        if s["name"] == "budget":
            value = _budget_value(report, s)
        rows.append([escape(s["name"]), escape(value), escape(s["source"])])
    columns = [
        Column("setting", kind="word"),
        Column("value", kind="text"),
        Column("from", kind="word"),
    ]
    console.print(fit_table(columns, rows, title="Settings"))
    for line in _session_lines(src):
        console.print(escape(line))


def _budget_value(report: ReplayReport, entry: dict[str, Any]) -> str:
    """The request budget as the table shows it: what it covers, and the first one too when
    the replay's first request ran on another (the Budget line below breaks the last down)."""
    capped = (report.budget_event or {}).get("capped")
    parts = ["whole request"] + (["max_tokens cap"] if capped else [])
    if "first" in entry:
        parts.append(f"last request; the first: {setting_value_text(entry['first'])}")
    return f"{setting_value_text(entry['value'])} ({', '.join(parts)})"


def setting_value_text(value: object) -> str:
    """A setting's value as the table shows it: counts with separators, ``none`` for None."""
    if value is None:
        return "none"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _readings_line(readings: dict[str, Any]) -> str:
    """The recorded usage: only readings found count, and of them only those fed are fed."""
    found, fed = readings.get("found", 0), readings.get("fed", 0)
    text = f"Recorded usage: {found:,} reading(s) found, {fed:,} fed to the replay's meter"
    if found > fed:
        text += f" ({found - fed:,} not: see the note below)"
    return text


def _session_lines(src: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if src.get("events"):
        count = src.get("recorded_requests", 0)
        lines.append(f"Session events: {src['events']}, {count:,} recorded request(s)")
        resumes = src.get("resumes") or 0
        if resumes:
            lines.append(
                f"Resumed {resumes:,} time(s): each resume re-derives the decisions from the "
                "history, so its first view is the one the session would have sent"
            )
    match = src.get("recorded_match")
    if match:
        recorded = match["recorded"]
        of = f" of {recorded:,} recorded" if recorded is not None else ""
        # An agent's own log records no system prompt: its usage is all there is to feed.
        if src.get("format") not in AGENT_LOG_FORMATS:
            lines.append(f"Recorded system prompt given to {match['matched']:,}{of} request(s)")
        lines.append(_readings_line(src.get("recorded_readings") or {}))
    if src.get("ignored_config_keys"):
        keys = ", ".join(src["ignored_config_keys"])
        lines.append(f"Recorded config keys ignored (not context-simple settings): {keys}")
    lines += [f"Note: {n}" for n in src.get("session_notes") or []]
    return lines
