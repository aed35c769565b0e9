"""The replay benchmark: ``context-simple replay`` on a generated transcript of a given size.

The transcript is written into a temporary directory and deleted afterwards (never commit
one). It is the example generator's session, cut into blocks of :data:`BLOCK_MESSAGES`
messages (each block its own seed, so memory stays bounded at 200 MB) whose long tool results
are clipped so that about 14,000 messages make 20 MB, the shape of the issue's measurement.
The replay runs as the command does, in a child process, :data:`RUNS` times; the fastest wall
time and the largest peak resident memory (``os.wait4``'s ``ru_maxrss`` of each child alone)
are compared with the targets.
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

from amplifier_module_context_simple.replay.recordings.example_session import generate_session

__all__ = ["BLOCK_MESSAGES", "RUNS", "TARGETS", "measure_replay", "write_transcript"]

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


RUNS = 3
"""Replays timed per transcript; the fastest counts (as timeit's best of N), all are reported."""


def _child_environment() -> dict[str, str]:
    """The environment without ``PYTHONDONTWRITEBYTECODE``: a user's second run of the command
    starts from cached bytecode, and compiling ~400 modules (half a second here) is not the
    replay's cost. Some sandboxes set it for every process."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(command: list[str], out: Path, env: dict[str, str]) -> tuple[float, Any, int]:
    start = time.perf_counter()
    with out.open("w") as sink:
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - start, usage, os.waitstatus_to_exitcode(status)


def measure_replay(megabytes: float, runs: int = RUNS) -> dict[str, Any]:
    """Generate the transcript, replay it ``runs`` times in a child process, measure each child.

    A replay of the built-in example runs first, untimed, so that the timed runs start from
    cached bytecode (see :func:`_child_environment`). Wall time is the fastest run's (a shared
    machine only ever adds time); peak memory the largest of all runs.
    """
    env = _child_environment()
    module = [sys.executable, "-m", "amplifier_module_context_simple", "replay"]
    with tempfile.TemporaryDirectory(prefix="context-simple-bench-") as tmp:
        transcript = Path(tmp) / "transcript.jsonl"
        shape = write_transcript(transcript, megabytes)
        report = Path(tmp) / "report.json"
        _timed([*module, "--json"], report, env)  # warm-up: compiles and caches the bytecode
        timings: list[tuple[float, Any]] = []
        for _ in range(runs):
            seconds, usage, code = _timed([*module, str(transcript), "--json"], report, env)
            if code != 0:
                raise SystemExit(f"the replay of {megabytes} MB failed ({code})")
            timings.append((seconds, usage))
        summary = json.loads(report.read_text())["summary"]
    seconds, usage = min(timings, key=lambda t: t[0])
    peak_mb = max(u.ru_maxrss for _, u in timings) / 1024  # kB on Linux
    limits = TARGETS.get(round(megabytes))
    return {
        "megabytes": megabytes,
        "messages": shape["messages"],
        "bytes": shape["bytes"],
        "seconds": seconds,
        "all_seconds": [round(t, 3) for t, _ in timings],
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_mb": peak_mb,
        "requests": summary["requests"],
        "compactions": summary["compactions"],
        "invalid_views": summary["invalid_views"],
        "target_seconds": limits[0] if limits else None,
        "target_peak_mb": limits[1] if limits else None,
    }
