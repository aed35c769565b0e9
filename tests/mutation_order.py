"""Fastest tests first when mutmut runs a mutant (``[tool.mutmut]`` in pyproject.toml).

mutmut runs a mutant's tests with ``-x``: the first failing test ends the run. Its default
process mode sorts the tests by the durations it measured, fastest first, so a killed mutant
usually dies within seconds. The fork-server mode this project needs (docs/mutation-scores.md)
passes the same tests in no set order, and a killed mutant then often runs minutes of property
tests before the one that fails. The order decides only how soon a run ends, never whether a
test fails, so restoring mutmut's own order here changes no verdict.

``mutant_durations`` (mutmut's measured durations, inside a mutant's run only) is also what
``tests/mutation_limit.py`` sets each test's limit from.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

# mutmut names each mutant ``<module>.x_<function>__mutmut_<n>`` in this variable; its other
# runs (the clean run, the stats run) use other values or none.
_MUTANT_MARK = "__mutmut_"


def mutant_durations(stats_file: Path) -> dict[str, float] | None:
    """mutmut's measured duration of each test, inside a mutant's run; else None.

    ``stats_file`` is mutmut's ``mutmut-stats.json``. None also when it cannot be read.
    """
    if _MUTANT_MARK not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return None
    return _durations(stats_file)


# Read once per process: each mutant's run is a process of its own, and the file is megabytes
# (every test asks for its limit, tests/mutation_limit.py).
@functools.cache
def _durations(stats_file: Path) -> dict[str, float] | None:
    try:
        return json.loads(stats_file.read_text(encoding="utf-8"))["duration_by_test"]
    except (OSError, ValueError, KeyError):
        return None


def order_for_mutant_run(items: list[pytest.Item], stats_file: Path) -> None:
    """Sort ``items`` in place, fastest first, inside a mutmut mutant's run; else leave them."""
    durations = mutant_durations(stats_file)
    if durations is None:
        return
    # A test mutmut has not timed goes last; sorted() is stable, so ties keep pytest's order.
    items[:] = sorted(items, key=lambda item: durations.get(item.nodeid, float("inf")))
