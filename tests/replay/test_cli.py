"""The ``context-simple`` command, driven through Typer's runner (and once as a subprocess)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import Result

from amplifier_module_context_simple import ContextConfig, SimpleContextManager, check_view
from amplifier_module_context_simple.replay.command import cli as cli_module
from amplifier_module_context_simple.replay.command import inputs as inputs_module
from amplifier_module_context_simple.replay.engine import engine as engine_module
from amplifier_module_context_simple.replay.engine.engine import ReplayError, replay
from amplifier_module_context_simple.replay.engine.host_check import (
    HOST_CHECK_NOT_RUN,
    HOST_CHECK_RUN,
)
from amplifier_module_context_simple.replay.recordings.transcripts import LoadedTranscript

from ..conftest import CORPUS_DIR
from . import json_doc
from .cli_runs import run, run_json

CORPUS_FILES = sorted(CORPUS_DIR.glob("*.jsonl")) if CORPUS_DIR.is_dir() else []
SMALL = ["--messages", "120"]  # a shorter built-in example where speed matters


def assert_one_line_error(result: Result, *needles: str, code: int = 1) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    error = result.stderr.strip()
    assert "Traceback" not in result.stderr + result.stdout
    assert error.startswith("context-simple: error: ")
    assert "\n" not in error, error
    for needle in needles:
        assert needle in error


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


CHAT = [
    json.dumps({"role": "user", "content": "List the files, please."}),
    json.dumps(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        }
    ),
    json.dumps({"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"}),
    json.dumps({"role": "assistant", "content": "There are two files."}),
]


# --- the built-in example ------------------------------------------------------------------


def test_default_replay_reports_compactions() -> None:
    result = run("replay")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "built-in example session" in out
    assert "Window 128,000 tokens (the built-in example's; see --context-window)" in out
    assert "Compactions" in out and "Prefix-stable" in out and "--full" in out
    report = run_json("replay")
    assert report["summary"]["compactions"] >= 1
    assert report["summary"]["invalid_views"] == 0


def test_json_report_has_documented_keys_and_consistent_numbers() -> None:
    report = run_json("replay")
    # The keys are docs/replay-json.md's (tests/replay/test_json_document.py holds it to the
    # documents both ways); this document must carry exactly what the doc says, with the types it
    # says.
    assert json_doc.problems(report, "replay") == []
    summary, requests, compactions = report["summary"], report["requests"], report["compactions"]
    # A bare transcript: the window by category is the replayed view's, and no cache was seen.
    assert report["cache"] is None and "cache_breaks" not in summary
    assert report["window_basis"].startswith("the replayed views only")
    assert [w["request"] for w in report["window_by_category"]] == [r["request"] for r in requests]
    for w, r in zip(report["window_by_category"], requests, strict=True):
        held = w["categories"]
        assert held["conversation messages"] + held["compaction notice"] == r["view_tokens"]
        assert held["compaction notice"] > 0 if r["notice"] else held["compaction notice"] == 0
        assert w["used"] + held["free space"] + held["kept back for output"] - w["over"] == 128_000
    assert report["source"]["format"] == "example" and report["source"]["messages"] == 400
    assert report["window"] == {
        "context_window": 128_000,
        "max_output_tokens": 16_384,
        "model": None,
    }
    assert report["budget"]["source"] == "provider_defaults"
    assert summary["budget"] == report["budget"]["effective_budget"] == 128_000 - 16_384 - 4_096

    assert summary["requests"] == len(requests) > 0
    assert [r["request"] for r in requests] == list(range(1, len(requests) + 1))
    assert summary["compactions"] == len(compactions) == sum(r["compacted"] for r in requests)
    compacted = {r["request"]: r for r in requests if r["compacted"]}
    assert [c["request"] for c in compactions] == list(compacted)
    for c in compactions:
        row = compacted[c["request"]]
        assert (c["removed"], c["truncated"], c["stubbed"]) == (
            row["removed"], row["truncated"], row["stubbed"],
        )  # fmt: skip
        assert c["after_tokens"] < c["before_tokens"]
        assert row["level"] >= 1 and row["notice"]
    assert summary["prefix_stable_requests"] == sum(r["prefix_stable"] for r in requests)
    # Sticky decisions: between escalations the prompt prefix never changes.
    assert all(r["prefix_stable"] for r in requests if not r["compacted"])
    assert summary["max_utilisation"] == max(r["utilisation"] for r in requests)
    assert summary["peak_view_tokens"] == max(r["view_tokens"] for r in requests)
    # What the view added (its system prompt, placeholders, the notice) is no history sent.
    assert summary["tokens_saved"] == sum(
        r["history_tokens"] - (r["view_tokens"] - r["system_prompt_tokens"] - r["added_tokens"])
        for r in requests
    )
    assert summary["history_tokens"] >= requests[-1]["history_tokens"]
    for r in requests:
        assert r["request_tokens"] == r["view_tokens"] + r["overhead_tokens"]
        assert r["utilisation"] == round(r["request_tokens"] / r["request_budget"], 4)
        assert r["history_messages"] == r["at_message"]  # a request comes before its message
    assert all(r["view_tokens"] < summary["budget"] for r in requests[1:])


def test_requests_table_and_example_options() -> None:
    result = run(
        "replay", "--full", *SMALL, "--seed", "3", "--context-window", "32000", "--requests"
    )
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "Requests" in out and "32,000-token window" in out
    assert "built-in example's default window" not in out


# --- transcripts --------------------------------------------------------------------------


@pytest.mark.skipif(not CORPUS_FILES, reason="../shared/corpus is not available")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_corpus_transcripts_replay_with_valid_views(path: Path) -> None:
    report = run_json("replay", str(path), "--max-tokens", "8000")
    summary = report["summary"]
    assert report["source"]["format"] == "openai-chat"
    assert summary["messages"] == report["source"]["messages"] > 0
    if any(r["view_tokens"] > 8000 or r["history_tokens"] > 8000 for r in report["requests"]):
        assert summary["compactions"] >= 1
    # Views are valid; the exceptions are a tool-call id the transcript itself reuses and (until
    # issue 12's projection lands) an image_url part the host's Message model refuses.
    reused = {i for i, n in _call_id_counts(path).items() if n > 1}
    assert report["summary"]["host_check"] == "run"
    for r in report["requests"]:
        assert r["host_valid"] is not None
        for violation in r["violations"]:
            if "host's Message model refuses" in violation:
                assert "'image_url'" in violation, violation
                continue
            assert "already declared" in violation, violation
            assert any(repr(i) in violation for i in reused), violation
        if not r["compacted"]:
            assert r["prefix_stable"]


def _call_id_counts(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        for call in json.loads(line).get("tool_calls") or []:
            counts[call["id"]] += 1
    return counts


@pytest.mark.skipif(not CORPUS_FILES, reason="../shared/corpus is not available")
def test_corpus_compacts_somewhere() -> None:
    big = max(CORPUS_FILES, key=lambda p: p.stat().st_size)
    result = run("replay", "--full", str(big), "--max-tokens", "8000")
    assert result.exit_code == 0, result.stderr
    assert run_json("replay", str(big), "--max-tokens", "8000")["summary"]["compactions"] >= 1


def test_stdin_and_session_directory(tmp_path: Path) -> None:
    report = json.loads(run("replay", "-", "--json", input="\n".join(CHAT) + "\n").stdout)
    assert report["source"]["name"] == "standard input"
    assert report["summary"]["requests"] == 2
    session = tmp_path / "sessions" / "abc"
    session.mkdir(parents=True)
    rows = [{**json.loads(line), "timestamp": "2026-01-01T00:00:00Z"} for line in CHAT]
    for row in rows:
        if row.get("content") is None:
            del row["content"]
    (session / "transcript.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = run_json("replay", str(session), "--context-window", "200000", "--model", "gpt-4o")
    assert report["source"]["format"] == "amplifier"
    assert report["token_family"] == "o200k"
    assert report["budget"]["source"] == "provider_defaults"


# --- inspect -------------------------------------------------------------------------------


def test_inspect_shows_the_view_at_a_compacted_request() -> None:
    report = run_json("replay", *SMALL, "--context-window", "32000")
    target = report["compactions"][0]["request"]
    record = report["requests"][target - 1]
    result = run("inspect", *SMALL, "--context-window", "32000", "--at", str(target))
    assert result.exit_code == 0, result.stderr
    assert f"Request {target}" in result.stdout
    assert "notice" in result.stdout and "Left out of this view" in result.stdout
    assert "truncated" in result.stdout or record["truncated"] == 0

    as_json = run("inspect", *SMALL, "--context-window", "32000", "--at", str(target), "--json")
    document = json.loads(as_json.stdout)
    assert document["request"] == target
    view = document["view"]
    assert len(view) == record["view_messages"]
    assert view[-1]["metadata"]["source"] == "context-compaction"
    assert check_view(view) == []


@pytest.mark.skipif(not CORPUS_FILES, reason="../shared/corpus is not available")
def test_inspect_a_corpus_transcript() -> None:
    path = CORPUS_DIR / "openhands-ponylang__ponyc-4593.jsonl"
    if not path.exists():
        pytest.skip("corpus file missing")
    result = run("inspect", str(path), "--at", "20", "--max-tokens", "8000")
    assert result.exit_code == 0, result.stderr
    assert "assistant" in result.stdout and "tool" in result.stdout


def test_inspect_past_the_end_is_one_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", CHAT)
    assert_one_line_error(run("inspect", str(path), "--at", "3"), "--at 3", "2 request(s)")
    assert_one_line_error(run("inspect", str(path), "--at", "0"), "--at")


# --- bad input -----------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    assert_one_line_error(run("replay", "--full", str(missing)), "no such file", str(missing))


def test_non_json_line_is_reported_and_the_rest_replayed(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [*CHAT[:2], "{not json", *CHAT[2:]])
    result = run("replay", str(path), "--json")
    assert result.exit_code == 0, result.stderr
    assert "line 3" in result.stderr and "invalid JSON" in result.stderr
    report = json.loads(result.stdout)
    assert report["source"]["skipped_lines"][0]["line"] == 3
    assert report["summary"]["messages"] == 4 and report["summary"]["requests"] == 2


def test_strict_fails_on_the_bad_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [*CHAT[:2], "{not json", *CHAT[2:]])
    assert_one_line_error(run("replay", "--full", str(path), "--strict"), "line 3")


def test_a_message_the_manager_rejects(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = LoadedTranscript([{"role": "user", "content": 42}], "openai-chat", [])
    monkeypatch.setattr(inputs_module, "load_transcript", lambda *a, **k: bad)
    assert_one_line_error(run("replay", "--full", "whatever.jsonl"), "message 1", "rejected")


async def test_replay_engine_refuses_a_bad_message() -> None:
    with pytest.raises(ReplayError, match="message 2 was rejected"):
        await replay(
            [{"role": "user", "content": "hi"}, {"role": "user", "tool_calls": "x"}],
            config=ContextConfig(),
            window=None,
        )


# --- what "valid" means: the strengthened check_view and the host's model ----------------


class _HostRefusedView(SimpleContextManager):
    """A manager whose views pass check_view but carry metadata the host's Message refuses."""

    async def get_messages_for_request(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        view = await super().get_messages_for_request(*args, **kwargs)
        return [{**view[-1], "metadata": {1: "non-string key"}} if i == len(view) - 1 else m
                for i, m in enumerate(view)]  # fmt: skip


CHAT_MESSAGES = [json.loads(line) for line in CHAT]


async def test_valid_column_includes_the_host_model(monkeypatch: pytest.MonkeyPatch) -> None:
    good = await replay(CHAT_MESSAGES, config=ContextConfig(), window=None)
    assert good.report.summary()["host_check"] == HOST_CHECK_RUN
    assert [(r.valid, r.host_valid) for r in good.report.requests] == [(True, True)] * 2

    monkeypatch.setattr(engine_module, "SimpleContextManager", _HostRefusedView)
    bad = (await replay(CHAT_MESSAGES, config=ContextConfig(), window=None)).report
    for r in bad.requests:
        assert check_view([{"role": "user", "content": "x", "metadata": {1: "k"}}]) == []
        assert (r.valid, r.host_valid) == (False, False)
        assert r.violations == [
            f"view[{r.view_messages - 1}]: the host's Message model refuses it: "
            "metadata.1.[key]: Input should be a valid string"
        ]
    summary = bad.summary()
    assert summary["invalid_views"] == summary["host_invalid_views"] == 2


async def test_host_refusal_names_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    class ImageUrlView(SimpleContextManager):
        async def get_messages_for_request(self, *a: Any, **k: Any) -> list[dict[str, Any]]:
            view = await super().get_messages_for_request(*a, **k)
            part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
            return [*view, {"role": "user", "content": [part], "metadata": {"source": "hook"}}]

    monkeypatch.setattr(engine_module, "SimpleContextManager", ImageUrlView)
    record = (await replay(CHAT_MESSAGES, config=ContextConfig(), window=None)).report.requests[0]
    assert record.host_valid is False
    (problem,) = [v for v in record.violations if "host" in v]
    assert problem.startswith("view[1]: the host's Message model refuses it: content.0: ")
    assert "'image_url'" in problem


async def test_check_view_sees_the_whole_history(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    checker = engine_module.ViewChecker
    original = checker.check

    def spy(self: Any, view: Any, history: Any, **kwargs: Any) -> list[str]:
        seen.append(len(history))
        found = original(self, view, history, **kwargs)
        assert found == check_view(view, history=history)
        return found

    monkeypatch.setattr(checker, "check", spy)
    messages = [{"role": "system", "content": "Be brief."}, *CHAT_MESSAGES, *CHAT_MESSAGES]
    await replay(messages, config=ContextConfig(), window=None)
    # A view before each assistant message, each checked against every message added so far.
    assert seen == [i for i, m in enumerate(messages) if m["role"] == "assistant"]


async def test_a_view_that_edits_the_last_views_final_message_is_not_prefix_stable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The manager's views are sticky, so the edit is made on its way out: at the third request
    # the message the second view ended with goes out as an edited copy, while every message
    # before it and every one added after it are the very same objects as before.
    class EditsTheTail(SimpleContextManager):
        views: ClassVar[list[list[dict[str, Any]]]] = []

        async def get_messages_for_request(self, *args: Any, **kwargs: Any) -> list[Any]:
            view = await super().get_messages_for_request(*args, **kwargs)
            if len(self.views) == 2:
                last = len(self.views[-1]) - 1
                view = [*view[:last], {**view[last], "content": "edited"}, *view[last + 1 :]]
            self.views.append(view)
            return view

    monkeypatch.setattr(engine_module, "SimpleContextManager", EditsTheTail)
    messages = [{"role": "system", "content": "Be brief."}, *CHAT_MESSAGES * 3]
    report = (await replay(messages, config=ContextConfig(), window=None)).report
    assert len(report.requests) > 4 and not any(r.notice for r in report.requests)
    # The fourth view sends the original again: a change too, and the views after it extend it.
    stable = [r.prefix_stable for r in report.requests]
    assert stable == [True, True, False, False] + [True] * (len(stable) - 4)


def _without_host(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a CLI-only install looks like: amplifier-core (a dev dependency) cannot be imported.
    monkeypatch.setitem(sys.modules, "amplifier_core.message_models", None)


async def test_without_amplifier_core_the_host_check_is_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_host(monkeypatch)
    monkeypatch.setattr(engine_module, "SimpleContextManager", _HostRefusedView)
    report = (await replay(CHAT_MESSAGES, config=ContextConfig(), window=None)).report
    assert report.summary()["host_check"] == HOST_CHECK_NOT_RUN
    assert report.summary()["host_invalid_views"] == 0
    # valid rests on check_view alone, which this view passes.
    assert [(r.valid, r.host_valid, r.violations) for r in report.requests] == [
        (True, None, [])
    ] * 2
    assert report.as_json()["requests"][0]["host_valid"] is None


def test_cli_says_when_the_host_check_was_not_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", CHAT)
    shown = run("replay", "--full", str(path))
    assert shown.exit_code == 0, shown.stderr
    shown_text = " ".join(shown.stdout.replace("│", " ").split())
    assert (
        "2 / 2 (the module's own check and amplifier-core's message model; the model refused 0)"
        in shown_text
    )
    _without_host(monkeypatch)
    result = run("replay", "--full", str(path))
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.replace("│", " ").split())
    assert "Valid views 2 / 2 (the module's own check only; amplifier-core's model not run: " \
        "amplifier-core is not installed)" in out  # fmt: skip
    assert run_json("replay", str(path))["summary"]["host_check"] == HOST_CHECK_NOT_RUN
    inspected = run("inspect", str(path), "--at", "1")
    assert inspected.exit_code == 0, inspected.stderr
    assert "host model check not run" in " ".join(inspected.stdout.split())


@pytest.mark.parametrize(
    ("args", "needle", "code"),
    [
        (["--compact-threshold", "1.5"], "--compact-threshold", 1),
        (["--compact-threshold", "abc"], "--compact-threshold", 2),
        (["--max-tokens", "0"], "--max-tokens", 1),
        (["--token-meter", "exact"], "--token-meter", 1),
        (["--token-family", "gpt2"], "--token-family", 1),
        (["--protected-tool-results", "-1"], "--protected-tool-results", 1),
        (["--max-tool-result-bytes", "10"], "--max-tool-result-bytes", 1),
        (["--notice-verbosity", "loud"], "--notice-verbosity", 1),
        (["--context-window", "0"], "--context-window", 1),
        (["--max-output-tokens", "100", "-"], "--max-output-tokens", 1),
        (["--no-such-option"], "--no-such-option", 2),
    ],
)
def test_invalid_option_values(args: list[str], needle: str, code: int) -> None:
    assert_one_line_error(run("replay", "--full", *args, input=CHAT[0]), needle, code=code)


def test_unexpected_failure_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("kaput\nsecond line")

    monkeypatch.setattr(cli_module, "replay", boom)
    result = run("replay", "--full", *SMALL)
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "context-simple: internal error: RuntimeError: kaput second line "
        "(set CONTEXT_SIMPLE_DEBUG=1 for the traceback)"
    )


# --- plot ----------------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_writes_a_chart(tmp_path: Path, suffix: str) -> None:
    chart = tmp_path / f"replay{suffix}"
    result = run("replay", "--full", *SMALL, "--context-window", "32000", "--plot", str(chart))
    assert result.exit_code == 0, result.stderr
    data = chart.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data
    assert len(data) > 10_000


def test_plot_without_matplotlib_is_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes the import fail
    chart = tmp_path / "replay.png"
    result = run("replay", "--full", "--plot", str(chart))
    assert_one_line_error(result, "matplotlib", "[plot]")
    assert result.stdout == "" and not chart.exists()


def test_plot_rejects_other_formats(tmp_path: Path) -> None:
    assert_one_line_error(
        run("replay", "--full", "--plot", str(tmp_path / "x.pdf")), ".png or .svg"
    )


# --- packaging -----------------------------------------------------------------------------


def test_console_script_and_module_entry_points() -> None:
    scripts = importlib.metadata.entry_points(group="console_scripts")
    assert [e.value for e in scripts if e.name == "context-simple"] == [
        "amplifier_module_context_simple.replay.command.cli:main"
    ]
    done = subprocess.run(
        [sys.executable, "-m", "amplifier_module_context_simple", "replay", *SMALL, "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["requests"] > 0


def test_importing_the_package_does_not_import_the_cli_dependencies() -> None:
    code = (
        "import sys, amplifier_module_context_simple; "
        "print(sorted({'typer', 'rich', 'matplotlib', 'click'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_cli_runs_where_amplifier_core_is_not_installed(tmp_path: Path) -> None:
    # A fresh interpreter in which no amplifier_core module can be imported at all, as with
    # `pip install amplifier-module-context-simple[cli]`: the report runs and says so.
    path = write_jsonl(tmp_path / "chat.jsonl", CHAT)
    code = (
        "import sys; sys.modules['amplifier_core'] = None; "
        "from amplifier_module_context_simple.replay.command.cli import main; "
        f"sys.argv = ['context-simple', 'replay', {str(path)!r}, '--json']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["host_check"] == HOST_CHECK_NOT_RUN
    assert report["summary"]["invalid_views"] == 0
    assert [r["host_valid"] for r in report["requests"]] == [None, None]
