"""Hostile recordings get a clear error or a replay, never an internal error (exit 3).

Deep JSON anywhere the tool reads (a transcript line, a session's metadata and events, an
agent log's line, a payload), nested past what the parser follows (3,000 levels) or only as
deep as the runtime admits (600 levels, which the replay's cache simulation must fingerprint
too), and recorded settings of the wrong type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from . import agent_log_writers as write
from .cli_runs import run
from .test_session_dir import (
    conversation,
    event,
    make_session,
    request_events,
    session_config,
    write_lines,
)

TOO_DEEP = 3_000
ADMITTED = 600


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def deep_text(depth: int) -> str:
    """JSON text nested ``depth`` levels (written out by hand: ``json.dumps`` would recurse)."""
    return "[" * depth + '"bottom"' + "]" * depth


DEEP = "<nested too deep>"


def with_deep(value: Any) -> str:
    """``value`` as JSON text, with :data:`DEEP` standing for a value 3,000 levels deep."""
    return json.dumps(value).replace(json.dumps(DEEP), deep_text(TOO_DEEP))


def _transcript_with(line: str, tmp: Path) -> Path:
    lines = [json.dumps(m) for m in conversation(2)]
    return write_lines(tmp / "t.jsonl", [lines[0], line, *lines[1:]])


def _deep_line(tmp: Path) -> Path:
    return _transcript_with(
        with_deep({"role": "user", "content": "x", "metadata": {"a": DEEP}}), tmp
    )


def _admitted_line(tmp: Path) -> Path:
    message = {"role": "user", "content": "x", "metadata": {"a": nested(ADMITTED)}}
    return _transcript_with(json.dumps(message), tmp)


def _admitted_arguments(tmp: Path) -> Path:
    messages = conversation(2)
    messages[1]["tool_calls"][0]["arguments"] = {"deep": nested(ADMITTED)}
    return write_lines(tmp / "t.jsonl", messages)


def _deep_metadata(tmp: Path) -> Path:
    return make_session(tmp / "s", metadata=with_deep({"a": DEEP}))


def _deep_events_line(tmp: Path) -> Path:
    deep = with_deep({"event": "llm:request", "data": {"raw": DEEP}})
    return make_session(tmp / "s", events=[session_config(), deep, *request_events(4)])


def _admitted_payload(tmp: Path) -> Path:
    requests = request_events(4)
    requests[0]["data"]["raw"]["messages"] = [
        {"role": "user", "content": [{"type": "text", "text": "q", "deep": nested(ADMITTED)}]}
    ]
    return make_session(tmp / "s", events=[session_config(), *requests])


def _string_max_tokens(tmp: Path) -> Path:
    config = session_config({"max_tokens": "300000", "compact_threshold": "0.8"})
    requests = request_events(4)
    requests[0]["data"]["raw"]["max_tokens"] = "300000"
    return make_session(tmp / "s", events=[config, *requests])


def _listed_token_meter(tmp: Path) -> Path:
    return make_session(tmp / "s", events=[session_config({"token_meter": ["actual"]}),
                                           *request_events(4)])  # fmt: skip


def _deep_agent_line(writer: Callable[[Path], Path]) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        path = writer(tmp)
        lines = path.read_text().splitlines()
        path.write_text("\n".join([*lines[:2], deep_text(TOO_DEEP), *lines[2:]]) + "\n")
        return path

    return build


def _deep_event_data(tmp: Path) -> Path:
    line = with_deep(event("context:compaction", {"deep": DEEP}))
    return make_session(tmp / "s", events=[session_config(), line, *request_events(4)])


CASES: dict[str, Callable[[Path], Path]] = {
    "transcript line 3,000 deep": _deep_line,
    "transcript line 600 deep": _admitted_line,
    "call arguments 600 deep": _admitted_arguments,
    "metadata.json 3,000 deep": _deep_metadata,
    "events line 3,000 deep": _deep_events_line,
    "event data 3,000 deep": _deep_event_data,
    "request payload 600 deep": _admitted_payload,
    "max_tokens a string": _string_max_tokens,
    "token_meter a list": _listed_token_meter,
    "codex line 3,000 deep": _deep_agent_line(
        lambda t: write.codex(t / "rollout.jsonl", [(3000, 0, 5), (3500, 0, 5)])
    ),
    "pi line 3,000 deep": _deep_agent_line(
        lambda t: write.pi(t / "pi.jsonl", [(3000, 0, 5), (3500, 0, 5)])
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["replay", "inspect", "sweep"])
def test_a_hostile_recording_is_replayed_or_refused_never_an_internal_error(
    tmp_path: Path, case: str, command: str
) -> None:
    path = CASES[case](tmp_path)
    result = run(command, str(path))
    assert result.exit_code in (0, 1), result.stderr
    assert "internal error" not in result.stderr
    if result.exit_code == 1:
        assert len(result.stderr.strip().splitlines()) == 1


def test_a_line_too_deep_to_parse_is_skipped_with_its_reason(tmp_path: Path) -> None:
    result = run("replay", str(_deep_line(tmp_path)))
    assert result.exit_code == 0
    assert "skipped line 2: JSON nested too deep to read" in result.stderr


def test_a_recorded_max_tokens_of_the_wrong_type_is_named_and_the_default_used(
    tmp_path: Path,
) -> None:
    result = run("replay", str(_string_max_tokens(tmp_path)), "--json")
    assert result.exit_code == 0
    assert "max_tokens is unusable" in result.stderr
    assert "'300000'" in result.stderr
    document = json.loads(result.stdout)
    given = {s["name"] for s in document["source"]["settings"]}
    assert "max_tokens" not in given
