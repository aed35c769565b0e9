"""Settings that make no sense for the input, said in a warning that names the setting.

A replay runs whatever it is given; these are the settings whose result a reader would take
for a finding when it is only the setting: a target at or above the trigger, a cap that leaves
every request over the budget or the view no room at all, and ``--token-meter actual`` with no
reading to meter. :func:`setting_warnings` reads them off the finished report, so each states
what the replay really did.
"""

from __future__ import annotations

import typer

from .report import ReplayReport

__all__ = ["setting_warnings", "warn_settings"]


def warn_settings(report: ReplayReport, warned: set[str]) -> None:
    """Say each of :func:`setting_warnings` on stderr, once per ``warned`` (a sweep's rows)."""
    for warning in setting_warnings(report):
        if warning not in warned:
            typer.echo(f"context-simple: warning: {warning}", err=True)
        warned.add(warning)


def setting_warnings(report: ReplayReport) -> list[str]:
    """One line per nonsensical setting of ``report``'s replay (empty: none)."""
    config = report.config
    found: list[str] = []
    if config.target_not_below_trigger:
        found.append(
            f"--target-usage {config.target_usage} is not below --compact-threshold "
            f"{config.compact_threshold}: a compaction aims for a view no smaller than the one "
            "that starts it, so it reduces next to nothing"
        )
    requests = report.requests
    budget = report.budget_event or {}
    cap = config.max_tokens
    held = int(budget.get("tool_definitions_tokens", 0)) + int(
        budget.get("learned_overhead_tokens", 0)
    )
    if requests and int(budget.get("effective_budget", 0)) <= 1:
        limit = f"--max-tokens {cap:,}" if budget.get("capped") and cap else "the window"
        found.append(
            f"{limit} leaves the messages a budget of 1 token: the {held:,} tokens of tool "
            "definitions and learned overhead it holds back take all of it"
        )
    elif requests and cap is not None and budget.get("capped"):
        smallest = min(r.request_tokens for r in requests)
        if smallest > requests[-1].request_budget:
            found.append(
                f"--max-tokens {cap:,} is below the smallest request ({smallest:,} tokens): "
                "every request is over the budget it leaves"
            )
    if config.token_meter == "actual" and not _readings_fed(report):
        found.append(
            "--token-meter actual: no provider reading reached the meter (this input records "
            "none, or none could be fed), so the trigger compared the estimates, as with "
            "'estimate'"
        )
    return found


def _readings_fed(report: ReplayReport) -> int:
    readings = report.source.get("recorded_readings") or {}
    return int(readings.get("fed", 0))
