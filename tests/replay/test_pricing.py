"""The priced input of a request (replay/provider/pricing.py): the arithmetic, the table, the
matching, and what the breaks cost."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple.replay.provider.pricing import (
    DEFAULT_PRICES,
    PRICE_TABLE,
    CacheCounts,
    Prices,
    break_cost,
    ideal_counts,
    input_dollars,
    priced_input_tokens,
    prices_for,
    recorded_counts,
)

from .session_payloads import SESSION_DIR, recorded

# An Amplifier llm:response usage: input_tokens is gross (2,000 fresh + 8,000 read).
USAGE = {"input_tokens": 10_000, "cache_read_tokens": 8_000, "cache_write_tokens": 2_000}


def test_a_recorded_usage_is_split_into_fresh_read_and_written() -> None:
    assert recorded_counts(USAGE) == CacheCounts(fresh=2_000, read=8_000, written=2_000)
    assert recorded_counts(USAGE).occupancy == 12_000  # type: ignore[union-attr]


def test_priced_input_by_hand_at_anthropics_five_minute_cache() -> None:
    # 2,000 fresh x 1 + 2,000 written x 1.25 + 8,000 read x 0.1
    assert priced_input_tokens(USAGE) == pytest.approx(2_000 + 2_500 + 800)


def test_dollars_agree_with_the_vendors_per_token_prices() -> None:
    # Opus 4.8: $5 / $6.25 / $0.50 per MTok for fresh / written / read.
    opus = prices_for("claude-opus-4-8")
    expected = (2_000 * 5 + 2_000 * 6.25 + 8_000 * 0.5) / 1_000_000
    assert input_dollars(USAGE, opus) == pytest.approx(expected) == pytest.approx(0.0265)
    # GPT-5: $1.25 fresh, $0.125 cached, no write premium.
    gpt = prices_for("gpt-5-2025-08-07")
    usage = {"input_tokens": 10_000, "cache_read_tokens": 9_000}
    assert priced_input_tokens(usage, gpt) == pytest.approx(1_000 + 900)
    assert input_dollars(usage, gpt) == pytest.approx((1_000 * 1.25 + 9_000 * 0.125) / 1e6)


def test_an_unknown_model_gets_token_equivalents_and_no_dollars() -> None:
    unknown = prices_for("some-local-model")
    assert unknown is DEFAULT_PRICES
    assert input_dollars(USAGE, unknown) is None
    assert priced_input_tokens(USAGE, unknown) == pytest.approx(5_300)


def test_usage_without_an_input_figure_is_not_priced() -> None:
    assert priced_input_tokens(None) is None
    assert priced_input_tokens({"cache_read_tokens": 5}) is None
    assert priced_input_tokens({"input_tokens": True}) is None  # a bool is not a count
    assert input_dollars({}, prices_for("claude-opus-4-8")) is None


def test_a_usage_record_object_is_read_like_a_mapping() -> None:
    record = SimpleNamespace(input_tokens=10_000, cache_read_tokens=8_000, cache_write_tokens=2_000)
    assert priced_input_tokens(record) == priced_input_tokens(USAGE)


def test_missing_cache_figures_are_no_cache_activity() -> None:
    assert priced_input_tokens({"input_tokens": 4_321}) == 4_321


def test_reads_above_the_gross_input_leave_no_negative_fresh_count() -> None:
    assert recorded_counts({"input_tokens": 100, "cache_read_tokens": 300}) == CacheCounts(
        0, 300, 0
    )


@pytest.mark.parametrize(
    ("model", "prefix"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-opus-4-8", "claude-opus-4-8"),
        ("Claude-Haiku-4-5@20251001", "claude-haiku-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
        ("claude-opus-5-5", "claude-opus-5-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-5-mini", "gpt-5-mini"),
        ("gpt-5.4-nano", "gpt-5.4-nano"),
    ],
)
def test_a_model_name_matches_its_row_dated_or_not(model: str, prefix: str) -> None:
    assert prices_for(model).model_prefix == prefix


@pytest.mark.parametrize(
    "model", ["claude-opus-4-9", "gpt-5.6", "gpt-5-codex", "gpt-4o-audio", "claude-opus-latest"]
)
def test_a_variant_the_table_does_not_list_gets_no_neighbours_price(model: str) -> None:
    # gpt-5.6 starts with "gpt-5", claude-opus-4-9 with "claude-opus-4": neither is priced as it.
    assert prices_for(model) is DEFAULT_PRICES


def test_no_model_name_is_the_default() -> None:
    assert prices_for(None) is DEFAULT_PRICES
    assert prices_for("") is DEFAULT_PRICES


def test_every_row_says_where_its_figure_is_from_and_when() -> None:
    prefixes = [row.model_prefix for row in PRICE_TABLE]
    assert len(prefixes) == len(set(prefixes))
    for row in PRICE_TABLE:
        assert row.base_per_mtok is not None and row.base_per_mtok > 0
        assert row.as_of is not None and re.fullmatch(r"\d{4}-\d{2}-\d{2}", row.as_of)
        assert row.source is not None and row.source.startswith("https://")
        assert 0 < row.read <= 1 <= row.write


def test_each_vendors_cache_multipliers() -> None:
    for row in PRICE_TABLE:
        assert row.model_prefix is not None
        if row.model_prefix.startswith("claude-"):
            # Anthropic: 5-minute writes at 1.25x; reads at 0.1x (0.05x on the 5.5 models).
            assert row.write == 1.25, row
            assert row.read in (0.1, 0.05), row
        else:
            assert row.model_prefix.startswith("gpt-")
            assert row.write == 1.0, row  # OpenAI bills no write premium
    assert prices_for("gpt-4o").read == 0.5
    assert prices_for("gpt-4.1").read == 0.25
    assert prices_for("gpt-5").read == 0.1


counts = st.builds(
    CacheCounts,
    fresh=st.integers(0, 2_000_000),
    read=st.integers(0, 2_000_000),
    written=st.integers(0, 2_000_000),
)


@given(counts)
def test_priced_input_lies_between_the_read_and_the_write_price_of_the_occupancy(
    figures: CacheCounts,
) -> None:
    priced = figures.priced_tokens()
    occupancy = figures.occupancy
    assert 0.1 * occupancy - 1e-6 <= priced <= 1.25 * occupancy + 1e-6
    for row in PRICE_TABLE:
        priced = figures.priced_tokens(row)
        assert min(row.read, 1) * occupancy - 1e-6 <= priced <= row.write * occupancy + 1e-6


@given(st.integers(0, 10_000_000), st.sampled_from((DEFAULT_PRICES, *PRICE_TABLE)))
def test_with_no_cache_activity_priced_input_is_the_occupancy(tokens: int, prices: Prices) -> None:
    assert priced_input_tokens({"input_tokens": tokens}, prices) == tokens
    assert CacheCounts(tokens, 0, 0).priced_tokens(prices) == tokens


@given(counts, st.integers(-10, 10_000_000))
def test_the_ideal_never_costs_more_and_keeps_the_occupancy(
    actual: CacheCounts, shared: int
) -> None:
    ideal = ideal_counts(actual, shared)
    assert ideal.occupancy == actual.occupancy
    assert min(ideal.fresh, ideal.read, ideal.written) >= 0
    assert ideal.read >= actual.read
    assert ideal.priced_tokens() <= actual.priced_tokens() + 1e-6
    if shared <= actual.read:
        assert ideal == actual


def test_the_ideal_reads_what_was_shared_out_of_the_writes_first() -> None:
    # 11,000 tokens, 2,000 read and 9,000 written, sharing 10,000 with the request before.
    assert ideal_counts(CacheCounts(0, 2_000, 9_000), 10_000) == CacheCounts(0, 10_000, 1_000)
    # Fresh tokens go once the writes are used up; shared above the occupancy is capped.
    assert ideal_counts(CacheCounts(500, 0, 300), 10_000) == CacheCounts(0, 800, 0)


def test_the_share_of_the_cost_the_breaks_caused_by_hand() -> None:
    requests = [
        (CacheCounts(0, 0, 10_000), 0),  # the first: all written
        (CacheCounts(0, 2_000, 9_000), 10_000),  # a break: shared 10,000, read 2,000
        (CacheCounts(0, 11_000, 500), 11_000),  # read all it shared
    ]
    cost = break_cost(requests)
    actual = 12_500 + (200 + 11_250) + (1_100 + 625)
    ideal = 12_500 + (1_000 + 1_250) + (1_100 + 625)
    assert cost.actual_tokens == pytest.approx(actual)
    assert cost.ideal_tokens == pytest.approx(ideal)
    assert cost.caused_tokens == pytest.approx(9_200)
    assert cost.caused_share == pytest.approx(9_200 / 25_675)
    assert cost.actual_dollars is None
    priced = break_cost(requests, prices_for("claude-sonnet-4-6"))
    assert priced.actual_dollars == pytest.approx(actual * 3 / 1e6)
    assert priced.ideal_dollars == pytest.approx(ideal * 3 / 1e6)


def test_break_cost_reads_recorded_usage_and_skips_requests_without_it() -> None:
    requests = [
        ({"input_tokens": 0, "cache_write_tokens": 10_000}, 0),
        ({"llm": "no usage"}, 10_000),
        ({"input_tokens": 2_000, "cache_read_tokens": 2_000, "cache_write_tokens": 9_000}, 10_000),
    ]
    cost = break_cost(requests)
    assert cost.actual == CacheCounts(0, 2_000, 19_000)
    assert cost.ideal == CacheCounts(0, 10_000, 11_000)


def test_a_session_without_breaks_or_usage() -> None:
    unbroken = [(CacheCounts(0, 0, 100), 0), (CacheCounts(0, 100, 5), 100)]
    assert break_cost(unbroken).caused_share == 0
    assert break_cost([]).caused_share is None


@pytest.mark.skipif(not SESSION_DIR.is_dir(), reason="the shared recorded session is absent")
def test_the_dollars_agree_with_the_cost_the_provider_recorded() -> None:
    """The real session (claude-opus-4-8) records each response's ``cost_usd``: our input
    dollars plus its output at $25/MTok (litellm 1.110.2's output price for the model) are it,
    to the cent-fraction, on every request: a check of the table's row that does not go
    through litellm's input figures."""
    _, usages = recorded(SESSION_DIR)
    opus = prices_for("claude-opus-4-8")
    assert usages
    for usage in usages:
        output = usage["output_tokens"] * 25 / 1e6
        assert input_dollars(usage, opus) == pytest.approx(float(usage["cost_usd"]) - output)
