"""The report's words need no source: the levels explained where they appear, the final level
the list's, no placeholder figure, and a sum over requests said to be one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.provider.cache_rules import CAUSE_MEANINGS, CAUSES
from amplifier_module_context_simple.views._ladder import RUNGS

from .cli_runs import run, run_json
from .test_session_dir import REAL_SESSION, make_session, needs_real_session, write_lines
from .test_session_report import make_session as make_recorded  # its reminder moves


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def wide(*args: str) -> str:
    """The text report at 200 columns (labels unwrapped), flattened to one line."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    return flat(result.stdout)


def test_the_final_level_is_the_last_listed_compactions() -> None:
    report = run_json("replay")
    summary, compactions = report["summary"], report["compactions"]
    levels = [c["level"] for c in compactions]
    assert len(set(levels)) > 1 and levels[-1] != max(levels)  # the case that disagreed
    assert summary["final_level"] == levels[-1] and summary["deepest_level"] == max(levels)
    out = wide("replay", "--full")
    assert (
        f"Compactions {len(levels)} (the last at level {levels[-1]}, the deepest {max(levels)})"
        in out
    )


def test_every_level_is_explained_under_the_compactions_table() -> None:
    out = wide("replay", "--full")
    legend = out[out.index("Levels: the ladder's rungs") :]
    legend = legend[: legend.index("A request's level is the deepest reached so far.")]
    assert out.index("Compactions view tokens") < out.index("Levels: the ladder's rungs")
    named = {int(n) for n in re.findall(r"\b([1-8])\b", legend)}
    assert named == {r.level for r in RUNGS}
    assert "1, 2, 4, 6 shorten the oldest 25%, 50%, 75%, all of the unprotected" in legend
    assert "3, 5, 7 leave out old turns" in legend and "protected_recent x 1, 0.6, 0.3" in legend
    assert "; 8 removes old stubs and stubs the oldest long user message that is no" in legend
    assert "a fit pass relaxes protection (reported as level 8)" in legend


def test_no_view_leaves_out_a_negative_number_of_messages(tmp_path: Path) -> None:
    # The recorded system prompt is in the view and in no history message: not "-1 left out".
    directory = make_session(tmp_path / "s", turns=2)
    report = run_json("replay", str(directory))
    assert [r["left_out"] for r in report["requests"]] == [0, 0, 0, 0]
    assert all(r["system_prompt_tokens"] > 0 for r in report["requests"])
    example = run_json("replay")
    assert min(r["left_out"] for r in example["requests"]) == 0


@needs_real_session
def test_the_real_session_leaves_nothing_out() -> None:
    report = run_json("replay", str(REAL_SESSION))
    assert [r["left_out"] for r in report["requests"]] == [0] * 9


def test_a_sum_over_requests_says_it_is_one() -> None:
    out = wide("replay", "--full")
    summary = run_json("replay")["summary"]
    assert f"Tokens not sent, summed over requests {summary['tokens_saved']:,}" in out
    assert f"Tokens not sent, last request {summary['final_tokens_saved']:,}" in out
    assert (
        "Tokens not sent: each request's history less its view; the sum over the requests is "
        "what re-sending the whole history every time would have added to the input." in out
    )
    assert "Tokens saved" not in out


def test_a_calls_characters_are_its_arguments(tmp_path: Path) -> None:
    body = "x = 1\n" * 500
    messages = [
        {"role": "user", "content": "write it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "tool": "write_file", "arguments": {"path": "a.py", "content": body}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "write_file", "content": "ok"},
        {"role": "assistant", "content": "done"},
    ]
    path = write_lines(tmp_path / "t.jsonl", messages)
    result = run("inspect", str(path), "--at", "2")
    assert result.exit_code == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    call = next(r for r in rows if len(r) > 4 and r[0] == "1" and r[4] == "assistant")
    arguments = len(json.dumps({"path": "a.py", "content": body}, ensure_ascii=False))
    assert int(call[3].replace(",", "")) == arguments
    assert "chars: text plus tool-call arguments" in flat(result.stdout)


def test_where_a_request_differs_is_explained(tmp_path: Path) -> None:
    directory = make_session(tmp_path / "s", turns=2)
    out = wide("replay", "--full", str(directory))
    assert (
        "differs at: where a request stops matching the one before (msg M.B: the payload's "
        "message M, its content block B, both 0-based; none: it extends it)" in out
    )


def test_every_cache_break_cause_has_its_meaning() -> None:
    assert set(CAUSE_MEANINGS) == set(CAUSES)


def test_the_terms_of_a_recorded_session_report_are_explained(tmp_path: Path) -> None:
    directory = str(make_recorded(tmp_path / "s"))
    report = run_json("replay", directory)
    text = wide("replay", "--full", directory)
    causes = report["summary"]["cache_break_causes"]
    assert causes, "the made session's reminder moves, so its cache breaks"
    for cause in causes:
        assert f"{cause}: {CAUSE_MEANINGS[cause]}" in text
    assert report["budget"]["learned_overhead_tokens"] > 0
    assert "(learned overhead: what the provider's readings counted beyond the view" in text
    for term in ("Prefix-stable:", "Priced:", "At the markers:", "Tool results cut on arrival:"):
        assert term in text
    for jargon in ("check_view", "host refused", "ingress"):
        assert jargon not in text
