"""After an agent's own compaction the replay sends what the agent sent: its summary onward.

The generated Codex, Pi and Claude Code logs (``agent_log_writers``, ``test_claude_code_log``)
always run; ``claudecode-compact.jsonl`` of ``../shared/logs`` runs when it is there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import agent_log_writers as write
from .cli_runs import run, run_json
from .test_agent_logs import LOGS_DIR

SUMMARY = "Summary: files read so far."
_usage = st.tuples(st.integers(2_000, 40_000), st.integers(0, 40_000), st.integers(1, 2_000))
_cases = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _texts(messages: list[dict[str, Any]]) -> str:
    return json.dumps([m.get("content") for m in messages if m.get("role") != "system"])


def _log(folder: Path, kind: str, usages: list[write.Usage], compact_after: int) -> Path:
    if kind == "codex":
        return write.codex(folder / "rollout.jsonl", usages, compact_after=compact_after)
    return write.pi(folder / "pi.jsonl", usages, compact_after=compact_after, branch=False)


@pytest.mark.parametrize("kind", ["codex", "pi"])
@_cases
@given(usages=st.lists(_usage, min_size=2, max_size=5), data=st.data())
def test_after_the_agents_compaction_the_views_hold_its_summary_onward(
    tmp_path: Path, kind: str, usages: list[write.Usage], data: st.DataObject
) -> None:
    compact_after = data.draw(st.integers(1, len(usages) - 1))
    path = _log(tmp_path / f"{kind}-{len(list(tmp_path.iterdir()))}", kind, usages, compact_after)
    document = run_json("replay", str(path))
    summary = document["summary"]
    assert summary["requests"] == document["source"]["recorded_requests"] == len(usages)
    if not document["compactions"]:  # the replay compacted nothing: the agent's own figures
        assert summary["peak_request_tokens"] == write.largest(usages)
        # What the agent left behind is no token the replay saved.
        assert summary["tokens_saved"] == 0
        after = document["requests"][compact_after:]
        assert [r["request_tokens"] for r in after] == [f + r for f, r, _ in usages[compact_after:]]
    assert summary["invalid_views"] == summary["host_invalid_views"] == 0
    # The request right after the boundary: its view starts at the summary, and none of what
    # came before it (the prompt, the files read) is sent again.
    before = run_json("inspect", str(path), "--at", str(compact_after))["view"]
    view = run_json("inspect", str(path), "--at", str(compact_after + 1))["view"]
    conversation = [m for m in view if m.get("role") != "system"]
    assert SUMMARY in json.dumps(conversation[0]["content"])
    assert "make a file" in _texts(before)
    assert "make a file" not in _texts(view)
    assert f"file{compact_after}" not in _texts(view) and f"file {compact_after}" not in _texts(
        view
    )


def _claude_code_log(path: Path, *, compacted: bool) -> Path:
    from .test_claude_code_log import Log, usage_of

    log = Log().user("read the big file").response(
        "msg_1", {"type": "text", "text": "it says " + "words " * 2_000},
        usage=usage_of(3_000, 0, 0, 2_000),
    )  # fmt: skip
    if compacted:
        log = log.other("system", subtype="compact_boundary", content="Conversation compacted",
                        compactMetadata={"trigger": "auto", "preTokens": 5_000})  # fmt: skip
    summary = {"isCompactSummary": True} if compacted else {}
    log = log.user("Summary: read the big file.", **summary)
    done = {"type": "text", "text": "done"}
    return log.response("msg_2", done, usage=usage_of(400, 0, 0, 5)).write(path)


def test_a_claude_code_log_sends_from_its_summary_after_its_boundary(tmp_path: Path) -> None:
    path = _claude_code_log(tmp_path / "s.jsonl", compacted=True)
    document = run_json("replay", str(path))
    first, second = document["requests"]
    assert document["summary"]["requests"] == 2
    assert not document["compactions"]
    assert (first["request_tokens"], second["request_tokens"]) == (3_000, 400)
    # Both recorded readings were the conversation the replay sent: both reached the meter.
    assert document["source"]["recorded_readings"]["withheld"] == 0
    view = run_json("inspect", str(path), "--at", "2")["view"]
    assert "Summary: read the big file." in _texts(view)
    assert "words words" not in _texts(view)
    assert second["history_messages"] == 1
    # The same messages with no boundary between them: the same history, counted once each.
    whole = run_json("replay", str(_claude_code_log(tmp_path / "w.jsonl", compacted=False)))
    assert whole["summary"]["history_tokens"] == document["summary"]["history_tokens"]
    assert whole["requests"][1]["history_messages"] == 3


@pytest.mark.skipif(
    not (LOGS_DIR / "claudecode-compact.jsonl").is_file(), reason="needs ../shared/logs"
)
def test_claudecode_compact_keeps_its_requests_and_whole_history() -> None:
    path = LOGS_DIR / "claudecode-compact.jsonl"
    document = run_json("replay", str(path))
    summary = document["summary"]
    assert summary["requests"] == document["source"]["recorded_requests"]
    # Every stored message is counted once in the history, either side of the boundary.
    history = summary["history_tokens"]
    assert history > max(r["history_tokens"] for r in document["requests"])
    assert summary["invalid_views"] == 0


def test_inspect_places_each_message_among_the_logs_across_the_boundary(tmp_path: Path) -> None:
    usages = [(3_000, 0, 5)] * 6
    path = write.codex(tmp_path / "rollout.jsonl", usages, compact_after=3)
    # A cap small enough that the replay compacts on both sides of the agent's compaction.
    document = run_json("replay", str(path), "--max-tokens", "300")
    starts = [r["at_message"] - r["history_messages"] for r in document["requests"]]
    assert starts[:3] == [0, 0, 0] and len(set(starts[3:])) == 1 and starts[3] > 0
    boundary = starts[3]
    after = [d for d in document["drops"] if d["request"] > 3]
    assert after, "the cap left something out after the boundary"
    # Each change names the message's place in the log, as --why takes it.
    for drop in after:
        assert drop["position"] >= boundary
        why = run_json("inspect", str(path), "--max-tokens", "300", "--why", str(drop["position"]))
        assert drop in why["changes"]
    # What came before the boundary is the agent's doing, said as such, never the view's.
    words = " ".join(run("inspect", str(path), "--why", "1").stdout.split())
    assert "never left the view: whole in every view, requests 1-3" in words
    assert "request 4: left behind by the agent's own compaction" in words
    view = " ".join(run("inspect", str(path), "--at", "5").stdout.split())
    assert f"3 of 3 history messages (from message {boundary} on" in view
    assert "Left out of this view (0): nothing" in view
