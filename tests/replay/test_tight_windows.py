"""Issue 35: on tight windows what the agent goes on to use stays findable, what the views
hold in context does not shrink, and the input costs no more than before the map.

The "before" figures were measured by ``tests.replay.tight_windows`` on the main branch
before the map existed (``compaction_map_share=0`` still reproduces them but for the notice's
shorter prose): in context 82.2% / 93.1% / 95.5% and priced input 431,266 / 528,943 /
688,602 at 8,000 / 16,000 / 32,000 tokens.
"""

from __future__ import annotations

import logging

import pytest

from .tight_windows import CORPUS, measure

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/corpus")

# budget: (findable at least, in context before, priced input before)
TARGETS = {
    8_000: (0.92, 0.822, 431_266),
    16_000: (0.98, 0.931, 528_943),
    32_000: (0.98, 0.955, 688_602),
}


@pytest.mark.parametrize("budget", sorted(TARGETS))
def test_what_the_agent_used_next_stays_findable_at_no_extra_cost(
    budget: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL)
    findable, in_context_before, priced_before = TARGETS[budget]
    figures = measure(budget)
    assert figures.findable_share >= findable
    assert figures.in_context_share >= in_context_before - 0.01
    assert figures.priced_input <= priced_before


def test_without_a_map_only_what_is_in_context_is_findable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.CRITICAL)
    figures = measure(8_000, {"compaction_map_share": 0.0})
    assert figures.findable == figures.kept
    assert figures.findable_share < TARGETS[8_000][0]
