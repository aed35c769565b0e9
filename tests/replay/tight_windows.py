"""Issue 35's figures: the shared corpus replayed at a fixed ``token_budget``.

Every transcript of ``../shared/corpus`` goes through a manager with the default
configuration, a view asked before every recorded assistant message at one fixed budget.
Per budget, over the whole corpus:

* **in context**: of the strings the next message's calls used that earlier tool results or
  prompts held, the share the views' tool results and prompts still showed (the replay's
  ``evidence``);
* **findable**: the share they showed, or named in the notice's map of what was left out;
* **priced input**: each request's tokens (the estimate) priced through an exact-prefix cache:
  the messages it shares from the start with the request before at 0.1, the rest at 1.25.

Print the table (from the repo root)::

    uv run python -m tests.replay.tight_windows [--budgets 8000,16000,32000] [--map-share S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.replay.findings.evidence import EvidenceTracker

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
BUDGETS = (8_000, 16_000, 32_000)
READ_PRICE = 0.1
WRITE_PRICE = 1.25


@dataclass
class Figures:
    """One budget's figures over the corpus."""

    budget: int
    used: int = 0
    kept: int = 0
    findable: int = 0
    priced_input: float = 0.0
    requests: int = 0

    @property
    def in_context_share(self) -> float:
        return self.kept / self.used

    @property
    def findable_share(self) -> float:
        return self.findable / self.used


def _shared_head(previous: list[Any], view: list[Any]) -> int:
    """How many messages ``view`` shares from its start with ``previous`` (equal bytes)."""
    count = 0
    for before, now in zip(previous, view, strict=False):
        if before is not now and before != now:
            break
        count += 1
    return count


async def replay_file(path: Path, figures: Figures, config: dict[str, Any]) -> None:
    messages = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    manager = SimpleContextManager(**config)
    tracker = EvidenceTracker()
    previous: list[Any] = []
    for position, message in enumerate(messages):
        if message.get("role") == "assistant" and position > 0:
            view = await manager.get_messages_for_request(token_budget=figures.budget)
            history = await manager.get_messages()
            shared = _shared_head(previous, view)
            tracker.observe(figures.requests, view, history, message, shared=shared)
            tokens = [estimate_message_tokens(m) for m in view]
            read = sum(tokens[:shared])
            figures.priced_input += READ_PRICE * read + WRITE_PRICE * (sum(tokens) - read)
            figures.requests += 1
            previous = view
        await manager.add_message(message)
    figures.used += sum(r.used for r in tracker.records)
    figures.kept += sum(r.kept for r in tracker.records)
    figures.findable += sum(r.findable for r in tracker.records)


def measure(budget: int, config: dict[str, Any] | None = None) -> Figures:
    """The corpus's figures at ``budget`` (``config``: manager keywords; default settings)."""
    figures = Figures(budget)
    for path in sorted(CORPUS.glob("*.jsonl")):
        asyncio.run(replay_file(path, figures, config or {}))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description="Issue 35's figures over the shared corpus.")
    parser.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    parser.add_argument("--map-share", type=float, default=None)
    parser.add_argument("--no-turn-rule", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    config: dict[str, Any] = (
        {} if args.map_share is None else {"compaction_map_share": args.map_share}
    )
    if args.no_turn_rule:
        config["escalate_at_turn_start"] = False
    print("| budget | in context | findable | priced input |")
    print("|---|---|---|---|")
    for budget in (int(b) for b in args.budgets.split(",")):
        f = measure(budget, config)
        print(
            f"| {budget:,} | {f.in_context_share:.1%} ({f.kept}/{f.used}) | "
            f"{f.findable_share:.1%} ({f.findable}/{f.used}) | {f.priced_input:,.0f} |"
        )


if __name__ == "__main__":
    main()
