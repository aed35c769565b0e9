"""docs/replay-json.md against the ``--json`` documents, in both directions.

Every key a document carries must have a row in the doc (with the type the row says, and
present wherever the row does not call it absent), and every row must be met in at least one
document. The documents are produced here from inputs that together reach every key on a clean
clone: the built-in example (it compacts, so drops and compactions are there), a recorded session
made by the tests' own helper, whole and cut off mid-record, a bare transcript with ``--overhead``
on a window too small for it (refusals, repairs, warnings, a skipped line) and without a window,
a ``sweep`` and an ``inspect --why``. The real recorded session in ``../shared`` is checked in
one direction when it is there; it is left out of the other so the answer is the same on every
clone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import REPAIR_KINDS, ContextConfig
from amplifier_module_context_simple.replay.command.inputs import SharedOptions, prepare
from amplifier_module_context_simple.replay.engine.engine import replay
from amplifier_module_context_simple.replay.engine.report import SCHEMA_VERSION
from amplifier_module_context_simple.replay.engine.session_settings import add_budget_setting
from amplifier_module_context_simple.replay.engine.sweep import SWEPT_KEYS
from amplifier_module_context_simple.replay.findings.evidence import forms, salient_strings
from amplifier_module_context_simple.replay.provider.cache_rules import CAUSES
from amplifier_module_context_simple.views._render import text_of

from . import json_doc
from .cli_runs import run, run_json
from .test_rework import compacted_log
from .test_session_report import REAL_SESSION, make_session

Document = tuple[str, str, dict[str, Any]]
"""(what it was made from, its kind in ``json_doc.DOCUMENTS``, the document)."""

BIG = "word " * 2_500


def bare_transcript(path: Path) -> Path:
    """A transcript a small window cannot hold, with a reused call id (renamed in the view), a
    call that never got its result (a placeholder is added) and a line that is no JSON."""

    def call(call_id: str, path: str) -> dict[str, Any]:
        function = {"name": "read", "arguments": json.dumps({"path": path})}
        return {"id": call_id, "type": "function", "function": function}

    def calls(*made: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": "", "tool_calls": list(made)}

    messages = [
        {"role": "user", "content": "Read both files. " + BIG},
        calls(call("c1", "a.py"), call("c2", "b.py")),
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
        None,  # the line that is no JSON
        calls(call("c1", "c.py")),
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
        {"role": "assistant", "content": "Done."},
    ]
    lines = ["not json" if m is None else json.dumps(m) for m in messages]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def conversations(path: Path) -> Path:
    """Two conversations, one per line, as a fine-tuning file holds them."""
    lines = [
        {"messages": [{"role": "user", "content": f"Question {n}"},
                      {"role": "assistant", "content": f"Answer {n}"}]}
        for n in (1, 2)
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def partial_session(directory: Path) -> Path:
    """A made session whose recording stops inside request 4's record, with a bad line before
    it and a context-config key this module does not have."""
    make_session(directory)
    events = directory / "context-intelligence" / "events.jsonl"
    lines = events.read_text(encoding="utf-8").splitlines()
    config = json.loads(lines[0])
    config["data"]["raw"]["session"]["context"]["config"]["auto_compact"] = True
    cut = [i for i, line in enumerate(lines) if '"llm:request"' in line][3]
    kept = [json.dumps(config), "not json", *lines[1:cut]]
    events.write_text("\n".join(kept) + "\n" + lines[cut][:50], encoding="utf-8")
    return directory


def first_budget_document() -> dict[str, Any]:
    """A replay document whose budget setting carries ``first``.

    Every request of a command-line replay asks the simulated provider for the same output, so
    no run of the command changes the request budget between requests today; the report is
    given a first budget event that differs, as a provider asked for less output later would.
    """
    options = SharedOptions(
        transcript=None, config_values={}, context_window=None, max_output_tokens=None,
        model=None, strict=False, seed=None, messages=40,
    )  # fmt: skip
    data = prepare(options)
    report = asyncio.run(
        replay(data.messages, config=data.config, window=data.window, source=data.source)
    ).report
    assert report.budget_event is not None
    first = {**report.budget_event, "request_budget": report.budget_event["request_budget"] - 1}
    add_budget_setting(report.source, report.budget_event, first)
    return report.as_json()


def held_by_the_map(example: dict[str, Any]) -> str:
    """The position of a message of the built-in example that holds a string a view lost
    and its map named (``inspect --why`` then lists the map line)."""
    finding = next(f for e in example["evidence"] for f in e["found_in_map"])
    options = SharedOptions(
        transcript=None, config_values={}, context_window=None, max_output_tokens=None,
        model=None, strict=False, seed=None, messages=None,
    )  # fmt: skip
    messages = prepare(options).messages
    wanted = forms(finding["string"])
    return str(next(i for i, m in enumerate(messages) if wanted & salient_strings(text_of(m))))


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> list[Document]:
    tmp = tmp_path_factory.mktemp("json-documents")
    example = run_json("replay")
    session = str(make_session(tmp / "session"))
    bare = str(bare_transcript(tmp / "bare.jsonl"))
    train = str(conversations(tmp / "train.jsonl"))
    small_window = ("--context-window", "8000", "--max-output-tokens", "2000")
    why = str(example["drops"][0]["position"])
    made: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
        ("a recorded session", "replay", lambda: run_json("replay", session)),
        ("a partial recorded session", "replay",
         lambda: run_json("replay", str(partial_session(tmp / "partial")))),
        ("a bare transcript, --overhead", "replay",
         lambda: run_json("replay", bare, "--overhead", "3000", *small_window)),
        ("a bare transcript, no window", "replay", lambda: run_json("replay", bare)),
        ("a Claude Code log that compacted itself", "replay",
         lambda: run_json("replay", str(compacted_log(tmp / "compacted.jsonl")))),
        ("a file of conversations", "replay",
         lambda: run_json("replay", train, "--conversation", "2")),
        ("a report with a first budget", "replay", first_budget_document),
        ("sweep of a recorded session", "sweep",
         lambda: run_json("sweep", session, "--target-usage", "0.4,0.5")),
        ("sweep of the example", "sweep",
         lambda: run_json("sweep", "--messages", "120", "--max-tokens", "40000,60000")),
        ("inspect --why", "why", lambda: run_json("inspect", "--why", why)),
        ("inspect --why, found through the map", "why",
         lambda: run_json("inspect", "--why", held_by_the_map(example))),
        ("inspect --at", "view", lambda: run_json("inspect", "--messages", "120", "--at", "3")),
    ]  # fmt: skip
    return [("the built-in example", "replay", example), *((n, k, f()) for n, k, f in made)]


def test_every_key_of_every_document_is_documented(documents: list[Document]) -> None:
    found = [f"{name}: {p}" for name, kind, doc in documents for p in json_doc.problems(doc, kind)]
    assert found == []


def test_every_documented_key_is_in_some_document(documents: list[Document]) -> None:
    met = json_doc.seen(json_doc.walk(doc, kind) for _, kind, doc in documents)
    rows = json_doc.documented().rows
    never = sorted(f"{kind}: {path}" for kind, paths in rows.items() for path in paths
                   if (kind, path) not in met)  # fmt: skip
    assert never == [], "documented in docs/replay-json.md but in no document"


def test_the_inputs_reach_what_they_are_here_for(documents: list[Document]) -> None:
    # The coverage test passes only while these hold; said here so a change to an input that
    # stops reaching its keys fails with the reason, not as a missing row.
    by_name = {name: doc for name, _, doc in documents}
    example = by_name["the built-in example"]
    assert example["drops"] and example["compactions"]
    cut = by_name["a partial recorded session"]
    assert cut["summary"]["not_recorded_requests"] and cut["source"]["skipped_event_lines"]
    small = by_name["a bare transcript, --overhead"]
    assert small["refusals"]["refused"] and small["refusals"]["repairs"] and small["warnings"]
    assert by_name["a bare transcript, no window"]["window"] is None
    assert by_name["a Claude Code log that compacted itself"]["rework"]["spans"][0]["repeated"]
    assert any(e["first_loss_request"] for e in example["evidence_by_compaction"])


_MapRule = Callable[[set[str], set[str]], None]


def _exactly(expected: set[str]) -> _MapRule:
    def rule(met: set[str], listed: set[str]) -> None:
        assert met == expected, (sorted(met - expected), sorted(expected - met))
        assert not listed, "keys from the code: nothing to list in the doc"

    return rule


def _within(allowed: set[str]) -> _MapRule:
    def rule(met: set[str], listed: set[str]) -> None:
        assert met <= allowed, sorted(met - allowed)
        assert not listed, "keys from the code: nothing to list in the doc"

    return rule


def _listed_and_met(met: set[str], listed: set[str]) -> None:
    assert met == listed, (sorted(met - listed), sorted(listed - met))


def _causes(met: set[str], listed: set[str]) -> None:
    assert listed == set(CAUSES) and met <= listed, (sorted(listed ^ set(CAUSES)), met)


BUDGET_KEYS = set(json_doc.api_event_keys("context:budget"))
MAP_RULES: dict[str, _MapRule] = {
    "config": _exactly({f.name for f in dataclasses.fields(ContextConfig)}),
    "budget": _within(BUDGET_KEYS),
    "initial_budget": _within(BUDGET_KEYS),
    "window_by_category[].categories": _listed_and_met,
    "cache.causes": _causes,
    "summary.cache_break_causes": lambda met, _: _causes(
        met, json_doc.documented().map_keys["cache.causes"]
    ),
    "requests[].repairs": _within(set(REPAIR_KINDS)),
    "refusals.repairs": _within(set(REPAIR_KINDS)),
    "rows[].setting": _within(set(SWEPT_KEYS)),
}
"""Map path -> what its keys may be: the code's own list where it has one (the config's fields,
the cache causes, the repair kinds, the swept keys, the budget event's keys in docs/api.md), the
doc's "Keys of" table otherwise, met in the documents both ways."""


def test_every_map_s_keys_are_the_ones_the_doc_or_the_code_lists(
    documents: list[Document],
) -> None:
    doc = json_doc.documented()
    maps = {path for rows in doc.rows.values() for path, row in rows.items() if row.is_map}
    assert maps == set(MAP_RULES), "a map row needs a rule for its keys here"
    assert set(doc.map_keys) <= maps, "a Keys of table for a path that is no map"
    met: dict[str, set[str]] = {}
    for _, kind, document in documents:
        for path, keys in json_doc.walk(document, kind).keys.items():
            met.setdefault(path, set()).update(keys)
    for path, rule in MAP_RULES.items():
        rule(met.get(path, set()), doc.map_keys.get(path, set()))
    # A request's cause is one of the same keys.
    caches = [d["cache"] for _, kind, d in documents if kind == "replay" and d["cache"]]
    causes = {r["cause"] for cache in caches for r in cache["requests"]}
    assert causes - {None} <= doc.map_keys["cache.causes"] and len(causes) > 1, causes


def test_every_document_carries_the_schema_version(documents: list[Document]) -> None:
    assert SCHEMA_VERSION == 1
    for name, _, document in documents:
        assert document["schema_version"] == SCHEMA_VERSION, name
        assert next(iter(document)) == "schema_version", name  # the first key a reader meets


@pytest.mark.skipif(not REAL_SESSION.is_dir(), reason="the recorded session is in ../shared")
def test_the_real_session_s_documents_are_documented() -> None:
    session = str(REAL_SESSION)
    report = run_json("replay", session)
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["cache"] is not None and report["summary"]["cache_breaks"] > 0
    assert json_doc.problems(report, "replay") == []
    swept = run_json("sweep", session, "--compact-threshold", "0.6,0.8")
    assert swept["schema_version"] == SCHEMA_VERSION
    assert json_doc.problems(swept, "sweep") == []


def test_inspect_at_prints_the_view_in_a_document() -> None:
    # A document like --why's: schema_version first, the view a list of messages in it.
    result = run("inspect", "--messages", "120", "--at", "3", "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["schema_version", "request", "view"]
    assert json_doc.problems(document, "view") == []
    view = document["view"]
    assert isinstance(view, list) and view
    assert all(isinstance(m, dict) and "role" in m for m in view)
