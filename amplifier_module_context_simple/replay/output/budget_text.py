"""The report's Budget line (the view's budget and the arithmetic behind it, in words) and
the word under the Trigger line when the largest view stands above it without compacting.

The figures are the replay's ``context:budget`` payloads: the last request's, and the first's
when it differs (a reading had not yet taught the budget an overhead). What the budget held
back for tools is named as what it stood for: the recorded tool definitions, or a bare
transcript's ``--overhead`` (held back through the same path, see ``given_overhead``).
"""

from __future__ import annotations

from typing import Any

from ..engine.report import ReplayReport
from ..engine.session_analysis import BASIS_GIVEN

__all__ = ["budget_text", "trigger_note"]


def budget_text(report: ReplayReport) -> str:
    """The budget's parts with the replay's figures: the last request's, and the first's
    when it differs (a reading had not yet taught it the overhead)."""
    b = report.budget_event or {}
    text = f"{b.get('effective_budget', 0):,} tokens for the messages"
    if b.get("source") != "provider_defaults":
        text += f" ({b.get('source')}: no provider window simulated; see --context-window)"
        if b.get("capped"):
            cap = f"{b.get('max_tokens'):,} ({_source_of(report, 'max_tokens')})"
            text += f", capped by max_tokens {cap}"
        if b.get("tool_definitions_tokens") or b.get("learned_overhead_tokens"):
            text += f", less {_held_text(b, report).replace(' - ', ' and ')}"
        return text
    room = (
        f"simulated {b['context_window']:,}-token window - {b['reserved_output']:,} output "
        f"held back - {b.get('safety_margin', 0):,} margin"
    )
    if b.get("max_tokens") is not None:
        room = f"min({room}, max_tokens {b['max_tokens']:,} ({_source_of(report, 'max_tokens')}))"
    first = report.initial_budget_event or b
    text += f"{' at the last request' if first != b else ''} = {room} - {_held_text(b, report)}"
    if b.get("learned_overhead_tokens"):
        text += (
            "\n        (learned overhead: what the provider's readings counted beyond the view and "
            "the tool definitions, such as injections and message framing, learned in steps of "
            "256)"
        )
    if first != b and first.get("effective_budget") != b.get("effective_budget"):
        learned = "" if first.get("learned_overhead_tokens") else ": no reading yet"
        text += (
            f"\n        the first request's: {first.get('effective_budget', 0):,} "
            f"(the same limit - {_held_text(first, report)}{learned})"
        )
    if report.source.get("format") == "example" and not report.source.get("window_given"):
        text += "\n        (the built-in example's default window; change it with --context-window)"
    return text


def _held_text(b: dict[str, Any], report: ReplayReport) -> str:
    given = report.window_basis == BASIS_GIVEN and not report.recorded_session
    tools = "--overhead given" if given else "tool definitions"
    return (
        f"{b.get('tool_definitions_tokens', 0):,} {tools} - "
        f"{b.get('learned_overhead_tokens', 0):,} learned overhead"
    )


def _source_of(report: ReplayReport, name: str) -> str:
    """Where setting ``name`` came from (``session_settings``' labels), or "flag"."""
    for setting in report.source.get("settings", []):
        if setting.get("name") == name:
            return str(setting.get("source"))
    return "flag"


def trigger_note(report: ReplayReport) -> str | None:
    """Why the largest view not compacted at its request stands above the trigger (``None``: it
    does not). The trigger compares the view without its compaction notice (the notice reserve
    covers that), the meter's figure in ``actual`` mode, and a view with nothing left to reduce
    stays where it is."""
    records = [r for r in report.requests if not r.compacted]
    if not records:
        return None
    largest = max(records, key=lambda r: r.view_tokens)
    trigger = report.config.trigger(largest.budget)
    if largest.view_tokens < trigger:
        return None
    notices = {w.request: w.window.notice for w in report.windows}
    notice = notices.get(largest.request, 0) if largest.notice else 0
    head = (
        f"Request {largest.request}'s view ({largest.view_tokens:,} tokens) is above its trigger "
        f"({int(trigger):,}) and did not compact: "
    )
    if largest.view_tokens - notice < trigger:
        return head + (
            f"the trigger compares the view without its compaction notice ({notice:,} tokens), "
            "which the notice reserve covers"
        )
    if report.config.token_meter == "actual":
        return head + "the trigger compares the meter's figure (the last reading plus growth)"
    return head + (
        "nothing was left that the ladder may reduce (what is left is protected: see inspect "
        f"--at {largest.request})"
    )
