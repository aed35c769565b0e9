"""A CPU-time limit on each test of a mutmut mutant's run (``[tool.mutmut]`` in pyproject.toml).

mutmut limits a mutant's whole run to 30 times what all the tests that reach the mutated
function took unmutated (its default ``timeout_multiplier`` of 15, doubled). For a function
most of the suite reaches that is hours, and a mutant that turns a loop endless spends all of
it inside the first test that calls the loop. Here each test gets a limit of its own, from the
duration mutmut measured for it; a test that runs past its limit ends the mutant's process with
the exit code mutmut reads as a timeout, so the verdict is the one mutmut would give, only
hours sooner. A test that passes in time is unaffected.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from tests.mutation_order import mutant_durations

# mutmut's status for this exit code is "timeout" (mutmut.stats.status_by_exit_code).
TIMEOUT_EXIT_CODE = 36
# A test mutmut has not timed still gets a bound, as long as the slowest test in the suite.
UNTIMED_LIMIT_S = 120.0
# Generous: the mutant's copies run through mutmut's trampolines, as the timed run did, and a
# mutant may legitimately take a slower path. What this must catch is a test that never ends.
LIMIT_FACTOR = 10.0
LIMIT_FLOOR_S = 10.0


def cpu_seconds_allowed(measured: float | None) -> float:
    """The CPU seconds a test that took ``measured`` seconds unmutated may take in a mutant."""
    if measured is None:
        return UNTIMED_LIMIT_S
    return LIMIT_FLOOR_S + LIMIT_FACTOR * measured


def _exit_as_timeout() -> None:
    os._exit(TIMEOUT_EXIT_CODE)


@contextmanager
def limited_cpu(
    seconds: float, on_expiry: Callable[[], None] = _exit_as_timeout
) -> Generator[None]:
    """Call ``on_expiry`` once the process has spent ``seconds`` of CPU time inside the block."""

    def expire(signum: int, frame: FrameType | None) -> None:
        on_expiry()

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


@contextmanager
def limit_for_mutant_run(nodeid: str, stats_file: Path) -> Generator[None]:
    """Limit the test ``nodeid`` inside a mutmut mutant's run; any other run is left alone."""
    durations = mutant_durations(stats_file)
    if durations is None:
        yield
        return
    with limited_cpu(cpu_seconds_allowed(durations.get(nodeid))):
        yield
