"""Test helper: the recorded requests of a session directory, read by streaming its events.

Helper for the payload and cache-reuse tests only (the session reader proper is
``replay/recordings/session_dir.py``); it reads what those tests need and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION_DIR = Path(__file__).resolve().parents[3] / "shared" / "sessions" / "opus-session-recall"


def recorded(session: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(payloads of ``llm:request``, usages of ``llm:response``) in order, and the transcript."""
    payloads: list[dict[str, Any]] = []
    usages: list[dict[str, Any]] = []
    events = next(session.rglob("events.jsonl"))
    with events.open(encoding="utf-8") as lines:
        for line in lines:
            event = json.loads(line)
            if event["event"] == "llm:request":
                payloads.append(event["data"]["raw"])
            elif event["event"] == "llm:response":
                usages.append(event["data"]["usage"])
    return payloads, usages


def transcript(session: Path) -> list[dict[str, Any]]:
    with (session / "transcript.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
