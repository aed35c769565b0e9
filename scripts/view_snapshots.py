"""The views of the property tests' generated sessions at fixed seeds, one digest a session.

For a change that must not change behaviour (a refactor, a move), the views are the check:
run this before and after and compare the two files (``diff``). Each of the test suite's
session strategies draws the same sessions every run (``derandomize``); every session is fed
to a manager with a view asked before each assistant message at several budgets, and the
views (and a resumed manager's view at the end) are hashed together. Run from the repo root::

    uv run python scripts/view_snapshots.py OUT_FILE [--examples N]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import SimpleContextManager
from tests import test_provider_views
from tests.views import test_compaction, test_fit_pass, test_left_out_map

Msg = dict[str, Any]
BUDGETS = (2_000, 6_000, 16_000)


def _sessions() -> dict[str, st.SearchStrategy[tuple[list[Msg], int | None]]]:
    return {
        "compaction": test_compaction.sessions().map(lambda m: (m, None)),
        "fit_pass": test_fit_pass.sessions().map(lambda s: (s[0], s[1])),
        "left_out_map": test_left_out_map.sessions().map(lambda s: (s[0], s[1])),
        "provider_views": test_provider_views.sessions().map(
            lambda s: (s.messages, s.window - s.max_output)
        ),
    }


async def _digest(messages: list[Msg], budget: int) -> str:
    digest = hashlib.sha256()
    manager = SimpleContextManager()
    for position, message in enumerate(messages):
        if message.get("role") == "assistant" and position > 0:
            view = await manager.get_messages_for_request(budget)
            digest.update(json.dumps(view, sort_keys=True, default=str).encode())
        stored_form = json.loads(json.dumps(message))
        # Admission stamps the time it sees a message: a fixed one keeps the views the same.
        metadata = stored_form.setdefault("metadata", {})
        metadata.setdefault(
            "timestamp", f"2026-12-06T09:{position // 60 % 60:02d}:{position % 60:02d}Z"
        )
        await manager.add_message(stored_form)
    stored = json.loads(json.dumps(await manager.get_messages()))
    digest.update(json.dumps(await manager.get_messages_for_request(budget), default=str).encode())
    resumed = SimpleContextManager()
    await resumed.set_messages(stored)
    digest.update(json.dumps(await resumed.get_messages_for_request(budget), default=str).encode())
    return digest.hexdigest()


def _collect(
    strategy: st.SearchStrategy[tuple[list[Msg], int | None]], examples: int
) -> list[tuple[list[Msg], int | None]]:
    drawn: list[tuple[list[Msg], int | None]] = []

    @settings(
        derandomize=True,
        database=None,
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def draw(session: tuple[list[Msg], int | None]) -> None:
        drawn.append(session)

    draw()
    return drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out")
    parser.add_argument("--examples", type=int, default=40)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    lines: list[str] = []
    run: Callable[[list[Msg], int], Any] = lambda m, b: asyncio.run(_digest(m, b))  # noqa: E731
    for name, strategy in _sessions().items():
        for k, (messages, own) in enumerate(_collect(strategy, args.examples)):
            for budget in (own,) if own is not None else BUDGETS:
                lines.append(f"{name} {k} {budget} {len(messages)} {run(messages, budget)}")
    with open(args.out, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    print(f"{len(lines)} sessions' views written to {args.out}")


if __name__ == "__main__":
    main()
