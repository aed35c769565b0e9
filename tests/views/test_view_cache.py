"""The rendered-prefix cache (views/_view_cache.py) against rendering from scratch: whatever the
requests before, the decisions, the call still open and what a request retains, a cached render
is the render of the whole history, and it renders again only what is new."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple.history._history import HistoryIndex
from amplifier_module_context_simple.sizing._estimate import estimate_message_tokens
from amplifier_module_context_simple.views._decisions import Decisions
from amplifier_module_context_simple.views._render import ShortForms, open_tail_call, render_range
from amplifier_module_context_simple.views._view_cache import PrefixCache

from ..history.test_turn_rule import build

KEEP_CHARS = 120


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    tokens: list[str] = []
    pending = 0
    for n in range(draw(st.integers(2, 24))):
        choices = ["H", "A", "A*", "A[c]", "R", "S"] + (["T"] * 3 if pending else [])
        token = draw(st.sampled_from(choices))
        if token == "A[c]":
            calls = draw(st.integers(1, 2))
            token = "A[" + ",".join(f"c{n}x{i}" for i in range(calls)) + "]"
            pending += calls
        elif token == "T":
            pending -= 1
        tokens.append(token)
    return build(" ".join(tokens), result_chars=400)


def _decisions(draw: st.DrawFn, index: HistoryIndex) -> Decisions:
    size = len(index.facts)
    positions = st.integers(0, max(size - 1, 0))
    results = [p for p, fact in enumerate(index.facts) if fact.tool_result]
    removed = draw(st.frozensets(positions, max_size=size // 2))
    # Results are what the ladder truncates; each one here is long enough to be.
    keys = st.sampled_from(results) if results else st.nothing()
    truncated = draw(st.dictionaries(keys, st.integers(1, 500)))
    stubbed = draw(st.dictionaries(positions, st.integers(1, 500), max_size=3))
    return Decisions(
        removed=removed,
        truncated=MappingProxyType(truncated),
        stubbed=MappingProxyType(stubbed),
    )


def _scratch(
    index: HistoryIndex, decisions: Decisions, open_tail: int | None, retained: frozenset[int]
) -> tuple[list[Any], int, list[str]]:
    whole = render_range(
        index, decisions.without(retained), 0, len(index.facts), open_tail=open_tail,
        keep_chars=KEEP_CHARS, forms=ShortForms(index),
    )  # fmt: skip
    return whole.messages, whole.tokens, whole.repaired


@settings(max_examples=150, deadline=None)
@given(history=histories(), data=st.data())
def test_a_cached_render_is_the_render_from_scratch(
    history: list[dict[str, Any]], data: st.DataObject
) -> None:
    index = HistoryIndex(estimate_message_tokens)
    cache = PrefixCache(ShortForms(index))
    decisions = Decisions()
    shown = 0
    for _ in range(data.draw(st.integers(1, 5))):
        shown = data.draw(st.integers(min(shown + 1, len(history)), len(history)))
        index.sync(history[:shown], None)
        if data.draw(st.booleans()):
            decisions = _decisions(data.draw, index)
        open_tail = open_tail_call(index)
        retained = data.draw(st.frozensets(st.integers(0, shown - 1), max_size=2))
        got = cache.render(
            index, decisions, open_tail=open_tail, retained=retained, keep_chars=KEEP_CHARS
        )
        assert (got.messages, got.tokens, got.repaired) == _scratch(
            index, decisions, open_tail, retained
        )
        if not retained and open_tail is None:
            assert cache.tokens(index, decisions, keep_chars=KEEP_CHARS) == got.tokens
            fresh = PrefixCache(ShortForms(index))
            assert fresh.tokens(index, decisions, keep_chars=KEEP_CHARS) == got.tokens


def test_only_what_is_new_is_rendered_again() -> None:
    history = build("H A[c0] T A H A[c1,c2] T T A")
    index = HistoryIndex(estimate_message_tokens)
    cache = PrefixCache()
    decisions = Decisions(removed=frozenset({3}))

    def request(decisions: Decisions, retained: frozenset[int] = frozenset()) -> int:
        cache.render(
            index, decisions, open_tail=open_tail_call(index), retained=retained,
            keep_chars=KEEP_CHARS,
        )  # fmt: skip
        return cache.rendered

    index.sync(history[:4], None)
    assert request(decisions) == 3, "0 to 2: the removed answer is not rendered"
    index.sync(history[:7], None)  # c2 is still running: 5 and 6 may change in place
    assert request(decisions) == 3 + 1 + 2
    assert request(decisions) == 6 + 2, "the open call's stretch again, nothing else"
    index.sync(history, None)
    assert request(decisions) == 8 + 4
    assert request(decisions) == 12, "nothing new: nothing rendered"
    assert request(decisions, frozenset({0})) == 12, "retaining what they keep whole: cached"
    assert request(Decisions()) == 12 + 9, "new decisions start over"
    assert request(decisions, frozenset({3})) == 21 + 9, "retaining what they reduce: whole"
    assert request(decisions) == 30 + 8, "back to other decisions: over again"
    assert request(decisions) == 38
    cache.clear()
    assert request(decisions) == 38 + 8


def test_a_result_of_the_call_still_running_is_shortened_as_decided() -> None:
    """``c1`` answered, ``c2`` still running: the call's stretch is rendered on each request,
    with the decisions' shortened result in it."""
    index = HistoryIndex(estimate_message_tokens)
    index.sync(build("H A[c1,c2] T", result_chars=400), None)
    decisions = Decisions(truncated=MappingProxyType({2: 150}))
    open_tail = open_tail_call(index)
    assert open_tail == 1
    got = PrefixCache().render(
        index, decisions, open_tail=open_tail, retained=frozenset(), keep_chars=KEEP_CHARS
    )
    assert (got.messages, got.tokens, got.repaired) == _scratch(
        index, decisions, open_tail, frozenset()
    )
    assert len(got.messages[2]["content"]) < 400
