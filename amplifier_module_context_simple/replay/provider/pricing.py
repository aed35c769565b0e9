"""The priced input of a request: what its prompt cost, given how much of it the cache served.

A provider bills a request's prompt in three parts (PROVIDER-RULES.md, "Prompt caching"):
tokens it read from its cache (the read price), tokens it wrote to its cache (the write price)
and the rest (the base input price). :class:`CacheCounts` holds the three; its
:meth:`~CacheCounts.priced_tokens` expresses the sum in base-price token equivalents (a read
token counts 0.1, a written one 1.25 at Anthropic's 5-minute cache), so sessions on different
models compare on one scale, and :meth:`~CacheCounts.dollars` multiplies by the model's base
price where :data:`PRICE_TABLE` knows it (an unknown model: token equivalents only, dollars
None, priced with Anthropic's 5-minute multipliers, :data:`DEFAULT_PRICES`).

Recorded usage is Amplifier's ``llm:response`` usage (a mapping, or a record with the same
attributes): ``input_tokens`` is gross, the fresh tokens plus ``cache_read_tokens``;
``cache_write_tokens`` comes on top (:func:`recorded_counts`, :func:`priced_input_tokens`).

:func:`break_cost` answers "what share of the cost did the cache breaks cause": each request is
priced as it was and as it would have been had it read everything it shared with the request
before it.

Not modelled: Anthropic's 1-hour cache (writes at 2x), long-context tiers (OpenAI's GPT-5.4 and
5.5 bill input past 272K tokens at twice the price; Anthropic's Sonnet 4 / 4.5 past 200K on
some platforms), batch / flex / priority tiers, regional uplifts. Output tokens are not priced:
the context manager decides the prompt, not the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..payloads.payload import usage_figure

__all__ = [
    "DEFAULT_PRICES",
    "NO_TOKENS",
    "PRICE_TABLE",
    "BreakCost",
    "CacheCounts",
    "Prices",
    "break_cost",
    "ideal_counts",
    "input_dollars",
    "priced_input_tokens",
    "prices_for",
    "recorded_counts",
]


@dataclass(frozen=True)
class Prices:
    """A model family's input prices: the base price and the cache's multiples of it."""

    model_prefix: str | None = None
    """The model names this row prices (see :func:`prices_for`); None: not a table row."""
    base_per_mtok: float | None = None
    """US dollars per million fresh input tokens; None: unknown (no dollars)."""
    write: float = 1.25
    """A cache-written token, in base-price tokens."""
    read: float = 0.1
    """A cache-read token, in base-price tokens."""
    source: str | None = None
    as_of: str | None = None
    """The date the figure is from (ISO)."""


DEFAULT_PRICES = Prices()
"""For a model the table does not know: Anthropic's 5-minute-cache multipliers (writes 1.25x,
reads 0.1x), the convention the issue and the reports state costs in, and no dollars."""

_ANTHROPIC = "https://platform.claude.com/docs/en/about-claude/pricing"
_OPENAI = "https://developers.openai.com/api/docs/pricing"
_AS_OF = "2026-12-01"


def _anthropic(prefix: str, base: float, write: float, read: float) -> Prices:
    # Given in $/MTok as the vendor lists them; stored as multiples so token equivalents
    # need no dollar figure (rounded: 0.3 / 3.0 is 0.09999... in binary).
    return Prices(prefix, base, round(write / base, 6), round(read / base, 6), _ANTHROPIC, _AS_OF)


def _openai(prefix: str, base: float, read: float | None) -> Prices:
    # OpenAI caches on its own and bills no write premium: a written token costs the base
    # price. A model without a cached-input price has no discount (read: 1.0).
    ratio = 1.0 if read is None else round(read / base, 6)
    return Prices(prefix, base, 1.0, ratio, _OPENAI, _AS_OF)


PRICE_TABLE: tuple[Prices, ...] = (
    # Where every figure comes from: this machine reaches no vendor page, so none of these was
    # checked against the vendor's pricing page here. Each was read on 2026-12-01 from the
    # price table litellm 1.110.2 ships on PyPI (model_prices_and_context_window_backup.json;
    # litellm is not a dependency): input_cost_per_token, cache_creation_input_token_cost
    # (5-minute write) and cache_read_input_token_cost, of the row named as the prefix, whose
    # "source" field names the URL given here. Exceptions are noted on their rows.
    #
    # Anthropic ($/MTok: base, 5-minute write, read). Opus 4.5 and later: 5 / 6.25 / 0.50.
    _anthropic("claude-opus-4-8", 5.0, 6.25, 0.5),
    _anthropic("claude-opus-4-7", 5.0, 6.25, 0.5),
    _anthropic("claude-opus-4-6", 5.0, 6.25, 0.5),
    _anthropic("claude-opus-4-5", 5.0, 6.25, 0.5),
    # Opus 4 and 4.1: litellm 1.110.2 has no Anthropic-direct row for them (retired); the
    # figures are its Bedrock rows us.anthropic.claude-opus-4-1-20250805-v1:0 and
    # us.anthropic.claude-opus-4-20250514-v1:0 (Bedrock's on-demand US price), 15 / 18.75 / 1.50.
    _anthropic("claude-opus-4-1", 15.0, 18.75, 1.5),
    _anthropic("claude-opus-4", 15.0, 18.75, 1.5),
    # Opus 5: 5 / 6.25 / 0.50. Opus 5.5: 4 / 5 / 0.20 (its reads are 0.05x, not 0.1x).
    _anthropic("claude-opus-5-5", 4.0, 5.0, 0.2),
    _anthropic("claude-opus-5", 5.0, 6.25, 0.5),
    # Sonnet 4.5 and 4.6: 3 / 3.75 / 0.30. Sonnet 4: as for Opus 4, from the Bedrock row
    # us.anthropic.claude-sonnet-4-20250514-v1:0 (source: aws.amazon.com/bedrock/pricing).
    _anthropic("claude-sonnet-4-6", 3.0, 3.75, 0.3),
    _anthropic("claude-sonnet-4-5", 3.0, 3.75, 0.3),
    _anthropic("claude-sonnet-4", 3.0, 3.75, 0.3),
    # Sonnet 5: 2 / 2.50 / 0.20. Sonnet 5.5: 2 / 2.50 / 0.10 (reads 0.05x).
    _anthropic("claude-sonnet-5-5", 2.0, 2.5, 0.1),
    _anthropic("claude-sonnet-5", 2.0, 2.5, 0.2),
    # Haiku 4.5: 1 / 1.25 / 0.10. Haiku 5.5: 0.10 / 0.125 / 0.01 (litellm's source for this
    # row: platform.claude.com/docs/en/models/haiku-5-5/overview).
    _anthropic("claude-haiku-5-5", 0.1, 0.125, 0.01),
    _anthropic("claude-haiku-4-5", 1.0, 1.25, 0.1),
    # OpenAI ($/MTok: base, cached input). GPT-4o: 2.50 / 1.25 (0.5x); its first snapshot,
    # gpt-4o-2024-05-13, is 5.00 with no cached-input price.
    _openai("gpt-4o-2024-05-13", 5.0, None),
    _openai("gpt-4o-mini", 0.15, 0.075),
    _openai("gpt-4o", 2.5, 1.25),
    # GPT-4.1: 2.00 / 0.50, mini 0.40 / 0.10, nano 0.10 / 0.025 (all 0.25x).
    _openai("gpt-4.1-mini", 0.4, 0.1),
    _openai("gpt-4.1-nano", 0.1, 0.025),
    _openai("gpt-4.1", 2.0, 0.5),
    # GPT-5 and 5.1: 1.25 / 0.125, mini 0.25 / 0.025, nano 0.05 / 0.005 (0.1x); pro 15.00,
    # no cached-input price.
    _openai("gpt-5-mini", 0.25, 0.025),
    _openai("gpt-5-nano", 0.05, 0.005),
    _openai("gpt-5-pro", 15.0, None),
    _openai("gpt-5", 1.25, 0.125),
    _openai("gpt-5.1", 1.25, 0.125),
    # GPT-5.2: 1.75 / 0.175. GPT-5.4: 2.50 / 0.25, mini 0.75 / 0.075, nano 0.20 / 0.02.
    # GPT-5.5: 5.00 / 0.50. (Up to 272K input; past it 5.4 and 5.5 double, not modelled.)
    _openai("gpt-5.2", 1.75, 0.175),
    _openai("gpt-5.4-mini", 0.75, 0.075),
    _openai("gpt-5.4-nano", 0.2, 0.02),
    _openai("gpt-5.4", 2.5, 0.25),
    _openai("gpt-5.5", 5.0, 0.5),
    # Left out on purpose: gpt-5.6, whose litellm row has a cache-write price (1.25x) but no
    # source, against OpenAI's no-write-premium rule; an unknown model gets no dollars rather
    # than a doubtful figure.
)

# A row's prefix matches a name only where the rest is a snapshot date, or nothing: the table
# prices each variant on its own (gpt-5-mini costs a fifth of gpt-5), so a name the table does
# not list (gpt-5.6, claude-opus-4-9) must get no price rather than its neighbour's.
_SNAPSHOT = re.compile(r"(?:[-@](?:\d{8}|\d{4}-\d{2}-\d{2}))?(?:-v\d+(?::\d+)?)?")


def prices_for(model: str | None) -> Prices:
    """The table's row for ``model``, else :data:`DEFAULT_PRICES` (no dollars).

    As :func:`~.known_windows.known_window` matches: case-insensitive, a ``provider/`` prefix
    ignored, the longest prefix wins; here the rest of the name must be a snapshot date
    (``-20250929``, ``-2024-08-06``, ``@20250514``, optionally ``-v1:0``) or nothing.
    """
    if not model:
        return DEFAULT_PRICES
    name = model.strip().lower().rsplit("/", 1)[-1]
    usable = [
        row
        for row in PRICE_TABLE
        if row.model_prefix is not None
        and name.startswith(row.model_prefix)
        and _SNAPSHOT.fullmatch(name, len(row.model_prefix)) is not None
    ]
    if not usable:
        return DEFAULT_PRICES
    return max(usable, key=lambda row: len(row.model_prefix or ""))


@dataclass(frozen=True)
class CacheCounts:
    """One request's prompt (or a session's prompts), by how the provider billed it."""

    fresh: int
    """Neither read from nor written to the cache: billed at the base price."""
    read: int
    written: int

    @property
    def occupancy(self) -> int:
        """Every prompt token: fresh + read + written."""
        return self.fresh + self.read + self.written

    def priced_tokens(self, prices: Prices = DEFAULT_PRICES) -> float:
        """Base-price token equivalents."""
        return self.fresh + self.written * prices.write + self.read * prices.read

    def dollars(self, prices: Prices = DEFAULT_PRICES) -> float | None:
        """US dollars; None where the model's price is unknown."""
        if prices.base_per_mtok is None:
            return None
        return self.priced_tokens(prices) * prices.base_per_mtok / 1_000_000

    def __add__(self, other: CacheCounts) -> CacheCounts:
        return CacheCounts(
            self.fresh + other.fresh, self.read + other.read, self.written + other.written
        )


NO_TOKENS = CacheCounts(0, 0, 0)


def recorded_counts(usage: Any) -> CacheCounts | None:
    """The counts of an ``llm:response`` usage; None when it records no ``input_tokens``.

    ``input_tokens`` is gross (fresh + reads), so fresh = gross - reads. A record whose reads
    exceed its gross input (a provider module reporting net input would do that) gets fresh 0,
    not a negative count: the reads and writes, which the provider reports itself, stand.
    """
    gross = usage_figure(usage, "input_tokens")
    if gross is None:
        return None
    read = max(usage_figure(usage, "cache_read_tokens") or 0, 0)
    written = max(usage_figure(usage, "cache_write_tokens") or 0, 0)
    return CacheCounts(max(gross - read, 0), read, written)


def priced_input_tokens(usage: Any, prices: Prices = DEFAULT_PRICES) -> float | None:
    """A recorded request's input in base-price token equivalents (None: no input recorded)."""
    counts = recorded_counts(usage)
    return None if counts is None else counts.priced_tokens(prices)


def input_dollars(usage: Any, prices: Prices = DEFAULT_PRICES) -> float | None:
    """A recorded request's input in US dollars (None: no input recorded, or no price)."""
    counts = recorded_counts(usage)
    return None if counts is None else counts.dollars(prices)


def ideal_counts(actual: CacheCounts, shared: int) -> CacheCounts:
    """``actual`` as it would have been had it read the ``shared`` tokens it has in common
    with the request before it (capped at its occupancy).

    The tokens read beyond what was read come out of the writes first (a prefix written again
    is what a break costs), then out of the fresh tokens; so the ideal never costs more than
    the actual, and equals it when the request read at least what it shared.
    """
    read = max(actual.read, min(max(shared, 0), actual.occupancy))
    more = read - actual.read
    written = max(actual.written - more, 0)
    return CacheCounts(actual.occupancy - read - written, read, written)


@dataclass(frozen=True)
class BreakCost:
    """A session's input priced as it was and as it would have been without its breaks."""

    actual: CacheCounts
    ideal: CacheCounts
    prices: Prices

    @property
    def actual_tokens(self) -> float:
        return self.actual.priced_tokens(self.prices)

    @property
    def ideal_tokens(self) -> float:
        return self.ideal.priced_tokens(self.prices)

    @property
    def caused_tokens(self) -> float:
        """What the breaks cost, in base-price token equivalents."""
        return self.actual_tokens - self.ideal_tokens

    @property
    def caused_share(self) -> float | None:
        """The share of the actual cost the breaks caused (None: nothing was priced)."""
        return self.caused_tokens / self.actual_tokens if self.actual_tokens else None

    @property
    def actual_dollars(self) -> float | None:
        return self.actual.dollars(self.prices)

    @property
    def ideal_dollars(self) -> float | None:
        return self.ideal.dollars(self.prices)


def break_cost(
    requests: Iterable[tuple[CacheCounts | Mapping[str, Any] | Any, int]],
    prices: Prices = DEFAULT_PRICES,
) -> BreakCost:
    """Price ``(actual, shared)`` per request, in order, as it was and ideally.

    ``actual``: the request's :class:`CacheCounts`, or its recorded usage (a request without
    an input figure is skipped: it cannot be priced either way); ``shared``: the tokens its
    prompt has in common with the previous request's, from the start (0 for the first).
    """
    actual, ideal = NO_TOKENS, NO_TOKENS
    for figures, shared in requests:
        counts = figures if isinstance(figures, CacheCounts) else recorded_counts(figures)
        if counts is None:
            continue
        actual += counts
        ideal += ideal_counts(counts, shared)
    return BreakCost(actual, ideal, prices)
