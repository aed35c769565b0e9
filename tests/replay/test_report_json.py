"""The ``--json`` document's record lists are what ``dataclasses.asdict`` gives."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.replay.engine.report import (
    ReplayReport,
    RequestRecord,
    _records,  # pyright: ignore[reportPrivateUsage]
)
from amplifier_module_context_simple.replay.findings.drops import Drop


def _record(request: int, **changes: Any) -> RequestRecord:
    values: dict[str, Any] = {
        "request": request, "at_message": 3, "history_messages": 4, "history_tokens": 50,
        "view_messages": 4, "view_tokens": 50, "budget": 100, "budget_event_source": "x",
        "utilisation": 0.5, "level": 0, "compacted": False, "removed": 0, "truncated": 0,
        "stubbed": 0, "left_out": 0, "shortened": 0, "stubs": 0, "repaired": 0,
        "notice": False, "valid": True, "host_valid": None, "violations": [],
        "prefix_stable": True,
    }  # fmt: skip
    values.update(changes)
    return RequestRecord(**values)


def test_records_are_asdict_and_copies() -> None:
    records = [_record(1), _record(2, violations=["v"], repairs={"text": 2})]
    assert _records(records) == [asdict(r) for r in records]
    out = _records(records)
    out[1]["violations"].append("w")
    out[1]["repairs"]["x"] = 1
    assert records[1].violations == ["v"] and records[1].repairs == {"text": 2}
    drops = [Drop(1, 2, "left out", 3, True, "tool", None, None, 5, 0, "line")]
    assert _records(drops) == [asdict(d) for d in drops]
    assert _records([]) == []


def test_report_json_text_is_the_standard_one() -> None:
    report = ReplayReport(source={"name": "t"}, config=ContextConfig(), window=None)
    report.requests = [_record(1), _record(2, violations=["bad"], repairs={"text": 1})]
    document = report.as_json()
    # The records as asdict gives them, with the two figures derived from their fields.
    assert document["requests"] == [
        {**asdict(r), "request_tokens": r.request_tokens, "over_budget": r.over_budget}
        for r in report.requests
    ]
    assert json.loads(json.dumps(document))["requests"][1]["violations"] == ["bad"]
