"""Issue 20's rows in a real kernel session: does the default configuration survive real tools?

Each row is one ``AmplifierSession`` (the Rust kernel from PyPI, the real ``HookRegistry``)
with this package in its default configuration (``context_config={}``), the ``loop-e2e``
orchestrator standing in for the published ``loop-basic`` (not on PyPI), the scripted provider
counting what a real API counts (messages, framing and, with the bulky tool mounted, ~30,000
tokens of tool definitions; refusing ``input + max_tokens > window`` with the model's whole
max output as ``max_tokens``) and, in one row, a ~2,000-token request-only hook injection.

Each prompt: a user prompt, two rounds of two parallel ``echo`` calls with 4,000-12,000-
character results, a final answer of a few hundred tokens.

Print the table (from the repo root)::

    uv run python -m tests.e2e.budget_rows
    uv run python -m tests.e2e.budget_rows --row 64k-4k-tools \\
        --context-config '{"token_meter": "actual"}'

It exits 1 when any row failed a prompt or had a request refused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from amplifier_core import AmplifierSession, HookResult

from amplifier_module_context_simple import check_view

from .sources import LocalSourceResolver, mount_plan

SIZES = (4_000, 7_000, 12_000, 5_000, 4_000, 9_000, 6_000, 4_000)
"""Tool-result sizes in characters, cycled call after call (mean 6,375)."""
CALLS_PER_ROUND = 2
ROUNDS_PER_PROMPT = 2
ANSWER_CHARS = 1_200
TOOL_DEFINITION_TOKENS = 30_000
INJECTION_CHARS = 6_400
"""About 2,000 tokens by the package's estimator (the largest family)."""
SYSTEM_PROMPT = "You are a careful build agent. Use the echo tool to run each step."


@dataclass(frozen=True)
class Row:
    """One configuration of issue 20's table."""

    id: str
    context_window: int
    max_output_tokens: int
    publish: str
    tool_definition_tokens: int
    prompts: int
    injection_chars: int = 0
    issue: str = ""
    """What issue 20 reports for this row today."""

    def provider_config(self) -> dict[str, Any]:
        return {
            "model": "scripted-1",
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "publish": self.publish,
            "count_tool_definitions": True,
            "tool_token_family": "claude47",
            "turns_per_prompt": ROUNDS_PER_PROMPT,
            "calls_per_round": CALLS_PER_ROUND,
            "sizes": list(SIZES),
            "answer_chars": ANSWER_CHARS,
        }

    def plan(self, context_config: Mapping[str, Any]) -> dict[str, Any]:
        return mount_plan(
            context_config=dict(context_config),
            provider_config=self.provider_config(),
            bulky_tool_config=(
                {"definition_tokens": self.tool_definition_tokens}
                if self.tool_definition_tokens
                else None
            ),
            orchestrator_config={"injection_chars": self.injection_chars},
        )


ROWS: tuple[Row, ...] = (
    Row("200k-64k-no-tools", 200_000, 64_000, "model_info", 0, 30, issue="turn 10 of 30"),
    Row(
        "200k-64k-tools", 200_000, 64_000, "model_info", TOOL_DEFINITION_TOKENS, 30, issue="turn 8"
    ),
    Row("128k-8k-tools", 128_000, 8_000, "defaults", TOOL_DEFINITION_TOKENS, 20, issue="turn 9"),
    Row("64k-4k-tools", 64_000, 4_000, "defaults", TOOL_DEFINITION_TOKENS, 20, issue="turn 6"),
)
"""Issue 20's four rows."""
INJECTION_ROW = Row(
    "64k-4k-tools-injection",
    64_000,
    4_000,
    "defaults",
    TOOL_DEFINITION_TOKENS,
    20,
    injection_chars=INJECTION_CHARS,
    issue="(not in the issue)",
)
ALL_ROWS: tuple[Row, ...] = (*ROWS, INJECTION_ROW)


def prompt(number: int) -> str:
    """The ``number``-th user prompt (1-based); each differs, so the script starts afresh."""
    return f"Prompt {number}: build part {number} of the release, test it and report."


@dataclass
class RowResult:
    """What one row's session did."""

    row: Row
    completed: int = 0
    compactions: list[int] = field(default_factory=list)
    """The prompt number (1-based) each ``context:compaction`` happened in."""
    budgets: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    peak_request: int = 0
    """The largest accepted request as the provider checks it: input + max_tokens."""
    peak_input: int = 0
    tool_tokens: int = 0
    """The tool definitions in the last accepted request, as the provider counted them."""
    refusals: list[str] = field(default_factory=list)
    view_problems: list[str] = field(default_factory=list)
    error: BaseException | None = None
    seconds: float = 0.0

    @property
    def peak_ratio(self) -> float:
        return self.peak_request / self.row.context_window

    @property
    def first_refusal(self) -> str:
        return self.refusals[0] if self.refusals else ""


async def run_row(row: Row, context_config: Mapping[str, Any] | None = None) -> RowResult:
    """Run ``row`` in a real kernel session; exceptions out of a prompt end it (recorded)."""
    started = time.perf_counter()
    result = RowResult(row=row)
    session = AmplifierSession(row.plan(context_config or {}))
    await session.coordinator.mount("module-source-resolver", LocalSourceResolver())

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        result.compactions.append(result.completed + 1)
        return HookResult(action="continue")

    async def on_budget(event: str, data: dict[str, Any]) -> HookResult:
        result.budgets.append(dict(data))
        return HookResult(action="continue")

    hooks = session.coordinator.hooks
    hooks.register("context:compaction", on_compaction, name="budget-rows-compaction")
    hooks.register("context:budget", on_budget, name="budget-rows-budget")
    try:
        await session.initialize()
        coordinator = session.coordinator
        context = coordinator.get("context")
        provider = coordinator.get("providers")["scripted"]
        orchestrator = coordinator.get("orchestrator")
        await context.set_system_prompt_factory(lambda: SYSTEM_PROMPT)
        try:
            for number in range(1, row.prompts + 1):
                await session.execute(prompt(number))
                result.completed = number
        except Exception as exc:  # the row's verdict, reported rather than raised
            result.error = exc
        exchanges = provider.exchanges
        result.requests = len(exchanges)
        if exchanges:
            result.peak_request = max(x.request_size for x in exchanges)
            result.peak_input = max(x.input_total for x in exchanges)
            result.tool_tokens = exchanges[-1].tool_tokens
        result.refusals = list(provider.rejections)
        for number, record in enumerate(orchestrator.requests):
            for problem in check_view(record.view, history=record.history):
                result.view_problems.append(f"request {number}: {problem}")
    finally:
        await session.cleanup()
        result.seconds = time.perf_counter() - started
    return result


def table(results: Sequence[RowResult]) -> str:
    """The per-row table: prompts completed, compactions, peak request / window, refusal."""
    header = (
        "| row | prompts completed | compactions (first in prompt) | peak request / window "
        "| budget | requests | seconds | first refusal |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for r in results:
        budget = r.budgets[-1].get("effective_budget") if r.budgets else None
        budget_text = f"{budget:,}" if isinstance(budget, int) else "?"
        first = f" ({r.compactions[0]})" if r.compactions else ""
        error = r.first_refusal or (str(r.error) if r.error is not None else "")
        lines.append(
            f"| {r.row.id} | {r.completed} / {r.row.prompts} | {len(r.compactions)}{first} "
            f"| {r.peak_request:,} / {r.row.context_window:,} ({r.peak_ratio:.1%}) "
            f"| {budget_text} | {r.requests} | {r.seconds:.1f} | {error} |"
        )
    return "\n".join(lines)


async def run_rows(
    rows: Sequence[Row], context_config: Mapping[str, Any] | None = None
) -> list[RowResult]:
    return [await run_row(row, context_config) for row in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.e2e.budget_rows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--row",
        action="append",
        choices=[row.id for row in ALL_ROWS],
        help="run only this row (repeatable; default: all)",
    )
    parser.add_argument(
        "--context-config", default="{}", help="the context module's mount config, as JSON"
    )
    parser.add_argument("--verbose", action="store_true", help="show the module's warnings")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.ERROR)
    config = json.loads(args.context_config)
    rows = [row for row in ALL_ROWS if not args.row or row.id in args.row]
    results = asyncio.run(run_rows(rows, config))
    print(f"context config: {json.dumps(config)}")
    print(table(results))
    for r in results:
        if r.view_problems:
            print(f"{r.row.id}: check_view problems: {r.view_problems[:3]}")
    return 0 if all(r.error is None and not r.refusals for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
