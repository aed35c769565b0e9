"""The replay's own views priced through a simulated provider cache
(replay/provider/replay_cache.py)."""

from __future__ import annotations

from typing import Any

from amplifier_module_context_simple import estimate_message_tokens
from amplifier_module_context_simple.replay.provider.replay_cache import ReplayCache

from .cli_runs import run_json


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_a_request_that_extends_the_last_reads_it_and_a_moved_tail_reads_only_at_markers() -> None:
    cache = ReplayCache(None, {})
    first = [message("task " * 200), message("step one " * 300)]
    tokens = sum(map(estimate_message_tokens, first))
    assert cache.add(first, tool_tokens=0, model=None) == tokens * 1.25  # all written
    extended = [*first, message("step two")]
    new = estimate_message_tokens(extended[-1])
    # It reads the whole first request at 0.1x and writes what is new.
    assert cache.add(extended, tool_tokens=0, model=None) == tokens * 0.1 + new * 1.25
    cost = cache.cost()
    assert cost is not None and cost.times_assumed
    # Cached only at each request's end, the extension still starts with the whole first one.
    assert cost.priced_at_markers == cost.priced_input_tokens

    moved = ReplayCache(None, {})
    tail = message("notice " * 100)
    moved.add([*first, tail], tool_tokens=0, model=None)
    moved.add([*first, message("step two"), tail], tool_tokens=0, model=None)
    cost = moved.cost()
    assert cost is not None
    # The tail that moved: the second request shares the first's messages but not its end.
    assert cost.priced_at_markers > cost.priced_input_tokens


def test_a_known_model_gets_dollars() -> None:
    cache = ReplayCache("claude47", {})
    cache.add([message("hello " * 1000)], tool_tokens=500, model="claude-opus-4-8")
    cost = cache.cost()
    assert cost is not None and cost.input_usd is not None
    assert cost.input_usd == cost.priced_input_tokens * 5 / 1_000_000


def test_the_replay_prices_its_views_and_the_tail_notice_costs_more_at_the_markers() -> None:
    in_place = run_json("replay")["summary"]["simulated_cache"]
    tail = run_json("replay", "--notice-placement", "tail")["summary"]["simulated_cache"]
    assert in_place["times_assumed"] is True and in_place["lifetime_s"] == 300
    assert tail["priced_input_tokens_at_markers"] > in_place["priced_input_tokens_at_markers"]
    report = run_json("replay")
    per_request = sum(r["simulated_priced_input_tokens"] for r in report["requests"])
    assert abs(per_request - in_place["priced_input_tokens"]) < 1
