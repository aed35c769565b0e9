"""The report's headline figures tell one story, and agree with the provider where it counted.

Each test drives the ``context-simple`` command (through Typer's runner) on the built-in
example, a bare transcript written here, or a Claude Code log built with the log tests' own
builder, and checks a figure against the one it must agree with.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from pathlib import Path
from typing import Any

from amplifier_core import HookRegistry, HookResult
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.engine.given_overhead import stand_in_definitions
from amplifier_module_context_simple.sizing._estimate import FAMILIES
from amplifier_module_context_simple.sizing._tool_definitions import estimate_tool_definitions
from amplifier_module_context_simple.views._notice import NoticeFigures, notice_message
from amplifier_module_context_simple.vocabulary._messages import ORIGINAL_TOKENS_KEY, TRUNCATED_KEY

from ..test_provider_views import PROPERTY_SETTINGS, Session, WindowProvider, sessions
from .cli_runs import run, run_json
from .test_claude_code_log import Log, session_log, text, usage_of, wide
from .test_session_dir import make_session, request_events, session_config

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
    checked = run("replay", "--full", *SMALL, "--overhead", "30000", "--check")
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
    out = run("replay", "--full", *SMALL, "--overhead", "30000").stdout
    assert "- 30,000 --overhead given - 0 learned overhead" in " ".join(out.split())


def test_a_bare_transcript_without_a_window_holds_the_overhead_back_too(tmp_path: Path) -> None:
    path = str(transcript(tmp_path))
    given_ = run_json("replay", path, "--overhead", "5000", "--max-tokens-fallback", "50000")
    assert given_["budget"]["effective_budget"] == 45_000
    assert given_["budget"]["request_budget"] == 50_000
    text = " ".join(run("replay", "--full", path, "--overhead", "5000").stdout.split())
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
    out = " ".join(wide("replay", "--full", path).stdout.split())
    assert "Largest request (view + overhead) │ 3,295 tokens" in out
    assert "the summary's whole-request figures are built on it" in out
    swept = run_json("sweep", path, "--compact-threshold", "0.5,0.9")
    assert {row["peak_tokens"] for row in swept["rows"]} == {3295}
    assert {row["peak_share"] for row in swept["rows"]} == {round(3295 / 200_000, 4)}


def test_a_log_replayed_smaller_keeps_the_overhead_the_provider_counted(tmp_path: Path) -> None:
    path = str(session_log().write(tmp_path / "s.jsonl"))
    whole = run_json("replay", path)["requests"]
    # Under a tiny cap the last view compacts: it is no longer the conversation the log sent,
    # so its overhead is what the provider counted beyond the messages sent (their estimate is
    # the uncompacted replay's view), put beside the smaller view.
    capped = run_json("replay", path, "--max-tokens", "3150")
    last = capped["requests"][-1]
    assert last["level"] > 0 and last["view_tokens"] != whole[-1]["view_tokens"]
    assert last["overhead_tokens"] == 3295 - whole[-1]["view_tokens"]
    assert last["request_tokens"] == last["view_tokens"] + last["overhead_tokens"]


# --- one figure for one view -----------------------------------------------------------------


async def _compactions_beside_views(
    session: Session, placement: str
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each ``context:compaction`` payload beside the view its request returned."""
    hooks = HookRegistry()
    payloads: list[dict[str, Any]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        payloads.append(data)
        return HookResult(action="continue")

    hooks.register("context:compaction", record, name="truth-compactions")
    manager = SimpleContextManager(hooks=hooks, compaction_notice_placement=placement)
    provider = WindowProvider(session.window, session.max_output) if session.via_provider else None
    found: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for message in session.messages:
        if message["role"] == "assistant":
            before = len(payloads)
            if provider is not None:
                view = await manager.get_messages_for_request(provider=provider)
            else:
                view = await manager.get_messages_for_request(token_budget=session.token_budget)
            if len(payloads) > before:
                found.append((payloads[-1], view))
        try:
            await manager.add_message(copy.deepcopy(message))
        except Exception:  # admission has its own property; the views so far count
            break
    return found


@PROPERTY_SETTINGS
@given(sessions(), st.sampled_from(("in_place", "tail")))
def test_the_compaction_event_states_the_view_it_returned(session: Session, placement: str) -> None:
    logging.disable(logging.WARNING)
    try:
        found = asyncio.run(_compactions_beside_views(session, placement))
    finally:
        logging.disable(logging.NOTSET)
    for payload, view in found:
        # docs/api.md: "after_tokens: After, the notice included"; the view holds it.
        assert payload["after_messages"] == len(view)
        tokens = sum(estimate_message_tokens(m) for m in view)  # no model: conservative family
        assert payload["after_tokens"] == tokens


def test_the_compactions_and_requests_tables_agree() -> None:
    document = run_json("replay", *SMALL)
    requests = {r["request"]: r for r in document["requests"]}
    assert document["compactions"]
    for c in document["compactions"]:
        r = requests[c["request"]]
        assert (c["after_tokens"], c["after_messages"]) == (r["view_tokens"], r["view_messages"])


def test_the_notice_states_only_what_happened(tmp_path: Path) -> None:
    # Only tool results shortened: no "0 are left out", no count of the view's messages.
    path = str(transcript(tmp_path, rounds=8, size=400))
    limits = ("--max-tokens", "16000", "--protected-tool-results", "1", "--target-usage", "0.8")
    [compaction] = run_json("replay", path, *limits)["compactions"]
    assert (compaction["truncated"], compaction["removed"]) == (2, 0)
    assert compaction["after_messages"] == compaction["before_messages"] + 1  # the notice
    view = run_json("inspect", path, "--at", str(compaction["request"]), *limits)["view"]
    [notice] = [m for m in view if "context-compaction" in str(m.get("metadata"))]
    text = notice["content"]
    assert "compacted: of the first 17, 2 tool results shortened." in text
    assert "0 are left out" not in text and " 0 long messages" not in text
    assert "took the view from" not in text


def test_a_view_above_the_trigger_without_a_compaction_says_why() -> None:
    document = run_json("replay")
    trigger = document["summary"]["trigger_tokens"]
    quiet = [r for r in document["requests"] if not r["compacted"]]
    largest = max(quiet, key=lambda r: r["view_tokens"])
    notice = next(w for w in document["window_by_category"] if w["request"] == largest["request"])
    notice_tokens = notice["categories"]["compaction notice"]
    # The case: above the trigger only by the notice the trigger does not compare.
    assert largest["view_tokens"] > trigger >= largest["view_tokens"] - notice_tokens
    text = " ".join(run("replay", "--full").stdout.split())
    assert (
        f"Request {largest['request']}'s view ({largest['view_tokens']:,} tokens) is above its "
        f"trigger ({trigger:,}) and did not compact: the trigger compares the view without its "
        f"compaction notice ({notice_tokens:,} tokens)"
    ) in text
    calm = run_json("replay", *SMALL)
    assert (
        max(r["view_tokens"] for r in calm["requests"] if not r["compacted"])
        < (calm["summary"]["trigger_tokens"])
    )
    assert "did not compact" not in run("replay", "--full", *SMALL).stdout


# --- counts that count -----------------------------------------------------------------------


def test_no_cache_break_causes_no_cost(tmp_path: Path) -> None:
    # The third request re-sends the second's messages whole (no break) but its cache had
    # expired: it read nothing. That miss is no break's cost.
    log = (
        Log()
        .user("List the files, please. " * 40)
        .response("msg_01", text("Sure. " * 40), usage=usage_of(12, 3000, 0, 40))
        .user("Only the Python ones. " * 40)
        .response("msg_02", text("Looking. " * 40), usage=usage_of(8, 200, 3000, 60))
        .user("Thanks. " * 40)
        .response("msg_03", text("Done."), usage=usage_of(3400, 0, 0, 20))
    )
    document = run_json("replay", str(log.write(tmp_path / "s.jsonl")))
    cache = document["cache"]["requests"]
    assert [r["break"] for r in cache] == [False, False, False]
    assert cache[2]["shared_tokens"] > 0 == cache[2]["cache_read_tokens"]
    summary = document["summary"]
    assert summary["cache_breaks"] == 0
    assert summary["break_cost_share"] == 0.0


def _flattened(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``llm:response`` events with their usage at the event's top level."""
    for e in events:
        if e["event"] == "llm:response":
            e["data"] = {"model": e["data"]["model"], **e["data"]["usage"]}
    return events


def test_usage_at_the_events_top_level_is_read_and_counted(tmp_path: Path) -> None:
    nested = run_json("replay", str(make_session(tmp_path / "nested")))
    events = _flattened([session_config(), *request_events(4)])
    flat = run_json("replay", str(make_session(tmp_path / "flat", events=events)))
    assert flat["source"]["recorded_readings"] == {"found": 4, "fed": 4, "withheld": 0}
    # Read there, the same usage gives the same figures as under "usage".
    assert [w["provider"] for w in flat["window_by_category"]] == [1_050, 1_051, 1_052, 1_053]
    assert flat["budget"] == nested["budget"]
    # A response with no reading anywhere is not counted as found, nor as fed.
    bare = [session_config(), *request_events(4)]
    for e in bare:
        if e["event"] == "llm:response":
            e["data"] = {"model": e["data"]["model"]}
    none = run_json("replay", str(make_session(tmp_path / "none", events=bare)))
    assert none["source"]["recorded_readings"] == {"found": 0, "fed": 0, "withheld": 0}
    out = " ".join(
        run("replay", "--full", str(make_session(tmp_path / "none2", events=bare))).stdout.split()
    )
    assert "Recorded usage: 0 reading(s) found, 0 fed to the replay's meter" in out


def test_readings_fed_and_withheld_add_up_to_those_found(tmp_path: Path) -> None:
    directory = str(make_session(tmp_path / "s", turns=4))
    capped = run_json("replay", directory, "--max-tokens", "3000")
    readings = capped["source"]["recorded_readings"]
    assert readings["withheld"] > 0 and readings["fed"] + readings["withheld"] == readings["found"]
    out = " ".join(run("replay", "--full", directory, "--max-tokens", "3000").stdout.split())
    assert (
        f"Recorded usage: {readings['found']} reading(s) found, {readings['fed']} fed to the "
        f"replay's meter ({readings['withheld']} not: see the note below)"
    ) in out
    assert f"Note: {readings['withheld']} recorded reading(s) not given" in out


# --- one model table for every input ---------------------------------------------------------


def test_model_sets_the_window_from_one_table_for_every_input(tmp_path: Path) -> None:
    bare = str(transcript(tmp_path))
    log = str(session_log().write(tmp_path / "s.jsonl"))
    model = "claude-sonnet-4-5-20250929"  # the log's own model
    from_log = run_json("replay", log)
    from_flag = run_json("replay", bare, "--model", model)
    assert from_flag["window"] == from_log["window"] == {
        "context_window": 200_000, "max_output_tokens": 64_000, "model": model,
    }  # fmt: skip
    settings_ = {s["name"]: s["source"] for s in from_flag["source"]["settings"]}
    assert settings_["context_window"] == settings_["max_output_tokens"] == "model table"
    assert from_flag["token_family"] == from_log["token_family"] == "claude3"
    example = run_json("replay", *SMALL, "--model", "gpt-4.1")["window"]
    assert example["context_window"] == 1_047_576  # the table's, not the example's default
    assert run("replay", "--full", bare, "--model", model).stderr == ""


def test_an_unknown_model_is_named_in_a_warning(tmp_path: Path) -> None:
    bare = str(transcript(tmp_path))
    done = run("replay", "--full", bare, "--model", "acme-llm-7")
    assert done.exit_code == 0
    warning = " ".join(done.stderr.split())
    assert warning.startswith("context-simple: warning: --model 'acme-llm-7' is not in the model")
    assert "no window is known; give --context-window" in warning
    assert "tokenizer family is unknown too" in warning
    given_ = run("replay", "--full", bare, "--model", "acme-llm-7", "--context-window", "50000")
    assert "the window from the flag is used" in " ".join(given_.stderr.split())


# --- nonsensical settings are named ------------------------------------------------------------


def _warnings(stderr: str) -> list[str]:
    return [
        " ".join(line.split()) for line in stderr.splitlines() if "context-simple: warning" in line
    ]


def test_a_target_at_or_above_the_trigger_is_named() -> None:
    done = run("replay", "--full", *SMALL, "--target-usage", "0.9", "--compact-threshold", "0.5")
    assert done.exit_code == 0
    assert any(
        "--target-usage 0.9 is not below --compact-threshold 0.5" in w
        for w in _warnings(done.stderr)
    )
    assert _warnings(run("replay", "--full", *SMALL, "--target-usage", "0.4").stderr) == []


def test_a_cap_below_every_request_is_named() -> None:
    done = run("replay", "--full", *SMALL, "--max-tokens", "10")
    document = run_json("replay", *SMALL, "--max-tokens", "10")
    smallest = min(r["request_tokens"] for r in document["requests"])
    assert document["summary"]["over_budget_requests"] == len(document["requests"])
    assert (
        f"context-simple: warning: --max-tokens 10 is below the smallest request ({smallest:,} "
        "tokens): every request is over the budget it leaves"
    ) in _warnings(done.stderr)


def test_a_cap_the_overhead_fills_is_named_once_per_row_in_a_sweep(tmp_path: Path) -> None:
    path = str(transcript(tmp_path))
    done = run("sweep", path, "--overhead", "5000", "--max-tokens", "4000,4500,60000")
    assert done.exit_code == 0
    starved = [w for w in _warnings(done.stderr) if "a budget of 1 token" in w]
    assert starved == [
        f"context-simple: warning: --max-tokens {cap} leaves the messages a budget of 1 token: "
        "the 5,000 tokens of tool definitions and learned overhead it holds back take all of it"
        for cap in ("4,000", "4,500")
    ]


def test_token_meter_actual_without_readings_says_so(tmp_path: Path) -> None:
    path = str(transcript(tmp_path))
    done = run("sweep", path, "--token-meter", "actual", "--compact-threshold", "0.6,0.8")
    said = [w for w in _warnings(done.stderr) if "--token-meter actual" in w]
    assert len(said) == 1  # every row shares it: said once
    assert "no provider reading reached the meter" in said[0]
    # A log whose readings are fed: nothing to say.
    log = str(session_log().write(tmp_path / "s.jsonl"))
    assert _warnings(run("replay", "--full", log, "--token-meter", "actual").stderr) == []


# --- words -----------------------------------------------------------------------------------


def _help(*args: str) -> str:
    done = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.stderr
    return done.stdout


def test_flags_show_no_value_placeholder() -> None:
    for command in (
        (),
        (
            "replay",
            "--full",
        ),
        ("inspect",),
        ("sweep",),
    ):
        text = _help(*command)
        assert "<bool>" not in text, command
        flag = "--version" if not command else "--help"
        line = next(line for line in text.splitlines() if flag in line)
        assert "<" not in line, line
    assert "<int>" in _help("replay")  # options that take a value still say which


def test_the_notice_options_say_what_they_do_and_are_all_there() -> None:
    for command in ("replay", "inspect"):
        text = " ".join(_help(command).split())
        assert "Append" not in text
        assert "Add the compaction notice (where: --notice-placement)" in text
        assert "--notice-reserve" in text and "--notice-min-level" in text
    quiet = run_json("replay", *SMALL, "--notice-min-level", "9")
    assert quiet["config"]["compaction_notice_min_level"] == 9
    assert not any(r["notice"] for r in quiet["requests"])
    reserved = run_json("replay", *SMALL, "--notice-reserve", "300")
    assert reserved["config"]["compaction_notice_token_reserve"] == 300
    plain = run_json("replay", *SMALL)["summary"]["trigger_tokens"]
    assert reserved["summary"]["trigger_tokens"] > plain  # less held back for the notice


def test_the_truncation_marker_figure_has_separators(tmp_path: Path) -> None:
    path = str(transcript(tmp_path, rounds=8, size=4_000))
    limits = ("--max-tokens", "60000", "--protected-tool-results", "1")
    document = run_json("replay", path, *limits)
    [compaction] = document["compactions"][:1]
    view = run_json("inspect", path, "--at", str(compaction["request"]), *limits)["view"]
    was = [m[ORIGINAL_TOKENS_KEY] for m in view if m.get(TRUNCATED_KEY)]
    assert was and max(was) >= 1000
    text = " ".join(
        wide("inspect", path, "--at", str(compaction["request"]), *limits).stdout.split()
    )
    assert f"truncated (was {max(was):,} tok)" in text


def test_the_window_tables_explain_ours_and_the_overhead_given(tmp_path: Path) -> None:
    path = str(transcript(tmp_path))
    text = " ".join(wide("replay", "--full", path, "--overhead", "3000").stdout.split())
    assert "ours: what the request held by the module's estimate" in text
    assert "overhead: the --overhead given, for what the transcript lacks" in text
    assert "overhead (given): the --overhead stated for what the transcript lacks" in text
    plain = " ".join(wide("replay", "--full", path).stdout.split())
    assert "ours: what the request held" in plain
    log = " ".join(
        wide("replay", "--full", str(session_log().write(tmp_path / "s.jsonl"))).stdout.split()
    )
    assert "ours: what the request held" in log and "gap: ours - provider" in log


def test_markers_are_explained_for_a_bare_transcript(tmp_path: Path) -> None:
    # A summary value may wrap inside its table cell: read the words, not the borders.
    text = " ".join(
        wide("replay", "--full", str(transcript(tmp_path))).stdout.replace("│", " ").split()
    )
    assert "if cached only" in text and "at the markers" in text
    assert "the replay puts them where Amplifier's provider does" in text
    assert "a bare transcript's views included" in text


def test_a_compaction_that_reached_its_target_is_not_warned_about_for_its_notice() -> None:
    # The notice now counts in after_tokens; the target the ladder aimed for did not hold it,
    # so "stays above the compaction target" must still compare the view without it.
    document = run_json("replay")
    notice = {
        w["request"]: w["categories"]["compaction notice"] for w in document["window_by_category"]
    }
    boundary = [
        c
        for c in document["compactions"]
        if c["after_tokens"] - notice[c["request"]] <= c["target_tokens"] < c["after_tokens"]
    ]
    assert boundary, "the example has a compaction the notice alone lifts above its target"
    assert not any(
        "stays above the compaction target" in w["message"] for w in document["warnings"]
    )


def test_a_compactions_before_is_the_view_that_would_have_gone_out() -> None:
    # "Before" is the view under the decisions in force, its notice included, as the
    # measured path counts it: the previous view plus the messages the history gained.
    document = run_json("replay")
    requests = {r["request"]: r for r in document["requests"]}
    later = [c for c in document["compactions"][1:] if c["request"] - 1 in requests]
    assert later, "compactions with an earlier one's notice in force"
    for c in later:
        previous, now = requests[c["request"] - 1], requests[c["request"]]
        gained = now["history_messages"] - previous["history_messages"]
        assert c["before_messages"] == previous["view_messages"] + gained, c["request"]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=20_000),
    st.lists(st.integers(min_value=0, max_value=20_000), min_size=3, max_size=3),
    st.booleans(),
    st.sampled_from(("minimal", "normal", "verbose")),
)
def test_no_notice_is_longer_than_the_one_the_budget_reserves_room_for(
    history: int, counts: list[int], relaxed: bool, verbosity: str
) -> None:
    # The fit pass keeps the view under the budget less the longest notice (its map is bounded
    # apart); a notice that says more must not outgrow it.
    removed, truncated, stubbed = (min(c, history + 1) for c in counts)
    figures = NoticeFigures(history, removed, truncated, stubbed, relaxed)
    largest = NoticeFigures.largest(history)
    for family in (None, *FAMILIES):
        stated = estimate_message_tokens(notice_message(figures, verbosity), family=family)
        room = estimate_message_tokens(notice_message(largest, verbosity), family=family)
        assert stated <= room
