"""A crashed or still-running session: its events file cut off anywhere, never an internal error.

A session that crashed, or is still running, leaves an ``events.jsonl`` that ends early, often
inside a request record. Every command must still give its report (partial, and saying which
requests were not recorded) with the normal exit status; ``--check`` judges what it can and
says what it could not. The events file is cut at every line boundary and in the middle of
lines, of a session built here (so a clone without ``../shared`` tests it) and of the real
recorded session (when ``../shared`` is there).

What runs where, to keep the time reasonable (a replay of the real session takes 0.1-0.4 s
on 2 cores, and its events file has 101 lines):

* the self-made session: every line boundary and the middle of every line, every command;
* the real session: ``replay --check`` (the text report, the refusals and the check: the path
  that crashed; plain ``replay`` prints the same report) and ``--json`` inside and right after
  every line whose loss changes what is recorded (the config, each request, each response:
  38 cuts; a cut anywhere else loses only events the reader never uses, so it replays as the
  cut after the last of those lines before it); ``replay --requests``, ``inspect --at 1`` and
  ``--plot`` (when matplotlib is installed) inside every request line.
* with ``--run-slow``: the real session, every command at every line boundary and inside
  every line (about 10 minutes).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cli_runs import run
from .test_session_dir import REAL_SESSION, make_session, needs_real_session

HAS_PLOT = importlib.util.find_spec("matplotlib") is not None
EVENTS = Path("context-intelligence") / "events.jsonl"


def cuts(data: bytes, *, middles: set[int] | None = None) -> Iterator[tuple[str, bytes]]:
    """``(label, what is left)``: every line boundary, and the middle of the lines numbered in
    ``middles`` (0-based; ``None``: every line)."""
    lines = data.splitlines(keepends=True)
    for k in range(len(lines) + 1):
        yield f"after line {k}", b"".join(lines[:k])
        if k < len(lines) and (middles is None or k in middles):
            yield f"inside line {k + 1}", b"".join(lines[:k]) + lines[k][: len(lines[k]) // 2]


def copy_session(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # the shared copy is read-only
    return target


def commands(directory: Path, tmp_path: Path) -> dict[str, list[str]]:
    found = {
        "replay": ["replay", "--full", str(directory)],
        "check": ["replay", "--full", str(directory), "--check"],
        "requests": ["replay", "--full", str(directory), "--requests"],
        "json": ["replay", str(directory), "--json"],
        "inspect": ["inspect", str(directory), "--at", "1"],
    }
    if HAS_PLOT:
        found["plot"] = ["replay", "--full", str(directory), "--plot", str(tmp_path / "chart.png")]
    return found


def assert_no_internal_error(label: str, name: str, args: list[str]) -> Any:
    result = run(*args)
    where = f"{name}, events cut {label}"
    assert "internal error" not in result.stderr, (where, result.stderr)
    # 0 done; 4 a view refused (--check); never 3 (internal) or 1 (the input refused).
    assert result.exit_code in ({0, 4} if name == "check" else {0}), (where, result.stderr)
    return result


def check_cut(
    directory: Path, data: bytes, label: str, names: list[str], tmp_path: Path
) -> dict[str, Any]:
    (directory / EVENTS).write_bytes(data)
    every = commands(directory, tmp_path)
    results = {n: assert_no_internal_error(label, n, every[n]) for n in names if n in every}
    if "json" in results:
        document = json.loads(results["json"].stdout)
        summary, match = document["summary"], document["source"].get("recorded_match")
        missing = summary["not_recorded_requests"]
        if match is not None:  # a session with an events file: what it lacks is named
            assert missing == list(range(match["matched"] + 1, summary["requests"] + 1)), label
            flags = [w["recorded"] for w in document["window_by_category"]]
            assert flags == [r not in missing for r in range(1, summary["requests"] + 1)]
        return document
    return {}


# --- a session built here --------------------------------------------------------------------


def test_a_self_made_session_cut_anywhere_gives_a_partial_report(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", turns=2)
    data = (directory / EVENTS).read_bytes()
    names = ["replay", "--full", "check", "requests", "json", "inspect", "plot"]
    partial = 0
    for label, left in cuts(data):
        document = check_cut(directory, left, label, names, tmp_path)
        partial += bool(document["summary"]["not_recorded_requests"])
    assert partial  # most cuts leave requests unrecorded


def test_a_cut_inside_a_request_says_which_requests_were_not_recorded(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", turns=2)  # 4 requests, 2 events each
    lines = (directory / EVENTS).read_bytes().splitlines(keepends=True)
    # The config, request 1 and its response, then request 2 cut in its middle.
    (directory / EVENTS).write_bytes(b"".join(lines[:3]) + lines[3][:40])
    result = run("replay", "--full", str(directory), "--check")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "Partial session: requests 2-4 of 4 were not recorded" in out
    assert "ends inside line 4 (cut off mid-record" in out
    assert "Not judged whole: requests 2-4 of 4 were not recorded" in out
    assert "context-simple: check: requests 2-4 of 4 were not recorded" in result.stderr
    assert "so 'above the window' is a lower bound for them" in " ".join(result.stderr.split())
    rows = [line.split() for line in result.stdout.splitlines()]
    firsts = [r[0] for r in rows if r]
    assert "2*" in firsts and "4*" in firsts and "1*" not in firsts and "1" in firsts
    document = json.loads(run("replay", str(directory), "--json").stdout)
    assert document["summary"]["not_recorded_requests"] == [2, 3, 4]
    assert document["refusals"]["not_recorded"] == [2, 3, 4]
    notes = document["source"]["session_notes"]
    assert any("events.jsonl ends inside line 4" in n for n in notes), notes
    # The unrecorded requests still carry the last recorded tool definitions (here none) and
    # the replayed view's system prompt, in the recorded rows' columns.
    windows = document["window_by_category"]
    assert [w["recorded"] for w in windows] == [True, False, False, False]
    assert all("system prompt" in w["categories"] for w in windows)
    # The Partial session line says how many were recorded: no warning repeats it.
    assert not any("the replay made" in w["message"] for w in document["warnings"])


def test_a_transcript_shorter_than_its_recording_is_warned_about(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", turns=2)  # 4 requests recorded
    transcript = directory / "transcript.jsonl"
    lines = transcript.read_text(encoding="utf-8").splitlines(keepends=True)
    assistants = [i for i, line in enumerate(lines) if '"assistant"' in line]
    transcript.write_text("".join(lines[: assistants[2]]), encoding="utf-8")  # 2 requests
    document = json.loads(run("replay", str(directory), "--json").stdout)
    warned = [w["message"] for w in document["warnings"] if "the replay made" in w["message"]]
    assert warned == [
        "the session recorded 4 request(s) and the replay made 2: the first 2 were matched to "
        "recorded system prompts and usage"
    ]


def test_an_events_file_without_requests_is_not_called_a_crash(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", turns=2)
    lines = (directory / EVENTS).read_bytes().splitlines(keepends=True)
    (directory / EVENTS).write_bytes(lines[0])  # the config only, whole
    result = run("replay", "--full", str(directory))
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "No request payload recorded: the events file has no llm:request event" in out
    assert "Partial session" not in out and "crashed" not in out
    document = json.loads(run("replay", str(directory), "--json").stdout)
    assert document["summary"]["not_recorded_requests"] == [1, 2, 3, 4]


def test_a_whole_session_is_not_partial(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", turns=2)
    result = run("replay", "--full", str(directory))
    assert result.exit_code == 0 and "Partial session" not in result.stdout
    document = json.loads(run("replay", str(directory), "--json").stdout)
    assert document["summary"]["not_recorded_requests"] == []
    bare = json.loads(run("replay", str(directory / "transcript.jsonl"), "--json").stdout)
    assert bare["summary"]["not_recorded_requests"] is None  # no recording to match


def test_an_events_file_that_is_a_directory_is_named_not_ignored(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", events_at=None)
    (directory / "events.jsonl").mkdir()
    result = run("replay", "--full", str(directory))
    assert result.exit_code == 0, result.stderr
    said = "events.jsonl is a directory, not an events file: ignored"
    assert said in result.stderr and said in " ".join(result.stdout.split())
    document = json.loads(run("replay", str(directory), "--json").stdout)
    assert said in document["source"]["session_notes"]


# --- the real session ------------------------------------------------------------------------


def real_events() -> tuple[bytes, set[int]]:
    """The real events file and the lines whose loss changes what is recorded (0-based): the
    config, every request and every response (the reader uses no other event)."""
    data = (REAL_SESSION / EVENTS).read_bytes()
    names = [json.loads(line)["event"] for line in data.splitlines()]
    used = {"session:config", "llm:request", "llm:response", "context:budget"}
    return data, {i for i, n in enumerate(names) if n in used}


def changes(data: bytes, used: set[int]) -> Iterator[tuple[str, bytes]]:
    """The cuts inside and right after each line of ``used``."""
    lines = data.splitlines(keepends=True)
    for i in sorted(used):
        yield f"inside line {i + 1}", b"".join(lines[:i]) + lines[i][: len(lines[i]) // 2]
        yield f"after line {i + 1}", b"".join(lines[: i + 1])


@needs_real_session
def test_the_real_session_cut_where_the_recording_changes_never_fails(tmp_path: Path) -> None:
    directory = copy_session(REAL_SESSION, tmp_path / "s")
    data, used = real_events()
    for label, left in changes(data, used):
        check_cut(directory, left, label, ["check", "json"], tmp_path)


@needs_real_session
def test_the_real_session_cut_inside_each_request_serves_every_command(tmp_path: Path) -> None:
    directory = copy_session(REAL_SESSION, tmp_path / "s")
    data, used = real_events()
    names = [json.loads(line)["event"] for line in data.splitlines()]
    requests = {i for i in used if names[i] == "llm:request"}
    for label, left in changes(data, requests):
        if label.startswith("inside"):
            check_cut(directory, left, label, ["requests", "inspect", "plot"], tmp_path)


@pytest.mark.slow
@needs_real_session
def test_the_real_session_cut_at_every_line_and_inside_every_line(tmp_path: Path) -> None:
    directory = copy_session(REAL_SESSION, tmp_path / "s")
    data, _ = real_events()
    names = ["replay", "--full", "check", "requests", "json", "inspect", "plot"]
    for label, left in cuts(data):
        check_cut(directory, left, label, names, tmp_path)
