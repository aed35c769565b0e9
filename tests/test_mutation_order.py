"""The order mutmut's mutant runs get from tests/conftest.py (tests/mutation_order.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.mutation_order import order_for_mutant_run

MUTANT = "amplifier_module_context_simple.sizing._room.x_made_under__mutmut_3"


def _items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def _stats(tmp_path: Path, durations: dict[str, float]) -> Path:
    path = tmp_path / "mutmut-stats.json"
    path.write_text(json.dumps({"duration_by_test": durations}), encoding="utf-8")
    return path


def test_a_mutant_run_takes_the_fastest_tests_first_and_untimed_ones_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUTANT_UNDER_TEST", MUTANT)
    stats = _stats(tmp_path, {"slow": 9.0, "fast": 0.1, "mid": 2.0, "tie": 2.0})
    items = _items("untimed", "slow", "mid", "fast", "tie")
    order_for_mutant_run(items, stats)
    assert [item.nodeid for item in items] == ["fast", "mid", "tie", "slow", "untimed"]


@pytest.mark.parametrize("under_test", [None, "", "stats", "fail"])
def test_any_other_run_keeps_pytests_order(
    under_test: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plain suite, and mutmut's clean, stats and forced-fail runs, are left as collected.
    if under_test is None:
        monkeypatch.delenv("MUTANT_UNDER_TEST", raising=False)
    else:
        monkeypatch.setenv("MUTANT_UNDER_TEST", under_test)
    items = _items("slow", "fast")
    order_for_mutant_run(items, _stats(tmp_path, {"slow": 9.0, "fast": 0.1}))
    assert [item.nodeid for item in items] == ["slow", "fast"]


@pytest.mark.parametrize("content", [None, "not json", '{"other": {}}'])
def test_a_mutant_run_without_usable_durations_keeps_pytests_order(
    content: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUTANT_UNDER_TEST", MUTANT)
    stats = tmp_path / "mutmut-stats.json"
    if content is not None:
        stats.write_text(content, encoding="utf-8")
    items = _items("slow", "fast")
    order_for_mutant_run(items, stats)
    assert [item.nodeid for item in items] == ["slow", "fast"]
