"""Issue 27's sessions in a real kernel: where do the prefix breaks land?

Each row is one ``AmplifierSession`` (the Rust kernel from PyPI, the real ``HookRegistry``)
with this package in its default configuration, the scripted provider answering every tool
round with a signed thinking block (as a thinking model does), ~30,000 tokens of tool
definitions and 20 prompts. Two orchestrator shapes: the basic loop's plain
``get_messages_for_request`` with 2 tool rounds a prompt, and the retaining request
(``context.request_retention``) with 4 rounds a prompt.

A *prefix break* is a request whose view does not start with the whole previous view: the
provider writes the rest into its cache again, and a model whose thinking is bound to its
prompt drops every thinking block after the edit. A break *at a turn start* is one made by the
request right after a prompt (only finished turns' reasoning is lost); any other break is
inside a tool loop (the active turn loses its own).

Print the table, today's rule beside the turn-start rule switched off (from the repo root)::

    uv run python -m tests.e2e.timing_rows
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amplifier_core import AmplifierSession, HookResult

from .budget_rows import SYSTEM_PROMPT, TOOL_DEFINITION_TOKENS, Row, prompt
from .sources import LocalSourceResolver


@dataclass(frozen=True)
class Shape:
    """One orchestrator shape of issue 27's table."""

    id: str
    rounds: int
    request_path: str
    prompts: int = 20

    def row(self) -> Row:
        return Row(self.id, 128_000, 8_000, "defaults", TOOL_DEFINITION_TOKENS, self.prompts)


SHAPES: tuple[Shape, ...] = (
    Shape("basic-2-rounds", 2, "plain"),
    Shape("retaining-4-rounds", 4, "retaining"),
)


@dataclass
class TimingResult:
    """Where one session's prefix breaks landed."""

    shape: Shape
    context_config: dict[str, Any]
    completed: int = 0
    requests: int = 0
    compactions: int = 0
    breaks_at_turn_start: int = 0
    breaks_in_loop: int = 0
    prefix_share: float = 0.0
    """Of all view messages sent, the share that repeated the previous view's prefix."""
    refusals: int = 0
    reasons: tuple[str, ...] = ()
    error: BaseException | None = None

    @property
    def breaks(self) -> int:
        return self.breaks_at_turn_start + self.breaks_in_loop

    @property
    def turn_start_share(self) -> float:
        return self.breaks_at_turn_start / self.breaks if self.breaks else 1.0


def _dump(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, default=str)


def _ends_with_prompt(history: Sequence[Mapping[str, Any]]) -> bool:
    last = history[-1] if history else None
    if last is None or last.get("role") != "user":
        return False
    metadata = last.get("metadata")
    return not (isinstance(metadata, Mapping) and metadata.get("source") is not None)


def tally(result: TimingResult, records: Sequence[Any]) -> None:
    """Count the prefix breaks of ``records`` (the loop's per-request views and histories)."""
    previous: list[str] = []
    kept = sent = 0
    for record in records:
        view = [_dump(m) for m in record.view]
        sent += len(view)
        if previous and view[: len(previous)] != previous:
            if _ends_with_prompt(record.history):
                result.breaks_at_turn_start += 1
            else:
                result.breaks_in_loop += 1
        elif previous:
            kept += len(previous)
        previous = view
    result.prefix_share = kept / sent if sent else 0.0


async def run_shape(shape: Shape, context_config: Mapping[str, Any] | None = None) -> TimingResult:
    """Run one shape's session; an exception out of a prompt ends it (recorded)."""
    config = dict(context_config or {})
    result = TimingResult(shape=shape, context_config=config)
    row = shape.row()
    plan = row.plan(config)
    plan["providers"][0]["config"]["turns_per_prompt"] = shape.rounds
    plan["session"]["orchestrator"]["config"]["request_path"] = shape.request_path
    session = AmplifierSession(plan)
    await session.coordinator.mount("module-source-resolver", LocalSourceResolver())
    reasons: list[str] = []

    async def on_compaction(event: str, data: dict[str, Any]) -> HookResult:
        reasons.append(str(data.get("reason")))
        return HookResult(action="continue")

    session.coordinator.hooks.register("context:compaction", on_compaction, name="timing-rows")
    try:
        await session.initialize()
        coordinator = session.coordinator
        await coordinator.get("context").set_system_prompt_factory(lambda: SYSTEM_PROMPT)
        try:
            for number in range(1, shape.prompts + 1):
                await session.execute(prompt(number))
                result.completed = number
        except Exception as exc:  # the row's verdict, reported rather than raised
            result.error = exc
        provider = coordinator.get("providers")["scripted"]
        result.requests = len(provider.exchanges)
        result.refusals = len(provider.rejections)
        tally(result, coordinator.get("orchestrator").requests)
    finally:
        await session.cleanup()
    result.compactions = len(reasons)
    result.reasons = tuple(reasons)
    return result


def table(results: Sequence[TimingResult]) -> str:
    lines = [
        "| shape | config | prompts | requests | compactions | breaks at turn start "
        "| breaks in a loop | prefix share |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.shape.id} | {json.dumps(r.context_config)} | {r.completed} / "
            f"{r.shape.prompts} | {r.requests} | {r.compactions} | {r.breaks_at_turn_start} "
            f"| {r.breaks_in_loop} | {r.prefix_share:.1%} |"
        )
    return "\n".join(lines)


async def run_all() -> list[TimingResult]:
    results: list[TimingResult] = []
    for shape in SHAPES:
        for config in ({"escalate_at_turn_start": False}, {}):
            results.append(await run_shape(shape, config))
    return results


def main() -> int:
    logging.basicConfig(level=logging.ERROR)
    results = asyncio.run(run_all())
    print(table(results))
    return 0 if all(r.error is None and not r.refusals for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
