"""Does the in-place notice stay put between escalations? A replay that counts the requests it
moved (issue 35, item 4).

A transcript is replayed as an orchestrator runs it: a view before every assistant message
that is sent (display-only rows are not request points) at a fixed ``token_budget``. Each
consecutive pair of requests with no escalation between them must have the later view start
with the earlier one whole. A pair that breaks that, but would keep it if the notice were taken
out of both views, is broken by the notice alone: the notice moved.

    uv run python -m tests.notice_moves ../shared/corpus \
        ../shared/sessions/coding-session-thinking.jsonl

Prints one row per transcript and budget, and a total; exit 1 when the notice moved anywhere.
The tests (``tests/views/test_notice_still.py``) run the same count.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amplifier_core import HookRegistry, HookResult

from amplifier_module_context_simple import SimpleContextManager

BUDGETS = (2_000, 4_000, 8_000, 16_000, 30_000)
NOTICE_SOURCE = "context-compaction"


def is_notice(message: Any) -> bool:
    meta = message.get("metadata") if isinstance(message, dict) else None
    return isinstance(meta, dict) and meta.get("source") == NOTICE_SOURCE


def is_display_only(message: dict[str, Any]) -> bool:
    meta = message.get("metadata")
    return isinstance(meta, dict) and meta.get("amplifier_public_reference_only") is True


def _texts(view: Sequence[Any]) -> list[str]:
    return [json.dumps(m, sort_keys=True, default=str) for m in view]


def extends(previous: Sequence[Any], view: Sequence[Any]) -> bool:
    """Whether ``view`` starts with ``previous`` whole."""
    return _texts(view[: len(previous)]) == _texts(previous)


@dataclass
class Replay:
    """What one replay of a transcript found."""

    requests: int = 0
    escalations: int = 0
    pairs: int = 0
    """Consecutive requests with no escalation between them."""
    broken: list[int] = field(default_factory=list[int])
    """Requests (1-based) that do not start with the previous one whole, for any reason."""
    moved: list[int] = field(default_factory=list[int])
    """Of those, the ones the notice alone broke."""
    gone_at_escalation: list[int] = field(default_factory=list[int])
    """Escalating requests (history positions) that would start with the previous request
    whole but for its notice: the new escalation edited only what came after the old notice,
    which is gone from where it stood (the count of issue 35, which numbers the requests by
    the history position of the assistant message they answer)."""
    resumed_differ: list[int] = field(default_factory=list[int])
    """Requests a resumed manager (``set_messages`` with the stored history) sent otherwise."""


async def replay(
    messages: Iterable[dict[str, Any]], budget: int, *, resume: bool = False, **config: Any
) -> Replay:
    """Replay ``messages`` at ``budget``; with ``resume``, also ask a resumed manager at every
    request and record where its view differs."""
    hooks = HookRegistry()
    escalations: list[int] = []

    async def count(event: str, data: dict[str, Any]) -> HookResult:
        escalations.append(1)
        return HookResult(action="continue")

    hooks.register("context:compaction", count, name="notice-moves")
    manager = SimpleContextManager(hooks=hooks, **config)
    found = Replay()
    previous: list[Any] | None = None
    for position, message in enumerate(messages):
        if position > 0 and message.get("role") == "assistant" and not is_display_only(message):
            before = len(escalations)
            if resume:
                twin = SimpleContextManager(**config)
                await twin.set_messages(copy.deepcopy(await manager.get_messages()))
                again = await twin.get_messages_for_request(token_budget=budget)
            view = await manager.get_messages_for_request(token_budget=budget)
            found.requests += 1
            if resume and _texts(again) != _texts(view):  # pyright: ignore[reportPossiblyUnbound]
                found.resumed_differ.append(found.requests)
            escalated = len(escalations) > before
            found.escalations += escalated
            if previous is not None and not extends(previous, view):
                without = [m for m in view if not is_notice(m)]
                by_notice = extends([m for m in previous if not is_notice(m)], without)
                if escalated:
                    if by_notice:
                        found.gone_at_escalation.append(position)
                else:
                    found.broken.append(found.requests)
                    if by_notice:
                        found.moved.append(found.requests)
            found.pairs += previous is not None and not escalated
            previous = copy.deepcopy(view)
        await manager.add_message(copy.deepcopy(message))
    return found


def read_transcript(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def transcripts(paths: Iterable[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.glob("*.jsonl") if p.stem != "cjk-samples")
        else:
            found.append(path)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="transcripts (.jsonl) or directories of them")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--resume", action="store_true", help="also compare a resumed manager")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    budgets = [int(b) for b in args.budgets.split(",")]
    moved = broken = pairs = differ = gone = 0
    for path in transcripts(args.paths):
        messages = read_transcript(path)
        for budget in budgets:
            found = asyncio.run(replay(messages, budget, resume=args.resume))
            moved += len(found.moved)
            broken += len(found.broken)
            pairs += found.pairs
            differ += len(found.resumed_differ)
            gone += len(found.gone_at_escalation)
            print(
                f"{path.stem[:40]:40} {budget:>6} requests={found.requests:3} "
                f"escalations={found.escalations:3} pairs={found.pairs:3} "
                f"broken={len(found.broken):3} by the notice alone={len(found.moved):3} "
                f"{found.moved if found.moved else ''} across an escalation="
                f"{len(found.gone_at_escalation)} {found.gone_at_escalation or ''}"
                + (f" resumed views that differ={len(found.resumed_differ)}" if args.resume else "")
            )
    print(
        f"notice moves: {moved} of {pairs} pairs between escalations broken by the notice alone "
        f"({broken} broken in all); {gone} escalations broke the previous request only where "
        f"its notice stood" + (f"; {differ} resumed views differ" if args.resume else "")
    )
    return 1 if moved or differ else 0


if __name__ == "__main__":
    sys.exit(main())
