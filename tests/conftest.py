"""Shared fixtures: the host's conformance plugin needs to be told where the module lives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.mutation_limit import limit_for_mutant_run
from tests.mutation_order import order_for_mutant_run

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "amplifier_module_context_simple"
CORPUS_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpus"
# Where mutmut keeps each test's measured duration when these tests run from its ``mutants/``.
MUTMUT_STATS = Path(__file__).resolve().parent.parent / "mutmut-stats.json"


# For mutation runs (``[tool.mutmut]`` in pyproject.toml): mutmut's copies run several times
# slower, and the clean run and every mutant's run must draw the same examples.
settings.register_profile("mutation", deadline=None, derandomize=True, database=None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="run soak tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    order_for_mutant_run(items, MUTMUT_STATS)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow soak test: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with limit_for_mutant_run(item.nodeid, MUTMUT_STATS):
        return (yield)


@pytest.fixture
def module_path() -> Path:
    """Override the host plugin's directory-name heuristic: the checkout may be named anything."""
    return PACKAGE_DIR


class Recorder:
    """A hooks stand-in for unit tests of event payloads (the real registry is used elsewhere)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    async def emit(self, event: str, data: dict) -> None:
        self.events.append((event, data))

    def named(self, event: str) -> list[dict]:
        return [d for e, d in self.events if e == event]
