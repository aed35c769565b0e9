"""Reading a session directory and replaying it with its recorded settings.

Every behaviour runs on session directories built here in ``tmp_path`` with the real layout
(``transcript.jsonl``, ``metadata.json``, ``events.jsonl`` at the top level or in a hook's
subfolder), so a clone without ``../shared`` still tests the readers; the last tests check the
real recorded session when it is there.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.replay.engine.engine import replay
from amplifier_module_context_simple.replay.engine.report import ReplayReport
from amplifier_module_context_simple.replay.engine.session_settings import add_budget_setting
from amplifier_module_context_simple.replay.output.settings_text import render_settings
from amplifier_module_context_simple.replay.recordings.known_windows import (
    KNOWN_WINDOWS,
    is_on,
    known_window,
)
from amplifier_module_context_simple.replay.recordings.session_dir import (
    RecordedUsage,
    SessionError,
    find_session,
    read_session,
    system_text,
)

from .cli_runs import run, run_json

REAL_SESSION = Path(__file__).resolve().parents[3] / "shared" / "sessions" / "opus-session-recall"
SYSTEM = "You are the recorded system prompt. " * 40
MODEL = "claude-opus-4-8"


def settings_of(report: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    return {s["name"]: (s["value"], s["source"]) for s in report["source"]["settings"]}


# --- building a session directory ----------------------------------------------------------


def conversation(turns: int) -> list[dict[str, Any]]:
    """``turns`` user prompts, each answered by a tool round and a reply: 2 requests a turn."""
    messages: list[dict[str, Any]] = []
    for t in range(turns):
        messages += [
            {"role": "user", "content": f"Question {t}: " + "why? " * 30, "timestamp": "t"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"Looking ({t})."}],
                "tool_calls": [{"id": f"call_{t}", "tool": "bash", "arguments": {"cmd": "ls"}}],
                "timestamp": "t",
            },
            {
                "role": "tool",
                "tool_call_id": f"call_{t}",
                "name": "bash",
                "content": "file.txt\n" * 50,
                "timestamp": "t",
            },
            {"role": "assistant", "content": f"Answer {t}: " + "because. " * 30, "timestamp": "t"},
        ]
    return messages


def event(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "ts": "2026-07-08T17:03:33+00:00",
        "lvl": "INFO",
        "schema": {"name": "amplifier.log", "ver": "1.0.0"},
        "event": name,
        "session_id": "s-1",
        "data": data,
    }


def session_config(
    config: dict[str, Any] | None = None,
    *,
    module: str = "context-simple",
    provider: dict[str, Any] | None = None,
) -> dict[str, Any]:
    provider_config = provider if provider is not None else {
        "default_model": MODEL,
        "enable_1m_context": "true",
    }  # fmt: skip
    if config is None:
        config = {"auto_compact": True, "compact_threshold": 0.8, "max_tokens": 300_000}
    return event(
        "session:config",
        {
            "raw": {
                "session": {"context": {"module": module, "config": config}},
                "providers": [{"module": "provider-anthropic", "config": provider_config}],
            }
        },
    )


def request_events(
    count: int, *, model: str | None = MODEL, usage: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(count):
        raw: dict[str, Any] = {
            "system": [{"type": "text", "text": SYSTEM + str(n), "cache_control": {}}],
            "tools": [],
            "messages": [],
            "max_tokens": 128_000,
        }
        request: dict[str, Any] = {"provider": "anthropic", "raw": raw}
        if model is not None:
            request["model"] = model
        out.append(event("llm:request", request))
        reading = usage[n] if usage else {
            "input_tokens": 1_000 + n, "cache_read_tokens": 900, "cache_write_tokens": 50,
            "output_tokens": 10,
        }  # fmt: skip
        out.append(event("llm:response", {"model": model, "usage": reading}))
    return out


def write_lines(path: Path, items: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join((i if isinstance(i, str) else json.dumps(i)) + "\n" for i in items),
        encoding="utf-8",
    )
    return path


def make_session(
    directory: Path,
    *,
    turns: int = 2,
    events: list[Any] | None = None,
    events_at: str | None = "context-intelligence",
    metadata: str | None = None,
) -> Path:
    """A session directory; ``events_at``: the events' subfolder ("": top level, None: none)."""
    write_lines(directory / "transcript.jsonl", conversation(turns))
    if metadata is not None:
        (directory / "metadata.json").write_text(metadata, encoding="utf-8")
    if events_at is not None:
        default = [session_config(), *request_events(2 * turns)]
        folder = directory / events_at if events_at else directory
        write_lines(folder / "events.jsonl", events if events is not None else default)
    return directory


# --- reading -------------------------------------------------------------------------------


def test_a_session_with_events_in_a_hook_subfolder_is_read_whole(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", metadata='{"model": "meta-model", "turn_count": 2}')
    session = read_session(directory)
    assert session.events == directory / "context-intelligence" / "events.jsonl"
    assert session.metadata == {"model": "meta-model", "turn_count": 2}
    assert session.context_module == "context-simple"
    assert session.context_config["max_tokens"] == 300_000
    assert session.provider_module == "provider-anthropic"
    assert session.provider_config["enable_1m_context"] == "true"
    assert session.model == MODEL  # the requests' model beats metadata's
    assert session.request_count == 4 and len(session.usages) == 4
    assert [u.occupancy for u in session.usages if u] == [1_050, 1_051, 1_052, 1_053]
    assert session.max_output_tokens == 128_000
    requests = list(session.requests())
    assert [r.number for r in requests] == [1, 2, 3, 4]
    assert system_text(requests[2].payload) == SYSTEM + "2"
    assert requests[2].usage == session.usages[2]
    assert len(list(session.requests())) == 4  # streamed again on every call


def test_events_at_the_top_level_are_found(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", events_at="")
    assert read_session(directory).events == directory / "events.jsonl"


def test_of_several_events_files_the_one_with_requests_is_read_and_named(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", events_at="hooks-b")
    write_lines(directory / "events.jsonl", [session_config(), event("session:end", {})])
    session = read_session(directory)
    assert session.events == directory / "hooks-b" / "events.jsonl"
    assert any("hooks-b/events.jsonl" in n and "llm:request" in n for n in session.notes)
    report = run_json("replay", str(directory))
    assert report["source"]["events"] == "hooks-b/events.jsonl"
    assert report["source"]["recorded_match"] == {"recorded": 4, "replayed": 4, "matched": 4}


def test_a_response_without_usage_leaves_its_request_without_one(tmp_path: Path) -> None:
    events = [
        session_config(),
        event("llm:request", {"model": MODEL, "raw": {"system": "plain system text"}}),
        event("llm:response", {"model": MODEL}),
        event("llm:request", {"model": MODEL, "raw": {}}),
    ]
    session = read_session(make_session(tmp_path / "s", events=events))
    assert session.usages == [None, None]
    first, second = session.requests()
    assert system_text(first.payload) == "plain system text" and system_text(second.payload) is None


def test_unusable_events_lines_are_skipped_and_counted_or_fatal_when_strict(
    tmp_path: Path,
) -> None:
    events: list[Any] = [session_config(), "not json", "[1, 2]", {"event": "x", "data": 3}]
    events += request_events(4)
    directory = make_session(tmp_path / "s", events=events)
    session = read_session(directory)
    assert [e.line_number for e in session.skipped] == [2, 3, 4]
    assert session.request_count == 4
    with pytest.raises(SessionError, match="line 2"):
        read_session(directory, strict=True)
    result = run("replay", "--full", str(directory), "--strict")
    assert result.exit_code == 1 and "line 2" in result.stderr and "Traceback" not in result.stderr
    report = run_json("replay", str(directory))
    assert [s["line"] for s in report["source"]["skipped_event_lines"]] == [2, 3, 4]


def test_unreadable_metadata_is_empty_with_a_note(tmp_path: Path) -> None:
    session = read_session(make_session(tmp_path / "s", metadata="{not json"))
    assert session.metadata == {}
    assert any("metadata.json" in n for n in session.notes)


def test_a_directory_without_a_transcript_is_not_a_session(tmp_path: Path) -> None:
    assert find_session(str(tmp_path)) is None
    with pytest.raises(SessionError, match=r"no transcript\.jsonl"):
        read_session(tmp_path)


@given(
    st.one_of(st.none(), st.integers(0, 10**9)),
    st.one_of(st.none(), st.integers(0, 10**9)),
)
def test_occupancy_is_gross_input_plus_cache_writes(
    input_tokens: int | None, writes: int | None
) -> None:
    usage = RecordedUsage.from_mapping(
        {"input_tokens": input_tokens, "cache_write_tokens": writes, "cache_read_tokens": 7}
    )
    if input_tokens is None:
        assert usage.occupancy is None
    else:
        # Cache reads are already inside the gross input: never added again.
        assert usage.occupancy == input_tokens + (writes or 0)


# --- finding a session by id ---------------------------------------------------------------


def test_a_session_id_is_found_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    sessions = tmp_path / ".amplifier" / "projects" / "proj-a" / "sessions"
    directory = make_session(sessions / "c37652eb-ec4c-4cb5")
    monkeypatch.chdir(tmp_path)
    assert find_session("c37652eb-ec4c-4cb5") == directory
    assert find_session("c37652eb") == directory  # the start of an id is enough
    assert find_session("no-such-id") is None
    report = run_json("replay", "c37652eb-ec4c-4cb5")
    assert report["source"]["session_directory"] == str(directory)
    assert settings_of(report)["compact_threshold"] == (0.8, "session events")


def test_an_ambiguous_id_names_its_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    projects = tmp_path / ".amplifier" / "projects"
    make_session(projects / "a" / "sessions" / "abc-1")
    make_session(projects / "b" / "sessions" / "abc-2")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SessionError, match="ambiguous") as caught:
        find_session("abc")
    assert "abc-1" in str(caught.value) and "abc-2" in str(caught.value)
    result = run("replay", "--full", "abc")
    assert result.exit_code == 1 and "ambiguous" in result.stderr and "abc-2" in result.stderr


# --- replaying with the session's settings -------------------------------------------------


def test_the_session_settings_are_replayed_with_their_sources(tmp_path: Path) -> None:
    report = run_json("replay", str(make_session(tmp_path / "s")))
    settings = settings_of(report)
    assert settings["model"] == (MODEL, "session events")
    assert settings["context_window"] == (1_000_000, "model table")
    assert settings["max_output_tokens"] == (128_000, "session events")
    assert settings["budget"] == (300_000, "session events")
    assert settings["compact_threshold"] == (0.8, "session events")
    assert settings["token_family"] == ("claude47", "session events")
    assert report["config"]["compact_threshold"] == 0.8
    # max_tokens caps the request's input; what the readings showed beyond the view comes off.
    budget = report["budget"]
    assert budget["capped"] and budget["learned_overhead_tokens"] > 0
    assert budget["effective_budget"] == 300_000 - budget["learned_overhead_tokens"]
    assert report["token_family"] == "claude47"
    assert report["source"]["ignored_config_keys"] == ["auto_compact"]
    assert {s["source"] for s in report["source"]["settings"]} <= {
        "session events", "model table", "flag", "default",
    }  # fmt: skip


def test_a_flag_overrides_a_session_value_key_by_key(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s")
    report = run_json("replay", str(directory), "--compact-threshold", "0.6")
    settings = settings_of(report)
    assert settings["compact_threshold"] == (0.6, "flag")
    assert settings["max_tokens"] == (300_000, "session events")
    assert report["config"]["compact_threshold"] == 0.6
    report = run_json("replay", str(directory), "--context-window", "250000", "--model", "gpt-4o")
    settings = settings_of(report)
    assert settings["context_window"] == (250_000, "flag")
    assert settings["model"] == ("gpt-4o", "flag")
    assert settings["token_family"] == ("o200k", "flag")
    assert settings["budget"] == (250_000 - 128_000 - 4_096, "flag")


def test_an_on_off_flag_at_its_default_still_wins_over_the_session(tmp_path: Path) -> None:
    recorded = {"compaction_notice_enabled": False, "max_tokens": 300_000}
    events = [session_config(recorded), *request_events(4)]
    directory = make_session(tmp_path / "s", events=events)
    assert run_json("replay", str(directory))["config"]["compaction_notice_enabled"] is False
    report = run_json("replay", str(directory), "--notice")
    assert report["config"]["compaction_notice_enabled"] is True
    assert settings_of(report)["compaction_notice_enabled"] == (True, "flag")


def test_a_recorded_budget_event_gives_the_window(tmp_path: Path) -> None:
    budget = {"source": "provider_model_info", "context_window": 400_000,
              "max_output_tokens": 32_000, "effective_budget": 379_904}  # fmt: skip
    events = [session_config({}), event("context:budget", budget), *request_events(4)]
    report = run_json("replay", str(make_session(tmp_path / "s", events=events)))
    settings = settings_of(report)
    assert settings["context_window"] == (400_000, "session events")
    assert settings["max_output_tokens"] == (32_000, "session events")
    assert settings["budget"] == (400_000 - 32_000 - 4_096, "session events")


def test_an_unknown_model_without_a_flag_runs_on_the_default_budget(tmp_path: Path) -> None:
    events = [session_config(provider={}), *request_events(4, model="mystery-model-9")]
    report = run_json("replay", str(make_session(tmp_path / "s", events=events)))
    settings = settings_of(report)
    assert settings["model"] == ("mystery-model-9", "session events")
    assert settings["context_window"] == (None, "default")
    assert settings["budget"] == (200_000, "default")  # max_tokens_fallback, under the cap
    assert settings["token_family"] == (None, "default")
    assert report["budget"]["source"] == "max_tokens_fallback"


def test_another_context_module_is_warned_about_and_its_config_not_used(tmp_path: Path) -> None:
    events = [
        session_config({"compact_threshold": 0.5}, module="context-persistent"),
        *request_events(4),
    ]
    directory = make_session(tmp_path / "s", events=events)
    result = run("replay", str(directory), "--json")
    assert result.exit_code == 0
    assert "context-persistent" in result.stderr
    report = json.loads(result.stdout)
    assert report["config"]["compact_threshold"] == ContextConfig().compact_threshold
    assert "compact_threshold" not in settings_of(report)


def test_an_invalid_recorded_value_falls_back_to_the_default_with_a_warning(
    tmp_path: Path,
) -> None:
    events = [session_config({"compact_threshold": 7, "max_tokens": 300_000}), *request_events(4)]
    result = run("replay", str(make_session(tmp_path / "s", events=events)), "--json")
    assert result.exit_code == 0 and "compact_threshold" in result.stderr
    report = json.loads(result.stdout)
    assert report["config"]["compact_threshold"] == ContextConfig().compact_threshold
    assert settings_of(report)["max_tokens"] == (300_000, "session events")


def test_without_an_events_file_the_transcript_is_replayed_on_defaults(tmp_path: Path) -> None:
    report = run_json("replay", str(make_session(tmp_path / "s", events_at=None)))
    settings = settings_of(report)
    assert "session_directory" not in report["source"]
    assert settings["context_window"] == (None, "default")
    assert settings["budget"] == (200_000, "default")
    assert report["summary"]["requests"] == 4


# --- the recorded requests in the replay ---------------------------------------------------


def test_each_request_carries_its_recorded_system_prompt(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s")
    for at in (1, 3):
        result = run("inspect", str(directory), "--at", str(at), "--json")
        assert result.exit_code == 0, result.stderr
        view = json.loads(result.stdout)["view"]
        assert view[0] == {
            "role": "system",
            "content": SYSTEM + str(at - 1),
            "metadata": {"source": "system-prompt-factory"},
        }


def test_the_recorded_usage_reaches_the_meter(tmp_path: Path) -> None:
    # In actual mode the trigger compares the provider's reading: a recorded reading over the
    # trigger makes the next request compact, though our estimate of the view is tiny.
    big = {"input_tokens": 290_000, "cache_read_tokens": 0, "cache_write_tokens": 0}
    events = [session_config(), *request_events(8, usage=[big] * 8)]
    directory = make_session(tmp_path / "s", turns=4, events=events)
    actual = run_json("replay", str(directory), "--token-meter", "actual")
    assert actual["summary"]["compactions"] >= 1
    estimate = run_json("replay", str(directory))
    assert estimate["summary"]["compactions"] == 0


def test_more_or_fewer_recorded_requests_are_reported(tmp_path: Path) -> None:
    fewer = make_session(tmp_path / "fewer", events=[session_config(), *request_events(3)])
    report = run_json("replay", str(fewer))
    assert report["source"]["recorded_match"] == {"recorded": 3, "replayed": 4, "matched": 3}
    # The fourth is named by the Partial session line (not_recorded_requests), not warned twice.
    assert report["summary"]["not_recorded_requests"] == [4]
    assert not any("recorded 3 request(s)" in w["message"] for w in report["warnings"])
    more = make_session(tmp_path / "more", events=[session_config(), *request_events(6)])
    report = run_json("replay", str(more))
    assert report["source"]["recorded_match"] == {"recorded": 6, "replayed": 4, "matched": 4}
    assert any("the first 4 were matched" in w["message"] for w in report["warnings"])
    exact = run_json("replay", str(make_session(tmp_path / "exact")))
    assert not any("recorded" in w["message"] for w in exact["warnings"])


def test_the_settings_block_fits_80_columns(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s")
    session = read_session(directory)
    result = run("replay", str(directory), "--json")
    report_json = json.loads(result.stdout)
    outcome = asyncio.run(
        replay(
            conversation(2),
            config=ContextConfig(max_tokens=300_000),
            window=None,
            source=report_json["source"],
            recorded=session.requests(),
        )
    )
    console = Console(width=80, record=True)
    render_settings(console, outcome.report)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    for needle in ("1,000,000", "model table", "session events", "300,000", "auto_compact"):
        assert needle in text
    assert "…" not in text


# --- the known windows ---------------------------------------------------------------------


def test_the_1m_window_needs_the_provider_flag_in_any_recorded_form() -> None:
    for on in (True, "true", "TRUE", " True "):
        window = known_window(MODEL, {"enable_1m_context": on})
        assert window is not None and window.context_window == 1_000_000
    for off in (False, "false", None, "no", 1):
        window = known_window(MODEL, {"enable_1m_context": off})
        assert window is not None and window.context_window == 200_000
    assert known_window("claude-sonnet-4-5-20250929", {}) is not None
    sonnet46 = known_window("claude-sonnet-4-6", {"enable_1m_context": "true"})
    assert sonnet46 is not None and (sonnet46.context_window, sonnet46.max_output_tokens) == (
        1_000_000, 128_000,
    )  # fmt: skip
    sonnet45 = known_window("claude-sonnet-4-5-20250929", {})
    assert sonnet45 is not None and sonnet45.max_output_tokens == 64_000
    assert known_window("openai/gpt-4o-mini") == known_window("gpt-4o")
    gpt5 = known_window("gpt-5")
    assert gpt5 is not None and (gpt5.context_window, gpt5.max_output_tokens) == (400_000, 128_000)
    assert known_window("mystery-model") is None and known_window(None) is None


@given(
    st.sampled_from([w.model_prefix for w in KNOWN_WINDOWS]),
    st.text(st.characters(blacklist_characters="/"), max_size=12),
)
def test_turning_a_flag_on_never_shrinks_a_known_window(prefix: str, suffix: str) -> None:
    off = known_window(prefix + suffix, {})
    on = known_window(prefix + suffix, {"enable_1m_context": "true"})
    assert off is not None and on is not None  # any name a known prefix begins is known
    assert on.context_window >= off.context_window
    assert is_on("true") and not is_on("false")


# --- the real session ----------------------------------------------------------------------

needs_real_session = pytest.mark.skipif(
    not (REAL_SESSION / "transcript.jsonl").is_file(), reason="../shared/sessions is not available"
)


@needs_real_session
def test_the_real_session_is_read() -> None:
    session = read_session(REAL_SESSION)
    assert session.events == REAL_SESSION / "context-intelligence" / "events.jsonl"
    assert session.model == MODEL and session.request_count == 9
    assert session.context_config == {
        "auto_compact": True, "compact_threshold": 0.8, "max_tokens": 300_000,
    }  # fmt: skip
    occupancy = [u.occupancy for u in session.usages if u]
    assert occupancy[0] == 74_180 and occupancy[-1] == 79_312 and len(occupancy) == 9
    assert all(u.cache_read_tokens == 67_190 for u in session.usages[1:] if u)


@needs_real_session
def test_the_real_session_replays_on_its_300000_cap_with_sources_named() -> None:
    report = run_json("replay", str(REAL_SESSION))
    settings = settings_of(report)
    assert settings["budget"] == (300_000, "session events")
    assert settings["context_window"] == (1_000_000, "model table")
    assert settings["compact_threshold"] == (0.8, "session events")
    assert settings["token_family"] == ("claude47", "session events")
    # The cap is on the request's input: what the readings show beyond the replayed view
    # (the 30,312 tokens of tool definitions, 6,472 of hook injections) comes off it.
    budget = report["budget"]
    aside = budget["tool_definitions_tokens"] + budget["learned_overhead_tokens"]
    assert 30_312 + 6_000 <= aside <= 30_312 + 6_472 + 2_000
    assert report["summary"]["budget"] == 300_000 - aside and report["summary"]["budget_capped"]
    assert report["source"]["recorded_match"] == {"recorded": 9, "replayed": 9, "matched": 9}
    assert report["source"]["ignored_config_keys"] == ["auto_compact"]
    result = run("replay", "--full", str(REAL_SESSION))
    assert "model table" in result.stdout and "session events" in result.stdout
    # The Budget line: the parts with the replay's figures, the first request's beside them.
    out = " ".join(result.stdout.split())
    assert (
        f"Budget {budget['effective_budget']:,} tokens for the messages at the last request = "
        "min(simulated 1,000,000-token window - 128,000 output held back - 4,096 margin, "
        "max_tokens 300,000 (session events)) - 30,312 tool definitions - "
        f"{budget['learned_overhead_tokens']:,} learned overhead"
    ) in out
    assert "the first request's: 269,688 (the same limit - 30,312 tool definitions - 0" in out
    assert "300,000 (whole request, max_tokens cap)" in out


def test_strict_reads_only_the_events_file_it_replays(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", events_at="hooks-b")
    write_lines(directory / "hooks-a" / "events.jsonl", ["not json", event("session:end", {})])
    session = read_session(directory, strict=True)
    assert session.events == directory / "hooks-b" / "events.jsonl"


def test_the_settings_table_names_the_first_request_budget_when_it_differs() -> None:
    first = {"source": "provider_defaults", "context_window": 100_000, "reserved_output": 8_000,
             "safety_margin": 4_096, "effective_budget": 87_904, "capped": False,
             "request_budget": 87_904}  # fmt: skip
    # A later request asked for less output: its request budget is larger.
    last = {**first, "reserved_output": 4_000, "effective_budget": 81_904,
            "tool_definitions_tokens": 10_000, "request_budget": 91_904}  # fmt: skip
    source: dict[str, Any] = {
        "settings": [{"name": "context_window", "value": 100_000, "source": "flag"}]
    }
    add_budget_setting(source, last, first)
    (entry,) = [s for s in source["settings"] if s["name"] == "budget"]
    assert entry == {"name": "budget", "value": 91_904, "source": "flag", "first": 87_904}
    report = ReplayReport(source=source, config=ContextConfig(), window=None, budget_event=last)
    console = Console(width=120, record=True, highlight=False)
    render_settings(console, report)
    text = " ".join(console.export_text().split())
    assert "91,904 (whole request, last request; the first: 87,904)" in text
    add_budget_setting(source, last, last)
    assert "first" not in next(s for s in source["settings"] if s["name"] == "budget")


def test_the_resumes_a_session_made_are_counted_and_reported(tmp_path: Path) -> None:
    turns = 2
    events = [
        event("session:start", {}),
        session_config(),
        *request_events(turns),
        event("session:resume", {}),
        *request_events(turns),
        event("session:start", {}),
        *request_events(turns),
    ]
    directory = make_session(tmp_path / "s", turns=turns, events=events)
    assert read_session(directory).resumes == 2
    report = run_json("replay", str(directory))
    assert report["source"]["resumes"] == 2
    out = run("replay", "--full", str(directory)).stdout
    assert "Resumed 2 time(s)" in " ".join(out.split())


def test_a_session_never_resumed_says_nothing_of_resumes(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s")
    assert read_session(directory).resumes == 0
    assert "Resumed" not in run("replay", "--full", str(directory)).stdout
