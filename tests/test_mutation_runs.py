"""The plugin tests/conftest.py installs for mutmut's mutant runs: the order of a mutant's
tests (tests/mutation_order.py) and the CPU-time limit on each (tests/mutation_limit.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.mutation_limit import (
    TIMEOUT_EXIT_CODE,
    UNTIMED_LIMIT_S,
    cpu_seconds_allowed,
    limit_for_mutant_run,
    limited_cpu,
)
from tests.mutation_order import order_for_mutant_run

MUTANT = "amplifier_module_context_simple.sizing._room.x_made_under__mutmut_3"
ROOT = Path(__file__).resolve().parent.parent


def _items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def _stats(tmp_path: Path, durations: dict[str, float]) -> Path:
    path = tmp_path / "mutmut-stats.json"
    path.write_text(json.dumps({"duration_by_test": durations}), encoding="utf-8")
    return path


@pytest.fixture(params=[None, "", "stats", "fail"])
def other_run(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain suite, and mutmut's clean, stats and forced-fail runs: no mutant's run."""
    if request.param is None:
        monkeypatch.delenv("MUTANT_UNDER_TEST", raising=False)
    else:
        monkeypatch.setenv("MUTANT_UNDER_TEST", request.param)


# --- the order ---------------------------------------------------------------------------------


def test_a_mutant_run_takes_the_fastest_tests_first_and_untimed_ones_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUTANT_UNDER_TEST", MUTANT)
    stats = _stats(tmp_path, {"slow": 9.0, "fast": 0.1, "mid": 2.0, "tie": 2.0})
    items = _items("untimed", "slow", "mid", "fast", "tie")
    order_for_mutant_run(items, stats)
    assert [item.nodeid for item in items] == ["fast", "mid", "tie", "slow", "untimed"]


@pytest.mark.usefixtures("other_run")
def test_any_other_run_keeps_pytests_order(tmp_path: Path) -> None:
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


# --- the limit ---------------------------------------------------------------------------------


class Expired(Exception):
    pass


def _expire() -> None:
    raise Expired


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_test_gets_more_than_it_took_and_an_untimed_one_the_fixed_bound() -> None:
    assert cpu_seconds_allowed(0.0) > 1.0
    assert cpu_seconds_allowed(30.0) > 5 * 30.0
    assert cpu_seconds_allowed(30.0) > cpu_seconds_allowed(3.0)
    assert cpu_seconds_allowed(None) == UNTIMED_LIMIT_S


def test_a_block_past_its_cpu_time_is_stopped_and_one_in_time_is_not() -> None:
    with pytest.raises(Expired), limited_cpu(0.1, on_expiry=_expire):
        _spin(5.0)
    with limited_cpu(2.0, on_expiry=_expire):
        _spin(0.05)
    # Nothing is left armed once the block ends.
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_an_endless_test_ends_the_process_as_mutmut_reads_a_timeout() -> None:
    code = (
        "from tests.mutation_limit import limited_cpu\n"
        "with limited_cpu(0.2):\n"
        "    while True:\n"
        "        pass\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60, check=False)
    assert done.returncode == TIMEOUT_EXIT_CODE


def test_inside_a_mutant_run_a_test_is_limited_by_its_measured_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUTANT_UNDER_TEST", MUTANT)
    stats = _stats(tmp_path, {"quick": 0.5, "long": 40.0})
    with limit_for_mutant_run("quick", stats):
        quick = signal.getitimer(signal.ITIMER_PROF)[0]
    with limit_for_mutant_run("long", stats):
        long = signal.getitimer(signal.ITIMER_PROF)[0]
    with limit_for_mutant_run("untimed", stats):
        untimed = signal.getitimer(signal.ITIMER_PROF)[0]
    # The timer reads back to its clock's granularity.
    assert quick == pytest.approx(cpu_seconds_allowed(0.5), abs=0.1)
    assert long == pytest.approx(cpu_seconds_allowed(40.0), abs=0.1)
    assert untimed == pytest.approx(UNTIMED_LIMIT_S, abs=0.1)


@pytest.mark.usefixtures("other_run")
def test_any_other_run_is_not_limited(tmp_path: Path) -> None:
    with limit_for_mutant_run("quick", _stats(tmp_path, {"quick": 0.5})):
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
