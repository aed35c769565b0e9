"""The report's headline figures tell one story, and agree with the provider where it counted.

Each test drives the ``context-simple`` command (through Typer's runner) on the built-in
example, a bare transcript written here, or a Claude Code log built with the log tests' own
builder, and checks a figure against the one it must agree with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple._estimate import FAMILIES
from amplifier_module_context_simple._tool_definitions import estimate_tool_definitions
from amplifier_module_context_simple.replay.given_overhead import stand_in_definitions

from .cli_runs import run, run_json
from .test_claude_code_log import session_log, wide

SMALL = ("--messages", "160")


def transcript(tmp_path: Path, rounds: int = 3, size: int = 40) -> Path:
    """A bare transcript: one prompt, ``rounds`` tool rounds, one reply."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Survey the build. " * 20}]
    for n in range(rounds):
        messages += [
            {
                "role": "assistant",
                "content": f"Step {n}.",
                "tool_calls": [{"id": f"call_{n}", "tool": "bash", "arguments": {"n": n}}],
            },
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"output {n}\n" * size},
        ]
    messages.append({"role": "assistant", "content": "Done."})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


# --- --overhead is held back by the replayed budget ------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=14, max_value=200_000), st.sampled_from((None, *FAMILIES)))
def test_the_stand_in_for_the_overhead_is_priced_exactly_as_given(
    tokens: int, family: str | None
) -> None:
    assert estimate_tool_definitions(stand_in_definitions(tokens, family), family) == tokens


def test_the_overhead_given_is_held_back_by_the_replayed_budget() -> None:
    # The case: ~30,000 tokens of tools beside the example's 128,000-token window.
    checked = run("replay", *SMALL, "--overhead", "30000", "--check")
    assert checked.exit_code == 0, checked.stderr
    document = run_json("replay", *SMALL, "--overhead", "30000")
    budget = document["budget"]
    assert budget["tool_definitions_tokens"] == 30_000
    assert budget["effective_budget"] == budget["request_budget"] - 30_000
    summary = document["summary"]
    assert summary["over_budget_requests"] == 0 == summary["refused_views"]
    assert summary["peak_request_tokens"] <= summary["request_budget"]
    plain = run_json("replay", *SMALL)["budget"]
    assert plain["effective_budget"] == budget["effective_budget"] + 30_000
    out = run("replay", *SMALL, "--overhead", "30000").stdout
    assert "- 30,000 --overhead given - 0 learned overhead" in " ".join(out.split())


def test_a_bare_transcript_without_a_window_holds_the_overhead_back_too(tmp_path: Path) -> None:
    path = str(transcript(tmp_path))
    given_ = run_json("replay", path, "--overhead", "5000", "--max-tokens-fallback", "50000")
    assert given_["budget"]["effective_budget"] == 45_000
    assert given_["budget"]["request_budget"] == 50_000
    text = " ".join(run("replay", path, "--overhead", "5000").stdout.split())
    assert "less 5,000 --overhead given and 0 learned overhead" in text


# --- a Claude Code log's whole request is the provider's count --------------------------------


def test_a_logs_whole_request_figures_are_the_recorded_usage(tmp_path: Path) -> None:
    path = str(session_log().write(tmp_path / "s.jsonl"))
    document = run_json("replay", path)
    provider = [w["provider"] for w in document["window_by_category"]]
    assert provider == [3012, 3208, 3295]
    # Nothing compacted on either side: each whole request is what the provider counted.
    assert [r["request_tokens"] for r in document["requests"]] == provider
    summary = document["summary"]
    assert summary["peak_request_tokens"] == 3295
    assert summary["max_utilisation"] == round(3295 / summary["request_budget"], 4)
    out = " ".join(wide("replay", path).stdout.split())
    assert "Largest request (view + overhead) │ 3,295 tokens" in out
    swept = run_json("sweep", path, "--compact-threshold", "0.5,0.9")
    assert {row["peak_tokens"] for row in swept["rows"]} == {3295}
    assert {row["peak_share"] for row in swept["rows"]} == {round(3295 / 200_000, 4)}


def test_a_log_replayed_smaller_keeps_the_overhead_the_provider_counted(tmp_path: Path) -> None:
    path = str(session_log().write(tmp_path / "s.jsonl"))
    whole = run_json("replay", path)["requests"]
    # Under a tiny cap the last view compacts: it is no longer the conversation the log sent,
    # so its overhead is what the provider counted beyond the messages sent (their estimate is
    # the uncompacted replay's view), put beside the smaller view.
    capped = run_json("replay", path, "--max-tokens", "3400")
    last = capped["requests"][-1]
    assert last["compacted"] and last["view_tokens"] != whole[-1]["view_tokens"]
    assert last["overhead_tokens"] == 3295 - whole[-1]["view_tokens"]
    assert last["request_tokens"] == last["view_tokens"] + last["overhead_tokens"]
