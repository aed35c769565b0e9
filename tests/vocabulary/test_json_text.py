"""The JSON text the model reads for a value (vocabulary/_json_text.py): typed values, text
that is not ASCII, sorted keys, and the bounded encoding of hostile nesting."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

import pytest
from pydantic import BaseModel

from amplifier_module_context_simple.vocabulary._json_text import DEEPER, json_text


class Reading(BaseModel):
    taken: datetime
    label: str


READING = Reading(taken=datetime(2026, 12, 6, 11, 30), label="café")
# What the model must read for READING: its JSON-mode dump (an ISO date, not Python's repr).
READING_AS_SENT = {"taken": "2026-12-06T11:30:00", "label": "café"}


def _nested(levels: int, bottom: Any) -> Any:
    value = bottom
    for _ in range(levels):
        value = [value]
    return value


def _value(deep: bool) -> dict[str, Any]:
    value: dict[str, Any] = {
        "zeta": "naïve ✓",
        "alpha": READING,
        "path": PurePosixPath("/srv/data.csv"),
    }
    if deep:
        # Deeper than the encoder's recursion allows: the bounded encoding takes over.
        value["nested"] = _nested(5_000, "bottom")
    return value


@pytest.mark.parametrize("deep", [False, True], ids=["shallow", "deep"])
def test_typed_values_are_sent_as_their_json_dump_and_other_objects_as_text(deep: bool) -> None:
    decoded = json.loads(json_text(_value(deep)))
    assert decoded["alpha"] == READING_AS_SENT
    assert decoded["path"] == "/srv/data.csv"


@pytest.mark.parametrize("deep", [False, True], ids=["shallow", "deep"])
def test_text_that_is_not_ascii_is_sent_as_written(deep: bool) -> None:
    text = json_text(_value(deep))
    assert '"naïve ✓"' in text
    assert '"café"' in text
    assert "\\u" not in text


@pytest.mark.parametrize("deep", [False, True], ids=["shallow", "deep"])
def test_keys_are_sorted_only_when_asked(deep: bool) -> None:
    assert list(json.loads(json_text(_value(deep), sort_keys=True))) == sorted(_value(deep))
    assert list(json.loads(json_text(_value(deep)))) == list(_value(deep))


def test_only_the_part_below_the_depth_bound_is_cut() -> None:
    decoded = json.loads(json_text(_value(True), sort_keys=True))
    node = decoded["nested"]
    while isinstance(node, list):
        node = node[0]  # pyright: ignore[reportUnknownVariableType]
    assert node == DEEPER
    assert decoded["zeta"] == "naïve ✓"
