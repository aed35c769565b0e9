"""Aligning a recorded session's payloads with its transcript: one index, or one per request.

    uv run python -m benchmarks.alignment                       # 2,000 requests, best of 3
    uv run python -m benchmarks.alignment --requests 500 --runs 1
    uv run python -m benchmarks.alignment --command             # and `replay DIR --json`
    uv run python -m benchmarks.alignment --command --other SRC # and with another source tree

The session is generated (nothing is kept): tool rounds with a prompt every fifth round, one
recorded Anthropic-shaped payload before every assistant message, with a status reminder
appended to its newest message, cut to its last 100 messages every 250 requests (the
session's own compaction), as a long recorded Amplifier session looks.

In this process, over the same payloads, one after the other and ``--runs`` times (the best
counts, as ``timeit`` takes it; all are printed):

* **per request**: ``align(payload, history)`` with the history as a list, as the replay did
  before it kept an index: the transcript is indexed afresh for every request;
* **one index**: ``align(payload, index)`` with one ``TranscriptIndex`` that catches up with
  the history as it grows, as the replay's session analysis does now.

Both must give the same alignments; the run stops if they do not. ``--command`` also writes the
session into a temporary directory and times ``python -m amplifier_module_context_simple replay
DIR --json`` in a child process (best of ``--runs``); ``--other SRC`` times the same command
with another source tree first on ``PYTHONPATH`` (for example ``git archive COMMIT
amplifier_module_context_simple | tar -x -C SRC``), interleaved with this one, and checks that
both print the same document. No time is asserted anywhere.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from amplifier_module_context_simple.replay.payloads.payload_match import (
    Alignment,
    TranscriptIndex,
    align,
)

FAMILY = "claude47"
CUT_EVERY = 250
KEEP = 100
REMINDER = (
    '\n<system-reminder source="hooks-status-context">\nWorking directory: /workspace; '
    "branch main; 3 files changed.\n</system-reminder>"
)
Message = dict[str, Any]


def transcript(requests: int) -> list[Message]:
    """Tool rounds, a prompt every fifth: ``requests`` assistant messages, a reply at the end."""
    messages: list[Message] = []
    for n in range(requests - 1):
        if n % 5 == 0:
            messages.append({"role": "user", "content": f"Step {n}: look at module {n % 37}."})
        call = {"id": f"call_{n}", "tool": "read", "arguments": {"path": f"src/m{n % 37}.py"}}
        messages.append(
            {"role": "assistant", "content": f"Reading m{n % 37}.", "tool_calls": [call]}
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "name": "read",
                         "content": f"def f{n}():\n    return {n}\n" * 4})  # fmt: skip
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def _sent(message: Message) -> Message:
    """A transcript message as the Anthropic provider sends it."""
    if message["role"] == "tool":
        block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                 "content": message["content"]}  # fmt: skip
        return {"role": "user", "content": [block]}
    if message["role"] == "assistant":
        blocks: list[Message] = [{"type": "text", "text": message["content"]}]
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["tool"], "input": c["arguments"]}
                   for c in message.get("tool_calls", [])]  # fmt: skip
        return {"role": "assistant", "content": blocks}
    return {"role": "user", "content": message["content"]}


def requests_of(messages: list[Message]) -> list[tuple[int, Message]]:
    """(history length, payload) for every request: one before each assistant message."""
    sent = [_sent(m) for m in messages]  # shared by the payloads, as read once each
    out: list[tuple[int, Message]] = []
    start = 0
    for position, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        if out and len(out) % CUT_EVERY == 0:
            start = max(0, position - KEEP)
        body = sent[start:position]
        last = body[-1]
        if isinstance(last["content"], list):
            block = last["content"][-1]
            body[-1] = {**last, "content": [{**block, "content": block["content"] + REMINDER}]}
        else:
            body[-1] = {**last, "content": last["content"] + REMINDER}
        payload = {"model": "claude-opus-4-8", "system": [{"type": "text", "text": "Be careful."}],
                   "messages": body, "max_tokens": 8_000}  # fmt: skip
        out.append((position, payload))
    return out


def _per_request(messages: list[Message], requests: list[tuple[int, Message]]) -> list[Alignment]:
    history: list[Message] = []
    found: list[Alignment] = []
    for position, payload in requests:
        history += messages[len(history) : position]
        found.append(align(payload, history, family=FAMILY))
    return found


def _one_index(messages: list[Message], requests: list[tuple[int, Message]]) -> list[Alignment]:
    history: list[Message] = []
    index = TranscriptIndex(history)
    found: list[Alignment] = []
    for position, payload in requests:
        history += messages[len(history) : position]
        found.append(align(payload, index, family=FAMILY))
    return found


def _timed(work: Callable[[], list[Alignment]]) -> tuple[float, list[Alignment]]:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        found = work()
        return time.perf_counter() - start, found
    finally:
        gc.enable()


def measure_alignment(count: int, runs: int) -> dict[str, Any]:
    """Both ways over the same session, alternating, ``runs`` times each."""
    messages = transcript(count)
    requests = requests_of(messages)
    times: dict[str, list[float]] = {"per request": [], "one index": []}
    for _ in range(runs):
        before, old = _timed(lambda: _per_request(messages, requests))
        after, new = _timed(lambda: _one_index(messages, requests))
        if old != new:
            raise SystemExit("the two ways aligned the session differently")
        times["per request"].append(before)
        times["one index"].append(after)
    sizes = [len(p["messages"]) for _, p in requests]
    return {
        "requests": len(requests),
        "transcript messages": len(messages),
        "payload messages": sum(sizes),
        "largest payload": max(sizes),
        "seconds": times,
    }


def write_session(directory: Path, count: int) -> None:
    """The session as a directory ``replay`` reads: transcript.jsonl and its events."""
    messages = transcript(count)
    with (directory / "transcript.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(m) + "\n" for m in messages)
    with (directory / "events.jsonl").open("w", encoding="utf-8") as out:
        for number, (_, payload) in enumerate(requests_of(messages), 1):
            usage = {"input_tokens": 1_000 + number, "cache_read_tokens": 900, "output_tokens": 40}
            for event, data in (
                ("llm:request", {"raw": payload}),
                ("llm:response", {"usage": usage}),
            ):
                line = {"ts": "t", "session_id": "s", "event": event,
                        "data": {"model": "claude-opus-4-8", **data}}  # fmt: skip
                out.write(json.dumps(line) + "\n")


def _environment(source: Path | None) -> dict[str, str]:
    """The child's environment: ``source`` first on the path; bytecode cached (as
    ``_replay.py`` explains, a user's second run starts from it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
    return env


def _package_file(source: Path | None, cwd: Path) -> str:
    """Where the child imports the package from (run outside any checkout: ``-m`` puts the
    working directory first on the path)."""
    code = "import amplifier_module_context_simple as p; print(p.__file__)"
    done = subprocess.run([sys.executable, "-c", code], env=_environment(source), cwd=cwd,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def _replay(directory: Path, source: Path | None, out: Path) -> float:
    env, cwd = _environment(source), out.parent
    command = [sys.executable, "-m", "amplifier_module_context_simple", "replay"]
    subprocess.run([*command, "--json"], env=env, cwd=cwd, capture_output=True, check=True)
    start = time.perf_counter()
    with out.open("wb") as sink:
        subprocess.run([*command, str(directory), "--json"], env=env, cwd=cwd, stdout=sink,
                       check=True)  # fmt: skip
    return time.perf_counter() - start


def measure_command(count: int, runs: int, other: Path | None) -> dict[str, list[float]]:
    """``replay DIR --json`` with this source tree (and ``other``), interleaved; each named by
    the package file its child imported."""
    sources: list[Path | None] = [None] if other is None else [None, other]
    with tempfile.TemporaryDirectory(prefix="context-simple-align-") as tmp:
        trees = {_package_file(source, Path(tmp)): source for source in sources}
        if len(trees) != len(sources):
            raise SystemExit("both source trees import the same package")
        times: dict[str, list[float]] = {name: [] for name in trees}
        session = Path(tmp) / "session"
        session.mkdir()
        write_session(session, count)
        for _ in range(runs):
            outputs: list[bytes] = []
            for name, source in trees.items():
                report = Path(tmp) / "report.json"
                times[name].append(_replay(session, source, report))
                outputs.append(report.read_bytes())
            if len(set(outputs)) != 1:
                raise SystemExit("the two source trees printed different documents")
    return times


def _row(name: str, seconds: list[float]) -> str:
    every = " / ".join(f"{s:.2f}" for s in seconds)
    return f"  {name:<24} best {min(seconds):7.2f} s   (runs: {every})"


def _tree(package_file: str) -> str:
    """A source tree as the package file it imports: its folder."""
    return str(Path(package_file).parent.parent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.alignment")
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--command", action="store_true", help="also time replay DIR --json")
    parser.add_argument("--other", type=Path, help="with --command: another source tree too")
    options = parser.parse_args(argv)
    found = measure_alignment(options.requests, options.runs)
    print(f"Aligning {found['requests']:,} recorded requests ({found['transcript messages']:,} "
          f"transcript messages; {found['payload messages']:,} payload messages, at most "
          f"{found['largest payload']:,} in one), the same alignments both ways:")  # fmt: skip
    for name, seconds in found["seconds"].items():
        print(_row(name, seconds))
    if options.command:
        print(f"replay DIR --json of the same session ({options.requests:,} requests):")
        timed = measure_command(options.requests, options.runs, options.other)
        for name, seconds in timed.items():
            print(_row(_tree(name), seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
