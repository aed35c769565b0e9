"""Every agent's own log replays with the figures it records: its requests, its largest
request, its model and window; each is found where its agent keeps it; a file no reader takes
is refused with the formats tried.

The generated logs (``agent_log_writers``) always run; the native logs of ``../shared/logs``
run when that folder is there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import agent_log_writers as write
from .cli_runs import run, run_json

LOGS_DIR = Path(__file__).resolve().parents[3] / "shared" / "logs"
_usage = st.tuples(st.integers(2_000, 40_000), st.integers(0, 40_000), st.integers(1, 2_000))
_usages = st.lists(_usage, min_size=1, max_size=6)
_cases = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

Writer = Callable[[Path, list[write.Usage]], Path]
WRITERS: dict[str, tuple[Writer, str]] = {
    "codex": (lambda d, u: write.codex(d / "rollout.jsonl", u), "codex"),
    "pi": (lambda d, u: write.pi(d / "pi.jsonl", u), "pi"),
    "opencode export": (lambda d, u: write.opencode_export(d / "export.json", u), "opencode"),
    "opencode database": (
        lambda d, u: write.opencode_database(d / "opencode.db", {"ses_1": u}),
        "opencode",
    ),
    "cline": (lambda d, u: write.cline_task(d / "task", u), "cline"),
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
@_cases
@given(usages=_usages)
def test_each_format_replays_with_the_requests_and_largest_request_it_records(
    tmp_path: Path, kind: str, usages: list[write.Usage]
) -> None:
    writer, format_name = WRITERS[kind]
    folder = tmp_path / f"{kind}-{len(list(tmp_path.iterdir()))}"
    path = writer(folder, usages)
    document = run_json("replay", str(path))
    source, summary = document["source"], document["summary"]
    assert source["format"] == format_name
    assert source["recorded_requests"] == summary["requests"] == len(usages)
    assert summary["peak_request_tokens"] == write.largest(usages)
    model = write.CODEX_MODEL if kind == "codex" else write.MODEL
    assert ("model", model) in {(s["name"], s["value"]) for s in source["settings"]}
    assert summary["invalid_views"] == 0
    assert summary["host_invalid_views"] == 0


def test_the_window_a_codex_rollout_records_is_the_replays(tmp_path: Path) -> None:
    path = write.codex(tmp_path / "rollout.jsonl", [(900, 100, 10)])
    settings_by_name = {s["name"]: s for s in run_json("replay", str(path))["source"]["settings"]}
    assert settings_by_name["context_window"]["value"] == write.CODEX_WINDOW
    assert settings_by_name["context_window"]["source"] == "session events"


def test_a_pi_session_follows_the_branch_that_leads_to_its_last_entry(tmp_path: Path) -> None:
    usages = [(1000, 0, 10), (1200, 0, 10)]
    branched = run_json("replay", str(write.pi(tmp_path / "b.jsonl", usages)))
    straight = run_json("replay", str(write.pi(tmp_path / "s.jsonl", usages, branch=False)))
    assert branched["summary"]["messages"] == straight["summary"]["messages"]
    assert branched["summary"]["peak_request_tokens"] == write.largest(usages)


def test_an_opencode_database_replays_the_session_updated_last_unless_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = write.opencode_database(
        tmp_path / "data" / "opencode" / "opencode.db",
        {"ses_old": [(500, 0, 5)], "ses_new": [(700, 0, 5), (800, 0, 5)]},
    )
    newest = run_json("replay", str(database))
    assert newest["summary"]["requests"] == 2
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    named = run_json("replay", "ses_old")
    assert named["summary"]["requests"] == 1


@pytest.mark.parametrize("indent", [2, None])
@pytest.mark.parametrize("wrapped", [True, False])
def test_pretty_printed_json_messages_replay(
    tmp_path: Path, indent: int | None, wrapped: bool
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "bye"},
        {"role": "assistant", "content": "ok"},
    ]
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps({"messages": messages} if wrapped else messages, indent=indent))
    document = run_json("replay", str(path))
    assert document["summary"]["messages"] == len(messages)


def test_a_file_no_reader_takes_names_the_formats_it_tried(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text("".join(json.dumps({"kind": n}) + "\n" for n in range(3)))
    result = run("replay", str(path))
    assert result.exit_code == 1
    error = result.stderr.strip()
    assert "\n" not in error
    for tried in ("Codex rollout", "Pi session", "OpenCode database", "Claude Code log",
                  "JSON document", "no 'role' key"):  # fmt: skip
        assert tried in error


@pytest.mark.parametrize("kind", sorted(WRITERS))
@pytest.mark.parametrize(
    "command", [("inspect", "--at", "2"), ("sweep", "--compact-threshold", "0.5,0.8")]
)
def test_inspect_and_sweep_read_every_format(
    tmp_path: Path, kind: str, command: tuple[str, ...]
) -> None:
    writer, _ = WRITERS[kind]
    path = writer(tmp_path, [(3000, 0, 5), (3100, 200, 5), (3300, 0, 5)])
    result = run(*command, str(path))
    assert result.exit_code == 0, result.stderr


# --- where each agent keeps its logs ---------------------------------------------------------

UUID = "019bf4b5-e7b0-75a0-8bf2-05fbf1b13c9b"


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return home


def _placed(home: Path, kind: str, usages: list[write.Usage]) -> tuple[Path, str, Path]:
    """A log where its agent keeps it: its path, its session id, the folder that holds it."""
    if kind == "codex":
        folder = home / ".codex" / "sessions"
        path = write.codex(
            folder / "2026/01/25" / f"rollout-2026-01-25T10-32-00-{UUID}.jsonl", usages
        )
        return path, UUID, folder
    if kind == "pi":
        folder = home / ".pi" / "agent" / "sessions"
        path = write.pi(folder / "--w--" / f"2026-02-03T22-02-17-181Z_{UUID}.jsonl", usages)
        return path, UUID, folder
    if kind == "cline":
        folder = home / ".cline" / "data" / "tasks"
        return write.cline_task(folder / "1770913324842", usages), "1770913324842", folder
    folder = home / ".local" / "share" / "opencode"
    path = write.opencode_database(folder / "opencode.db", {"ses_450b70e67ffe": usages})
    return path, "ses_450b70e67ffe", folder


@pytest.mark.parametrize("kind", ["codex", "pi", "cline", "opencode"])
def test_each_agents_log_is_found_by_its_session_id_and_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    home = _home(tmp_path, monkeypatch)
    usages = [(1000, 0, 10), (900, 300, 10)]
    path, session_id, folder = _placed(home, kind, usages)
    for name in (session_id, session_id[:12], str(folder)):
        document = run_json("replay", name)
        assert document["summary"]["requests"] == len(usages), name
        assert document["summary"]["peak_request_tokens"] == write.largest(usages)
        assert document["source"]["name"] == str(path)


def test_a_sub_agent_log_beside_a_session_is_never_picked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from .test_claude_code_log import Log, usage_of

    home = _home(tmp_path, monkeypatch)
    project = home / ".claude" / "projects" / "-w"
    project.mkdir(parents=True)
    session = (
        Log()
        .user("hi")
        .response("msg_1", {"type": "text", "text": "hello"}, usage=usage_of(10, 0, 0, 5))
    )
    session.write(project / "5b0c6a8e-0000-4000-8000-000000000001.jsonl")
    sub = project / "agent-1a2b3c4d.jsonl"
    Log().user("sub").response("msg_2", {"type": "text", "text": "s"}).write(sub)
    os.utime(sub, (2_000_000_000, 2_000_000_000))  # the newest file in the folder
    document = run_json("replay", str(project))
    assert document["source"]["name"].endswith("5b0c6a8e-0000-4000-8000-000000000001.jsonl")


# --- the native logs ----------------------------------------------------------------------------


def _recorded(path: Path) -> tuple[int, int]:
    """What a native log records, read here on its own terms: its requests and the largest."""
    if path.is_dir():
        history = json.loads((path / "api_conversation_history.json").read_text())
        sizes = [
            m["metrics"]["tokens"]["prompt"] + m["metrics"]["tokens"]["cached"]
            for m in history
            if m["role"] == "assistant"
        ]
        return len(sizes), max(sizes)
    if path.suffix == ".json":
        document = json.loads(path.read_text())
        steps = [
            p["tokens"] for m in document["messages"] for p in m["parts"]
            if p["type"] == "step-finish"
        ]  # fmt: skip
        sizes = [t["input"] + t["cache"]["read"] + t["cache"]["write"] for t in steps]
        return len(sizes), max(sizes)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if path.name.startswith("codex"):
        counts: dict[str, int] = {}
        for row in rows:
            payload = row["payload"]
            if payload.get("type") == "token_count" and payload.get("info"):
                info = payload["info"]
                key = json.dumps(info["total_token_usage"])
                counts.setdefault(key, info["last_token_usage"]["input_tokens"])
        return len(counts), max(counts.values())
    if path.name.startswith("pi"):
        usages = [r["message"]["usage"] for r in rows if r.get("type") == "message"
                  and r["message"]["role"] == "assistant"]  # fmt: skip
        sizes = [u["input"] + u["cacheRead"] + u["cacheWrite"] for u in usages]
        return len(sizes), max(sizes)
    by_id: dict[str, int] = {}
    for row in rows:
        message = row.get("message") or {}
        usage = message.get("usage")
        if row.get("type") == "assistant" and not row.get("isSidechain") and usage:
            by_id[message["id"]] = (
                usage["input_tokens"] + usage.get("cache_read_input_tokens", 0)
                + usage.get("cache_creation_input_tokens", 0)
            )  # fmt: skip
    return len(by_id), max(by_id.values())


NATIVE = [*sorted(LOGS_DIR.glob("*.json*")), LOGS_DIR / "cline-crud"] if LOGS_DIR.is_dir() else []


@pytest.mark.skipif(not LOGS_DIR.is_dir(), reason="needs ../shared/logs")
@pytest.mark.parametrize("path", NATIVE, ids=lambda p: p.name)
def test_every_native_log_replays_with_the_figures_it_records(path: Path) -> None:
    requests, largest = _recorded(path)
    document = run_json("replay", str(path))
    summary = document["summary"]
    assert document["source"]["recorded_requests"] == requests
    assert summary["requests"] == requests
    # Where the replay compacted, the largest request is its own figure, not the log's; after
    # the agent's own compaction the replay sends what the agent sent, so the log's holds.
    if not document["compactions"]:
        assert summary["peak_request_tokens"] == largest


# --- the agent's own compactions ---------------------------------------------------------------


def test_a_claude_code_log_that_ends_on_its_compaction_shows_it(tmp_path: Path) -> None:
    from .test_claude_code_log import Log, usage_of

    path = (
        Log()
        .user("hi")
        .response("msg_1", {"type": "text", "text": "hello"}, usage=usage_of(10, 0, 0, 5))
        .other("system", subtype="compact_boundary", content="Conversation compacted",
               compactMetadata={"trigger": "manual", "preTokens": 15_808})
        .user("Summary: said hello.", isCompactSummary=True)
        .write(tmp_path / "s.jsonl")
    )  # fmt: skip
    rework = run_json("replay", str(path))["rework"]
    assert [(c["after_request"], c["trigger"], c["tokens_before"]) for c in rework["recorded"]] == [
        (1, "manual", 15_808)
    ]
    assert rework["spans"] == []
    # The first screen says it happened; the full report lists each one.
    first = " ".join(run("replay", str(path)).stdout.split())
    assert "The agent's own compactions 1; the first after request 1: manual, 15,808" in first
    words = " ".join(run("replay", str(path), "--full").stdout.split())
    assert "The agent's own compactions (claude-code compact_boundary): 1" in words
    assert "after request 1: manual, 15,808 tokens before" in words


@pytest.mark.parametrize("kind", ["codex", "codex without summary", "pi"])
def test_codex_and_pi_compactions_are_the_recordings_own(tmp_path: Path, kind: str) -> None:
    usages = [(3000, 0, 5), (3100, 0, 5), (3200, 0, 5), (3300, 0, 5)]
    if kind.startswith("codex"):
        summary = kind == "codex"
        path = write.codex(tmp_path / "rollout.jsonl", usages, compact_after=2, summary=summary)
    else:
        path = write.pi(tmp_path / "pi.jsonl", usages, compact_after=2, tokens_before=9_999)
    document = run_json("replay", str(path))
    rework = document["rework"]
    (recorded,) = rework["recorded"]
    assert recorded["after_request"] == 2
    assert recorded["tokens_before"] == (9_999 if kind == "pi" else usages[1][0] + usages[1][2])
    # The first request after it is where its rework is counted from.
    assert [span["request"] for span in rework["spans"]] == [3]
    assert document["summary"]["requests"] == len(usages)


# --- sub-agents ---------------------------------------------------------------------------------


def test_a_sub_agents_requests_have_their_own_rows_and_count_in_the_totals(
    tmp_path: Path,
) -> None:
    from .test_claude_code_log import Log, usage_of

    path = (
        Log()
        .user("hi")
        .response("msg_1", {"type": "text", "text": "starting"}, usage=usage_of(10, 900, 0, 5))
        .user("find the file", isSidechain=True)
        .response("msg_s", {"type": "text", "text": "found"}, usage=usage_of(4, 700, 0, 9),
                  isSidechain=True)
        .user("thanks")
        .response("msg_2", {"type": "text", "text": "done"}, usage=usage_of(10, 50, 900, 5))
        .write(tmp_path / "s.jsonl")
    )  # fmt: skip
    document = run_json("replay", str(path))
    cache, summary = document["cache"], document["summary"]
    (sub,) = cache["sub_agent_requests"]
    assert (sub["request"], sub["occupancy"], sub["cache_write_tokens"]) == (1, 704, 700)
    assert summary["requests"] == len(cache["requests"]) == 2
    rows = [*cache["requests"], sub]
    assert cache["occupancy"] == sum(r["occupancy"] for r in rows)
    assert summary["priced_input_tokens"] == pytest.approx(
        sum(r["priced_input_tokens"] for r in rows), abs=0.2
    )
    assert cache["breaks"] == 0
    assert " s1 " in run("replay", str(path), "--full").stdout


def test_an_unknown_session_id_names_the_agents_homes_it_looked_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home(tmp_path, monkeypatch)
    _placed(home, "codex", [(1000, 0, 10)])
    _placed(home, "pi", [(1000, 0, 10)])
    result = run("replay", "c37652eb")
    assert result.exit_code == 1
    error = result.stderr.strip()
    for folder in (home / ".codex" / "sessions", home / ".pi" / "agent" / "sessions"):
        assert f"{folder}/ (1 session(s) there)" in error


def test_a_request_the_replay_left_whole_is_the_recorded_figure(tmp_path: Path) -> None:
    # Two prompts in a row: the log sends them joined, the history keeps them apart, and the
    # two are estimated a little differently; a view that is the whole conversation is still
    # the provider's own count.
    from .test_claude_code_log import Log, usage_of

    path = (
        Log()
        .user("Look at the failing test in tests/test_app.py, please.")
        .user("And check src/app.py while you are there.")
        .response("msg_1", {"type": "text", "text": "On it."}, usage=usage_of(10, 3000, 0, 5))
        .user("thanks")
        .response("msg_2", {"type": "text", "text": "done"}, usage=usage_of(12, 40, 3000, 5))
        .write(tmp_path / "s.jsonl")
    )  # fmt: skip
    document = run_json("replay", str(path))
    assert not document["compactions"]
    recorded = [r["occupancy"] for r in document["cache"]["requests"]]
    assert [r["request_tokens"] for r in document["requests"]] == recorded
