"""Settings priced by a simulated cache, beside what the compacted views kept.

``uv run python -m benchmarks.settings_cost [CORPUS_DIR]`` (default ``../shared/corpus``):
replays the built-in example at 128,000 / 16,384 and every corpus transcript at three windows
under each setting, asking for a view before every assistant message as an orchestrator does;
prices the requests through ``replay/provider/cache_simulation.py`` (a minute apart, the
5-minute cache) with both breakpoint rules; prints the README's table. A stand-in until
``sweep`` ranks settings by cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.replay.provider.cache_simulation import (
    HEAD_AND_END,
    SimRequest,
    simulate,
)
from amplifier_module_context_simple.replay.recordings.example_session import generate_session
from amplifier_module_context_simple.replay.recordings.transcripts import load_transcript

SETTINGS: dict[str, dict[str, Any]] = {
    "tail notice (the spec), reserve 800, target 0.5": {"compaction_notice_placement": "tail"},
    "in place (the default), reserve 800, target 0.5": {},
    "in place, reserve 300": {"compaction_notice_token_reserve": 300},
    "in place, target 0.35": {"target_usage": 0.35},
    "in place, reserve 300, target 0.35": {
        "compaction_notice_token_reserve": 300,
        "target_usage": 0.35,
    },
}
CORPUS_WINDOWS = ((16_000, 2_000), (32_000, 4_000), (128_000, 8_000))
EXAMPLE_WINDOW = (128_000, 16_384)


class WindowProvider:
    def __init__(self, window: int, output: int) -> None:
        self.window, self.output = window, output

    def get_info(self) -> dict[str, Any]:
        return {"defaults": {"context_window": self.window, "max_output_tokens": self.output}}


class Compactions:
    def __init__(self) -> None:
        self.count = 0

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        self.count += event == "context:compaction"


@dataclass
class Tally:
    compactions: int = 0
    every_message: float = 0.0
    head_and_end: float = 0.0
    kept: list[float] = field(default_factory=list[float])
    requests: int = 0


def _fingerprint(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).digest()


def _is_notice(message: dict[str, Any]) -> bool:
    return (message.get("metadata") or {}).get("source") == "context-compaction"


async def replay(
    messages: Sequence[dict[str, Any]], window: int, output: int, settings: dict[str, Any]
) -> Tally:
    hooks = Compactions()
    manager = SimpleContextManager(hooks=hooks, **settings)
    provider = WindowProvider(window, output)
    requests: list[SimRequest] = []
    tally = Tally()
    for message in messages:
        if message.get("role") == "assistant":
            view = await manager.get_messages_for_request(provider=provider)
            tokens = [estimate_message_tokens(m) for m in view]
            if manager.compaction_level > 0:
                history = sum(map(estimate_message_tokens, manager.messages))
                shown = sum(t for m, t in zip(view, tokens, strict=True) if not _is_notice(m))
                tally.kept.append(shown / history if history else 1.0)
            requests.append(
                SimRequest(b"", 0, list(zip(map(_fingerprint, view), tokens, strict=True)))
            )
        with contextlib.suppress(Exception):  # a transcript line the manager refuses
            await manager.add_message(message)
    tally.compactions = hooks.count
    tally.every_message = simulate(requests).priced_input_tokens()
    tally.head_and_end = simulate(requests, breakpoints=HEAD_AND_END).priced_input_tokens()
    tally.requests = len(requests)
    return tally


async def main(corpus: Path) -> None:
    logging.disable(logging.WARNING)
    runs: list[tuple[Sequence[dict[str, Any]], tuple[int, int]]] = [
        (generate_session(400, seed=7), EXAMPLE_WINDOW)
    ]
    for path in sorted(corpus.glob("*.jsonl")):
        messages = load_transcript(path).messages
        runs += [(messages, window) for window in CORPUS_WINDOWS]
    print(
        "| setting | compactions | priced input, every-message cache | priced input, "
        "head-and-end cache | mean kept share after compaction | requests |"
    )
    print("|---|---|---|---|---|---|")
    for label, settings in SETTINGS.items():
        total = Tally()
        for messages, (window, output) in runs:
            one = await replay(messages, window, output, settings)
            total.compactions += one.compactions
            total.every_message += one.every_message
            total.head_and_end += one.head_and_end
            total.kept += one.kept
            total.requests += one.requests
        kept = statistics.mean(total.kept) if total.kept else 1.0
        print(
            f"| {label} | {total.compactions} | {total.every_message:,.0f} | "
            f"{total.head_and_end:,.0f} | {kept:.1%} | {total.requests} |"
        )


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
