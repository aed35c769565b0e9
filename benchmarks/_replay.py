"""The replay benchmark: ``context-simple replay`` on a generated transcript of a given size.

The transcript is written into a temporary directory and deleted afterwards (never commit
one). It is the example generator's session, cut into blocks of :data:`BLOCK_MESSAGES`
messages (each block its own seed, so memory stays bounded at 200 MB) whose long tool results
are clipped so that about 14,000 messages make 20 MB, the shape of the issue's measurement.
The replay runs as the command does, in a child process, and its wall time and peak resident
memory (``os.wait4``'s ``ru_maxrss`` of that child alone) are compared with the targets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from amplifier_module_context_simple.replay.example_session import generate_session

__all__ = ["BLOCK_MESSAGES", "TARGETS", "measure_replay", "write_transcript"]

BLOCK_MESSAGES = 14_000
BLOCK_BYTES = 20_000_000
"""One block: 14,000 messages in about 20 MB (the issue's 20 MB transcript)."""
TARGETS = {20: (5.0, 300.0)}
"""Transcript MB -> (seconds, peak MB) the issue sets; other sizes are reported only."""


def _clip(messages: list[dict[str, Any]], cap: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "tool" and isinstance(content, str) and len(content) > cap:
            m = {**m, "content": content[:cap]}
        out.append(m)
    return out


def _block(seed: int, count: int, size: int) -> list[str]:
    """``count`` messages of one session as JSONL lines, clipped to about ``size`` bytes."""
    messages = generate_session(count, seed=seed)
    lines = [json.dumps(m, ensure_ascii=False) for m in messages]
    total = sum(len(line) + 1 for line in lines)
    if total <= size:
        return lines
    # Bisect the cap on tool-result text (the bulk of a coding session) by its character count.
    lengths = [
        len(m["content"]) if m.get("role") == "tool" and isinstance(m.get("content"), str) else 0
        for m in messages
    ]
    excess = total - size
    low, high = 0, max(lengths)
    while low < high:
        cap = (low + high + 1) // 2
        if sum(max(0, n - cap) for n in lengths) >= excess:
            low = cap
        else:
            high = cap - 1
    return [json.dumps(m, ensure_ascii=False) for m in _clip(messages, low)]


def write_transcript(path: Path, megabytes: float, *, seed: int = 7) -> dict[str, int]:
    """Write a transcript of about ``megabytes`` MB (10^6 bytes); its messages and bytes."""
    target = int(megabytes * 1_000_000)
    written = messages = 0
    block = 0
    with path.open("w", encoding="utf-8") as out:
        while target - written > target // 100:  # within 1% is "about"
            share = min(BLOCK_BYTES, target - written)
            count = max(10, round(BLOCK_MESSAGES * share / BLOCK_BYTES))
            for line in _block(seed + block, count, share):
                out.write(line + "\n")
                written += len(line.encode("utf-8")) + 1
                messages += 1
            block += 1
    return {"messages": messages, "bytes": written}


def measure_replay(megabytes: float) -> dict[str, Any]:
    """Generate the transcript, replay it in a child process, and measure that child."""
    with tempfile.TemporaryDirectory(prefix="context-simple-bench-") as tmp:
        transcript = Path(tmp) / "transcript.jsonl"
        shape = write_transcript(transcript, megabytes)
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "amplifier_module_context_simple", "replay",
                   str(transcript), "--json"]  # fmt: skip
        start = time.perf_counter()
        with report.open("w") as out:
            child = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"the replay of {megabytes} MB failed ({child.returncode})")
        summary = json.loads(report.read_text())["summary"]
    peak_mb = usage.ru_maxrss / 1024  # kB on Linux
    limits = TARGETS.get(round(megabytes))
    return {
        "megabytes": megabytes,
        "messages": shape["messages"],
        "bytes": shape["bytes"],
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_mb": peak_mb,
        "requests": summary["requests"],
        "compactions": summary["compactions"],
        "invalid_views": summary["invalid_views"],
        "target_seconds": limits[0] if limits else None,
        "target_peak_mb": limits[1] if limits else None,
    }
