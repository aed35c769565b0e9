"""Issues 27 and 35's sessions in a real kernel: where do the prefix breaks land, and what
does the turn-start rule cost?

Each row is one ``AmplifierSession`` (the Rust kernel from PyPI, the real ``HookRegistry``)
with this package in its default configuration, the scripted provider answering every tool
round with a signed thinking block (as a thinking model does) and two parallel calls, and 20
prompts. Issue 27's two orchestrator shapes (``SHAPES``, a 128,000 / 8,000 window with ~30,000
tokens of tool definitions and 4,000-12,000-character results): the basic loop's plain
``get_messages_for_request`` with 2 tool rounds a prompt, and the retaining request
(``context.request_retention``) with 4 rounds a prompt. Issue 35's four sessions
(``SESSIONS``): a 12,000 / 2,000 window with 1,500-character results and no tool definitions,
and a 128,000 / 8,000 window with ~30,000 tokens of them and 16,000-character results, each
with 2 and 4 rounds a prompt, each through the plain request (``loop-basic``) and the
retaining one (``loop-streaming``'s shape).

A *prefix break* is a request whose view does not start with the whole previous view: the
provider writes the rest into its cache again, and a model whose thinking is bound to its
prompt drops every thinking block after the edit. A break *at a turn start* is one made by the
request right after a prompt (only finished turns' reasoning is lost); any other break is
inside a tool loop (the active turn loses its own).

The *cache-prefix share* is, of all view messages sent, the share that repeated the previous
view's prefix; the *prompt-cache share* is, of all input tokens the scripted provider counted
(tool definitions included), the share its simulated prompt cache served.

Print the tables, today's rule beside the turn-start rule switched off (from the repo root)::

    uv run python -m tests.e2e.timing_rows
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from amplifier_core import AmplifierSession, HookResult

from .budget_rows import ANSWER_CHARS, SIZES, SYSTEM_PROMPT, TOOL_DEFINITION_TOKENS, Row, prompt
from .sources import LocalSourceResolver


@dataclass(frozen=True)
class Shape:
    """One session of the timing tables: the orchestrator's request path and the sizes."""

    id: str
    rounds: int
    request_path: str
    prompts: int = 20
    window: int = 128_000
    max_output: int = 8_000
    tool_tokens: int = TOOL_DEFINITION_TOKENS
    """The bulky tool's definition (0: not mounted, only the small echo tool)."""
    sizes: tuple[int, ...] = SIZES
    """Tool-result sizes in characters, cycled call after call."""
    style: str = "log"
    """The echo tool's filler (``log``, ``source`` or ``prose``)."""
    answer_chars: int | None = ANSWER_CHARS
    """A prompt's final answer (None: the scripted provider's one-line answer)."""

    def row(self) -> Row:
        return Row(
            self.id, self.window, self.max_output, "defaults", self.tool_tokens, self.prompts
        )


SHAPES: tuple[Shape, ...] = (
    Shape("basic-2-rounds", 2, "plain"),
    Shape("retaining-4-rounds", 4, "retaining"),
)
"""Issue 27's shapes."""


def _sessions() -> tuple[Shape, ...]:
    # Results as prose (about 3.3 characters a token): the build-log filler of issue 27's
    # shapes is so dense that 16,000 characters outgrow a 128k window's room in one turn.
    tight = Shape(
        "12k",
        2,
        "plain",
        window=12_000,
        max_output=2_000,
        tool_tokens=0,
        sizes=(1_500,),
        style="prose",
    )
    roomy = Shape("128k", 2, "plain", sizes=(16_000,), style="prose")
    return tuple(
        replace(size, id=f"{size.id}-{rounds}-rounds-{loop}", rounds=rounds, request_path=path)
        for size in (tight, roomy)
        for rounds in (2, 4)
        for loop, path in (("basic", "plain"), ("streaming", "retaining"))
    )


SESSIONS: tuple[Shape, ...] = _sessions()
"""Issue 35's four sessions, each through both request paths."""
OUTGROWING = Shape(
    "12k-4-rounds-dense",
    4,
    "plain",
    window=12_000,
    max_output=2_000,
    tool_tokens=0,
    sizes=(1_500,),
)
"""The tight 4-round session with build-log results (about 1.8 characters a token): a turn
outgrows the room the floor leaves, so no turn-start escalation can save a loop's one."""


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
    cache_share: float = 0.0
    """Of all input tokens the provider counted, the share its prompt cache served."""
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
    plan["providers"][0]["config"]["sizes"] = list(shape.sizes)
    plan["tools"][0]["config"] = {"style": shape.style}
    if shape.answer_chars is None:
        del plan["providers"][0]["config"]["answer_chars"]
    else:
        plan["providers"][0]["config"]["answer_chars"] = shape.answer_chars
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
        counted = sum(x.input_total for x in provider.exchanges)
        result.cache_share = (
            sum(x.cache_read for x in provider.exchanges) / counted if counted else 0.0
        )
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


RULE_OFF: dict[str, Any] = {"escalate_at_turn_start": False}


async def run_both(shape: Shape) -> tuple[TimingResult, TimingResult]:
    """``shape``'s session with the turn-start rule on (the default) and off."""
    return await run_shape(shape, {}), await run_shape(shape, RULE_OFF)


def comparison(pairs: Sequence[tuple[TimingResult, TimingResult]]) -> str:
    """Issue 35's table: the rule on against off, session by session."""
    lines = [
        "| session | rule on: compactions, breaks at a turn start | rule off | "
        "cache-prefix share on / off | prompt-cache share on / off |",
        "|---|---|---|---|---|",
    ]
    for on, off in pairs:
        lines.append(
            f"| {on.shape.id} | {on.compactions}, {on.breaks_at_turn_start} of {on.breaks} "
            f"| {off.compactions} | {on.prefix_share:.1%} / {off.prefix_share:.1%} "
            f"| {on.cache_share:.1%} / {off.cache_share:.1%} |"
        )
    return "\n".join(lines)


async def run_all() -> tuple[list[TimingResult], list[tuple[TimingResult, TimingResult]]]:
    results: list[TimingResult] = []
    for shape in SHAPES:
        for config in (RULE_OFF, {}):
            results.append(await run_shape(shape, config))
    pairs = [await run_both(shape) for shape in SESSIONS]
    return results, pairs


def main() -> int:
    logging.basicConfig(level=logging.ERROR)
    results, pairs = asyncio.run(run_all())
    print(table(results))
    print()
    print(comparison(pairs))
    every = [*results, *(run for pair in pairs for run in pair)]
    return 0 if all(r.error is None and not r.refusals for r in every) else 1


if __name__ == "__main__":
    sys.exit(main())
