"""The ``Budget`` record's words and payload, read off records built field by field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from amplifier_module_context_simple.sizing._budget_record import Budget


def _windowed(**fields: Any) -> Budget:
    record: dict[str, Any] = {
        "source": "provider_model_info",
        "context_window": 10_000,
        "max_output_tokens": 2_000,
        "reserved_output": 2_000,
        "derived_budget": 7_000,
        "max_tokens": None,
        "max_tokens_fallback": 100_000,
        "capped": False,
        "effective_budget": 7_000,
        "margin": 1_000,
    }
    return Budget(**{**record, **fields})


def test_a_window_with_no_output_held_back_says_so() -> None:
    words = _windowed(reserved_output=0, margin=3_000).parts_text()
    assert words.startswith("the 10,000-token window less 0 for the output the provider asks for")


def test_a_learned_overhead_crowds_the_view_only_past_the_target_share() -> None:
    budget = _windowed()

    def crowded(effective: int, learned: int, share: float) -> bool:
        figures = {"effective_budget": effective, "learned_overhead_tokens": learned}
        return replace(budget, **figures).crowded(share)

    assert not crowded(50, 50, 0.5), "exactly the target share is not crowded"
    assert crowded(49, 50, 0.5)
    assert crowded(2, 1, 0.9), "one token learned counts"
    assert not crowded(1, 0, 0.9), "nothing learned crowds nothing"
