"""Evidence kept: of the strings the recorded next message's calls used that earlier results or
prompts held, the share each view still showed. Answers worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.findings.evidence import (
    EvidenceRecord,
    EvidenceTracker,
    by_compaction,
    forms,
    salient_strings,
)
from amplifier_module_context_simple.views._render import NOTICE_SOURCE

from .cli_runs import run_json
from .test_rework import compacted_log

BIG = "word " * 2_500
SECRET = "deep/secret_file.py"


def test_salient_strings_are_paths_identifiers_and_camel_case() -> None:
    text = (
        "Run pytest on tests/test_app.py, see /repo/src/app.py: load_config() in ContextConfig. "
        "e.g. version 0.5, v1.2 works; etc. Finished."
    )
    assert salient_strings(text) == {
        "tests/test_app.py", "repo/src/app.py", "load_config", "ContextConfig", "v1.2",
    }  # fmt: skip


def call(call_id: str, path: str) -> dict[str, Any]:
    calls = [{"id": call_id, "tool": "read", "arguments": {"path": path}}]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def hand_transcript(path: Path) -> Path:
    """Request 1 reads notes/plan.md (named by the prompt: used 1, kept 1); requests 2 and 3
    read files nothing named (used 0); request 4 reads the file the first result named only at
    its end (used 1: kept while that result is whole, lost once it is shortened); request 5
    answers (used 0)."""
    messages = [
        {"role": "user", "content": "Start. Look at notes/plan.md"},
        call("c1", "notes/plan.md"), result("c1", BIG + " the answer is in " + SECRET),
        call("c2", "other/thing.py"), result("c2", BIG),
        call("c3", "other/two.py"), result("c3", BIG),
        call("c4", SECRET), result("c4", "ok"),
        {"role": "assistant", "content": "Done."},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(m) for m in messages) + "\n", encoding="utf-8")
    return path


def test_a_window_that_holds_everything_keeps_all_the_evidence(tmp_path: Path) -> None:
    document = run_json("replay", str(hand_transcript(tmp_path / "t.jsonl")))
    assert document["summary"]["compactions"] == 0
    assert [(e["used"], e["kept"]) for e in document["evidence"]] == [
        (1, 1), (0, 0), (0, 0), (1, 1), (0, 0),
    ]  # fmt: skip
    summary = document["summary"]
    assert (summary["evidence_used"], summary["evidence_kept"]) == (2, 2)
    assert summary["evidence_kept_share"] == 1.0


def test_a_shortened_result_loses_what_the_agent_then_used(tmp_path: Path) -> None:
    path = str(hand_transcript(tmp_path / "t.jsonl"))
    document = run_json("replay", path, "--context-window", "12000")
    # The precondition: the first result (position 2) left the view whole at request 2.
    assert (2, 2, "shortened") in [(d["position"], d["request"], d["change"]) for d in
                                   document["drops"]]  # fmt: skip
    assert document["compactions"][0]["request"] == 2
    # Not in context any more, but the notice's map names it under the read that held it.
    line = "- read notes/plan.md: " + SECRET
    assert document["evidence"][3] == {
        "request": 4, "used": 1, "kept": 0, "lost": [SECRET], "left_at": [2],
        "found_in_map": [{"request": 4, "string": SECRET, "line": line}],
    }  # fmt: skip
    summary = document["summary"]
    assert (summary["evidence_used"], summary["evidence_kept"]) == (2, 1)
    assert summary["evidence_kept_share"] == 0.5
    assert (summary["evidence_findable"], summary["evidence_findable_share"]) == (2, 1.0)
    # Without a map, what is lost is lost.
    bare = run_json("replay", path, "--context-window", "12000", "--map-share", "0")
    assert bare["evidence"][3]["found_in_map"] == []
    assert bare["summary"]["evidence_findable_share"] == 0.5
    # The compaction that shortened it is the one named, not the latest before request 4.
    first = document["evidence_by_compaction"][0]
    assert (first["compaction"], first["request"], first["lost_uses"]) == (1, 2, 1)
    assert (first["first_loss_request"], first["first_loss"]) == (4, [SECRET])
    assert all(e["first_loss_request"] is None for e in document["evidence_by_compaction"][1:])
    words = " ".join(
        CliRunner()
        .invoke(
            app, ["replay", "--full", path, "--context-window", "12000"], env={"COLUMNS": "200"}
        )
        .stdout.replace("│", " ")
        .split()
    )
    assert "Evidence in context 50.0% (1 of 2 strings)" in words
    assert "Evidence findable 100.0% (2 of 2 strings)" in words
    assert f"compaction 1 (request 2) left out what request 4 then used: `{SECRET}`" in words


def test_sweep_compares_the_evidence_each_setting_kept(tmp_path: Path) -> None:
    path = str(hand_transcript(tmp_path / "t.jsonl"))
    rows = run_json("sweep", path, "--max-tokens", "6000,150000")["rows"]
    assert {r["setting"]["max_tokens"]: r["evidence_kept"] for r in rows} == {
        6000: 0.5,
        150000: 1.0,
    }
    # What the smaller budget lost, its map still names: both rows find all of it.
    assert {r["setting"]["max_tokens"]: r["evidence_findable"] for r in rows} == {
        6000: 1.0,
        150000: 1.0,
    }
    table = CliRunner().invoke(app, ["sweep", path, "--max-tokens", "6000,150000"],
                               env={"COLUMNS": "200"}).stdout  # fmt: skip
    assert "in" in table and "context" in table and "find-" in table
    assert "50.0%" in table and "100.0%" in table


def test_the_notice_and_assistant_messages_are_no_evidence() -> None:
    tracker = EvidenceTracker()
    history = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": "I will read src/app.py"},
        result("c0", "see lib/util.py"),
    ]
    notice = {"role": "user", "content": "lib/util.py was compacted",
              "metadata": {"source": NOTICE_SOURCE}}  # fmt: skip
    upcoming = {**call("c1", "src/app.py"), "tool_calls": [
        {"id": "c1", "tool": "read", "arguments": {"paths": ["src/app.py", "lib/util.py"]}}
    ]}  # fmt: skip
    # src/app.py is only in an assistant message: not evidence. lib/util.py is in a result,
    # which this view leaves out; the notice naming it does not count.
    record = tracker.observe(1, [history[0], history[1], notice], history, upcoming, shared=0)
    assert record == EvidenceRecord(1, used=1, kept=0, lost=["lib/util.py"], left_at=[1])


def _scratch(
    views: list[list[int]], messages: list[dict[str, Any]], wanted: list[set[str]]
) -> list[tuple[int, int, list[int]]]:
    """(used, kept, left_at) per request, from nothing: the whole history so far and the whole
    view. A used string counts when the history held one of its forms, is kept when the view
    shows one, and left at the latest request at which one of its held forms started a run of
    views, back from this one, that held it in the history without showing it."""

    def strings(positions: list[int]) -> set[str]:
        return set().union(*(salient_strings(messages[p]["content"]) for p in positions))

    seen = [strings(list(range(n + 1))) for n in range(len(views))]
    shown = [strings(view) for view in views]
    found: list[tuple[int, int, list[int]]] = []
    for n in range(len(views)):
        held = {s: forms(s) & seen[n] for s in wanted[n]}
        used = {s: met for s, met in held.items() if met}
        lost = sorted(s for s, met in used.items() if not met & shown[n])
        left: list[int] = []
        for string in lost:
            starts: list[int] = []
            for form in used[string]:
                m = n
                while m > 0 and form in seen[m - 1] and form not in shown[m - 1]:
                    m -= 1
                starts.append(m + 1)
            left.append(max(starts))
        found.append((len(used), len(used) - len(lost), left))
    return found


WORDS = ["a/b.py", "b.py", "x/a/b.py", "c_d", "eF_g", "h/i.txt", "plain", "jk.md"]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_tracker_s_running_view_matches_one_counted_from_nothing(data: st.DataObject) -> None:
    count = data.draw(st.integers(1, 8))
    contents = data.draw(st.lists(st.lists(st.sampled_from(WORDS), max_size=3),
                                  min_size=count, max_size=count))  # fmt: skip
    messages = [result(f"c{i}", " ".join(words)) for i, words in enumerate(contents)]
    views: list[list[int]] = []
    for n in range(count):
        positions = data.draw(st.lists(st.integers(0, n), unique=True))
        views.append(sorted(positions))
    wanted = [set(data.draw(st.lists(st.sampled_from(WORDS), max_size=3))) for _ in range(count)]
    tracker = EvidenceTracker()
    previous: list[dict[str, Any]] = []
    got: list[tuple[int, int, list[int]]] = []
    for n, view_positions in enumerate(views):
        view = [messages[p] for p in view_positions]
        shared = 0
        while shared < min(len(view), len(previous)) and view[shared] is previous[shared]:
            shared += 1
        upcoming = {"role": "assistant", "content": "", "tool_calls": [
            {"id": "x", "tool": "t", "arguments": {"all": " ".join(sorted(wanted[n]))}}
        ]}  # fmt: skip
        record = tracker.observe(n + 1, view, messages[: n + 1], upcoming, shared=shared)
        got.append((record.used, record.kept, record.left_at))
        previous = view
    assert got == _scratch(views, messages, wanted)


def test_by_compaction_gives_each_loss_to_the_compaction_it_left_at() -> None:
    records = [
        EvidenceRecord(3, 2, 0, ["a.py", "b.py"], [2, 3]),
        EvidenceRecord(5, 1, 0, ["a.py"], [2]),
        EvidenceRecord(6, 1, 0, ["c.py"], [1]),  # left before any compaction: nobody's
    ]
    first, second = by_compaction(records, [2, 3])
    assert (first.lost_uses, first.first_loss_request, first.first_loss) == (2, 3, ["a.py"])
    assert (second.lost_uses, second.first_loss_request, second.first_loss) == (1, 3, ["b.py"])


def test_a_path_is_met_by_its_endings() -> None:
    assert forms("p/src/app.py") == {"p/src/app.py", "src/app.py", "app.py"}
    assert forms("a/b") == {"a/b"}  # "b" is no salient string
    assert forms("load_config") == {"load_config"}


def test_a_call_s_absolute_path_is_met_by_the_prompt_s_file_name(tmp_path: Path) -> None:
    # The log of test_rework, by hand: request 1 reads /p/src/app.py, which the prompt named
    # as app.py (used 1, kept 1); request 2 runs pytest tests/test_app.py, which nothing
    # earlier named (0); request 4 reads /p/src/app.py again (the prompt and the summary name
    # app.py: used 1, kept 1); request 5 reads /p/tests/test_app.py and request 6 runs the
    # tests (named by no result or prompt: 0); requests 3 and 7 answer in words (0).
    document = run_json("replay", str(compacted_log(tmp_path / "s.jsonl")))
    assert [(e["used"], e["kept"]) for e in document["evidence"]] == [
        (1, 1), (0, 0), (0, 0), (1, 1), (0, 0), (0, 0), (0, 0),
    ]  # fmt: skip
    assert document["summary"]["evidence_kept_share"] == 1.0


def test_a_string_held_in_two_forms_left_when_the_later_one_did() -> None:
    # Request 1 shows x/a/b.py; request 2's view leaves it out; request 3's history adds a
    # result naming b.py that its view does not show. The call at request 3 uses x/a/b.py:
    # both forms were held and neither is shown; the later of the two left at request 3.
    first, second = result("c1", "see x/a/b.py"), result("c2", "b.py changed")
    prompt = {"role": "user", "content": "Go."}
    uses = call("c3", "x/a/b.py")
    tracker = EvidenceTracker()
    tracker.observe(1, [prompt, first], [prompt, first], uses, shared=0)
    tracker.observe(2, [prompt], [prompt, first], uses, shared=1)
    record = tracker.observe(3, [prompt], [prompt, first, second], uses, shared=1)
    assert (record.used, record.kept, record.lost, record.left_at) == (1, 0, ["x/a/b.py"], [3])
