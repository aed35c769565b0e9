"""The simulated provider cache of a replay (replay/provider/cache_simulation.py)."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amplifier_module_context_simple.replay.provider.cache_rules import digest
from amplifier_module_context_simple.replay.provider.cache_simulation import (
    HEAD_AND_END,
    CacheSimulator,
    SimRequest,
    simulate,
)
from amplifier_module_context_simple.replay.provider.pricing import (
    NO_TOKENS,
    CacheCounts,
    prices_for,
    recorded_counts,
)

from .session_payloads import SESSION_DIR, recorded
from .test_payload import OUTPUT, PROMPT, anthropic, call, result, user

HEAD = 1_000  # tools + system


def request(*messages: str, head: bytes = b"tools+system", time: float | None = None):
    """Messages named by one letter each; a message's tokens: 100 x its position in the
    alphabet (a: 100, b: 200, ...), so every figure below is a sum by hand."""
    return SimRequest(head, HEAD, [(m.encode(), 100 * (ord(m[0]) - 96)) for m in messages], time)


def test_a_request_that_extends_the_previous_one_reads_all_of_it() -> None:
    run = simulate([request("a", "b"), request("a", "b", "c")])
    first, second = run.requests
    assert first.counts == CacheCounts(fresh=0, read=0, written=1_300)
    assert second.counts == CacheCounts(fresh=0, read=1_300, written=300)
    assert (second.read_messages, second.read_from, second.shared_with_previous) == (2, 1, 1_300)


def test_an_edit_at_message_k_reads_only_up_to_k() -> None:
    run = simulate([request("a", "b", "c", "d"), request("a", "b", "x", "d")])
    edited = run.requests[1]
    assert edited.read_messages == 2
    assert edited.counts == CacheCounts(0, HEAD + 100 + 200, 2_400 + 400)
    assert edited.shared_with_previous == 1_300


def test_a_changed_head_reads_nothing() -> None:
    run = simulate([request("a"), request("a", head=b"other tools")])
    assert run.requests[1].counts == CacheCounts(0, 0, 1_100)
    assert run.requests[1].read_messages is None
    assert run.requests[1].shared_with_previous == 0


def test_the_same_request_again_reads_all_and_writes_nothing() -> None:
    assert simulate([request("a", "b")] * 2).requests[1].counts == CacheCounts(0, 1_300, 0)


def test_a_cached_prefix_expires_after_its_lifetime() -> None:
    within = simulate([request("a", time=0), request("a", "b", time=300)])
    assert within.requests[1].counts.read == 1_100
    after = simulate([request("a", time=0), request("a", "b", time=300.5)])
    assert after.requests[1].counts == CacheCounts(0, 0, 1_300)
    shorter = simulate([request("a", time=0), request("a", "b", time=61)], lifetime=60)
    assert shorter.requests[1].counts.read == 0


def test_a_read_refreshes_the_prefix_it_read() -> None:
    # b's request reads a's prefix at 200 s: the prefix lives until 500 s, not 300 s.
    refreshed = simulate(
        [request("a", time=0), request("a", "b", time=200), request("a", "c", time=450)]
    )
    assert refreshed.requests[2].counts == CacheCounts(0, 1_100, 300)
    assert refreshed.requests[2].read_from == 1  # first written by request 1
    # Without that read (request 2 has other tools) the prefix has expired by 450 s.
    lapsed = simulate(
        [
            request("a", time=0),
            request("a", "b", head=b"other", time=200),
            request("a", "c", time=450),
        ]
    )
    assert lapsed.requests[2].counts.read == 0
    # A read refreshes only what it read: b, written at 200 s, is gone by 501 s.
    tail = simulate(
        [request("a", time=0), request("a", "b", time=200), request("a", "b", time=501)]
    )
    assert tail.requests[2].counts.read == 0


def test_a_request_reads_from_an_older_request_still_alive() -> None:
    run = simulate([request("a", "b", "c"), request("x"), request("a", "b", "c", "d")])
    third = run.requests[2]
    assert third.read_from == 1
    assert third.counts == CacheCounts(0, HEAD + 600, 400)
    assert third.shared_with_previous == HEAD  # the previous request shares only the head


def test_without_recorded_times_requests_are_a_minute_apart_and_it_says_so() -> None:
    run = simulate([request("a"), request("a", "b"), request("a", "b", "c")])
    assert run.times_assumed
    assert [r.time for r in run.requests] == [0, 60, 120]
    recorded = simulate([request("a", time=10.0), request("a", "b", time=20.0)])
    assert not recorded.times_assumed
    # Six minutes apart by the assumption: the first request's prefix has expired.
    gap = [request("a"), *(request("z", head=b"elsewhere") for _ in range(5)), request("a", "b")]
    assert simulate(gap).requests[-1].counts.read == 0


def test_a_time_earlier_than_the_one_before_counts_as_the_one_before() -> None:
    run = simulate([request("a", time=100), request("a", "b", time=50)])
    assert run.requests[1].time == 100
    assert run.requests[1].counts.read == 1_100


def test_a_request_below_the_cacheable_minimum_is_all_fresh() -> None:
    run = simulate([request("a"), request("a"), request("a", "z")], min_cacheable_tokens=1_500)
    assert run.requests[0].counts == CacheCounts(1_100, 0, 0)
    assert run.requests[1].counts == CacheCounts(1_100, 0, 0)
    # Long enough to be cached, but the prefix it shares was never written.
    assert run.requests[2].counts == CacheCounts(0, 0, 3_700)


def test_a_read_prefix_below_the_cacheable_minimum_counts_as_nothing_read() -> None:
    run = simulate([request("z"), request("a", "z")], min_cacheable_tokens=1_100)
    # Only the head (1,000 tokens) is shared: too short to be a cache hit.
    assert run.requests[1].counts == CacheCounts(0, 0, 3_700)


def test_the_session_totals_are_priced() -> None:
    run = simulate([request("a", "b"), request("a", "b", "c"), request("a", "x")])
    assert run.totals == CacheCounts(0, 1_300 + 1_100, 1_300 + 300 + 2_400)
    expected = 4_000 * 1.25 + 2_400 * 0.1
    assert run.priced_input_tokens() == pytest.approx(expected)
    assert run.dollars() is None
    assert run.dollars(prices_for("claude-opus-4-8")) == pytest.approx(expected * 5 / 1e6)
    # Every request here read all it shared with the one before: the breaks cost nothing.
    assert run.break_cost().caused_tokens == pytest.approx(0)


def test_what_expiry_costs_shows_as_the_breaks_share() -> None:
    run = simulate([request("a", time=0), request("a", "b", time=400)])
    cost = run.break_cost()
    assert cost.actual == CacheCounts(0, 0, 1_100 + 1_300)
    assert cost.ideal == CacheCounts(0, 1_100, 1_100 + 200)
    assert cost.caused_tokens == pytest.approx(1_100 * (1.25 - 0.1))


def test_requests_from_payload_digests() -> None:
    def marked(payload: dict[str, Any]) -> dict[str, Any]:
        payload = copy.deepcopy(payload)
        payload["messages"][-1]["content"] = [
            {"type": "text", "text": "ok", "cache_control": {"type": "ephemeral"}}
        ]
        return payload

    first = marked(anthropic(user(PROMPT), call(), result(OUTPUT), user("Go on.")))
    second = anthropic(user(PROMPT), call(), result(OUTPUT), user("ok"), call())
    edited = anthropic(user(PROMPT + " Quickly."), call(), result(OUTPUT))
    one, two, three = (digest(p) for p in (first, second, edited))
    run = simulate(SimRequest.from_digest(d) for d in (one, two, three))
    # The moved cache_control marker is no difference: the second reads all of the first.
    assert run.requests[0].counts.written == one.prefix_tokens[-1]
    assert run.requests[1].counts.read == one.prefix_tokens[-1]
    assert run.requests[1].read_messages == 4
    # The edit in the first message leaves the head (tools + system) to read.
    assert run.requests[2].counts.read == three.prefix_tokens[0] > 0
    assert run.requests[2].read_messages == 0


def test_the_simulator_can_be_fed_one_request_at_a_time() -> None:
    simulator = CacheSimulator(lifetime=120)
    assert simulator.add(request("a", time=0)).counts.written == 1_100
    assert simulator.add(request("a", "b", time=100)).counts.read == 1_100
    assert simulator.result().lifetime == 120


def test_with_entries_only_at_the_markers_an_extension_still_reads_all() -> None:
    run = simulate([request("a", "b"), request("a", "b", "c")], breakpoints=HEAD_AND_END)
    assert run.requests[1].counts == CacheCounts(0, 1_300, 300)


def test_with_entries_only_at_the_markers_an_edit_reads_back_to_an_earlier_end() -> None:
    edit = [request("a", "b", "c", "d"), request("a", "b", "x", "d")]
    # Nothing ends at b: only the head is cached before the edit.
    assert simulate(edit, breakpoints=HEAD_AND_END).requests[1].counts.read == HEAD
    # A request that ended at b is.
    run = simulate([request("a", "b"), *edit], breakpoints=HEAD_AND_END)
    assert (run.requests[2].counts.read, run.requests[2].read_from) == (1_300, 1)


def test_with_entries_only_at_the_markers_a_moved_tail_injection_costs_the_messages() -> None:
    """The shared opus session's pattern: each request ends with an injection the next one no
    longer has, so the provider reads the head alone and writes every message again."""
    session = [request("a", "i"), request("a", "b", "i"), request("a", "b", "c", "i")]
    marked = simulate(session, breakpoints=HEAD_AND_END)
    assert [r.counts.read for r in marked.requests] == [0, HEAD, HEAD]
    assert [r.counts.read for r in simulate(session).requests] == [0, 1_100, 1_300]


def test_with_entries_only_at_the_markers_a_read_refreshes_the_entry_it_read() -> None:
    session = [request("a", "b", time=0), request("a", "b", "c", time=200)]
    # a+b, read at 200 s, lives until 500 s; the head too (its own marker).
    late = simulate([*session, request("a", "b", "d", time=450)], breakpoints=HEAD_AND_END)
    assert (late.requests[2].counts.read, late.requests[2].read_from) == (1_300, 1)


@pytest.mark.skipif(not SESSION_DIR.is_dir(), reason="the shared recorded session is absent")
def test_the_recorded_session_simulated_with_entries_at_the_markers_reads_as_recorded() -> None:
    """The shared opus-4-8 session, simulated from its own payloads and times: with entries
    only at the markers, requests 2-9 read the head alone, as the provider's usage records
    (67,190 tokens; our estimate of the head: within 1% of it), and the priced input is
    within 3% of the recorded one; with every message cached, the reads run past the head."""
    payloads, usages = recorded(SESSION_DIR)
    events = next(SESSION_DIR.rglob("events.jsonl"))
    with events.open(encoding="utf-8") as lines:
        times = [
            datetime.fromisoformat(event["ts"]).timestamp()
            for event in map(json.loads, lines)
            if event["event"] == "llm:request"
        ]
    requests = [SimRequest.from_digest(digest(p), t) for p, t in zip(payloads, times, strict=True)]
    counts = [recorded_counts(u) for u in usages]
    assert all(c is not None and c.read in (0, 67_190) for c in counts)
    marked = simulate(requests, breakpoints=HEAD_AND_END)
    assert not marked.times_assumed
    head = requests[0].head_tokens
    assert head == pytest.approx(67_190, rel=0.01)
    assert [r.counts.read for r in marked.requests] == [0] + [head] * (len(requests) - 1)
    total = NO_TOKENS
    for c in counts:
        assert c is not None
        total += c
    opus = prices_for("claude-opus-4-8")
    assert marked.priced_input_tokens(opus) == pytest.approx(total.priced_tokens(opus), rel=0.03)
    assert all(r.counts.read > head for r in simulate(requests).requests[1:])


def test_a_breakpoint_rule_must_be_known() -> None:
    with pytest.raises(ValueError, match="breakpoints"):
        CacheSimulator(breakpoints="somewhere")


# A session: requests of a few heads and messages from a small alphabet, so prefixes repeat.
sessions = st.lists(
    st.tuples(
        st.sampled_from([b"h1", b"h2"]),
        st.lists(st.sampled_from("abcde"), max_size=8),
        st.one_of(st.none(), st.floats(0, 200)),
    ),
    min_size=1,
    max_size=25,
)


def _requests(drawn: list[tuple[bytes, list[str], float | None]], timed: bool) -> list[SimRequest]:
    clock, out = 0.0, []
    for head, messages, step in drawn:
        clock += step or 0.0
        out.append(request(*messages, head=head, time=clock if timed else None))
    return out


def _tokens(r: SimRequest, depth: int) -> int:
    return r.head_tokens + sum(tokens for _, tokens in r.messages[:depth])


def _common(a: SimRequest, b: SimRequest) -> int:
    """Tokens ``b`` shares with ``a`` from the start, a whole message at a time."""
    if a.head != b.head:
        return 0
    depth = 0
    for x, y in zip(a.messages, b.messages, strict=False):
        if x != y:
            break
        depth += 1
    return _tokens(b, depth)


@given(sessions, st.booleans(), st.sampled_from([60.0, 300.0]))
def test_the_simulation_against_a_plain_reading_of_the_rule(
    drawn: list[tuple[bytes, list[str], float | None]], timed: bool, lifetime: float
) -> None:
    requests = _requests(drawn, timed)
    run = simulate(requests, lifetime=lifetime)
    assert run.times_assumed is not timed
    for i, (r, simulated) in enumerate(zip(requests, run.requests, strict=True)):
        occupancy = _tokens(r, len(r.messages))
        counts = simulated.counts
        assert counts.read + counts.written + counts.fresh == occupancy
        earlier = requests[:i]
        assert counts.read <= max((_tokens(e, len(e.messages)) for e in earlier), default=0)
        # Each request touches (writes or refreshes) every prefix of itself, so a prefix is
        # alive exactly when an earlier request holding it was sent within the lifetime.
        alive = [
            _common(e, r)
            for e, s in zip(earlier, run.requests, strict=False)
            if simulated.time - s.time <= lifetime
        ]
        assert counts.read == max(alive, default=0)
        expected_shared = _common(requests[i - 1], r) if i else 0
        assert simulated.shared_with_previous == expected_shared
    assert run.break_cost().caused_tokens >= -1e-6


@given(sessions, st.booleans())
def test_entries_at_the_markers_read_no_more_and_only_whole_earlier_requests(
    drawn: list[tuple[bytes, list[str], float | None]], timed: bool
) -> None:
    requests = _requests(drawn, timed)
    every = simulate(requests).requests
    marked = simulate(requests, breakpoints=HEAD_AND_END).requests
    for i, (r, wide, narrow) in enumerate(zip(requests, every, marked, strict=True)):
        assert narrow.counts.occupancy == wide.counts.occupancy
        assert narrow.counts.read <= wide.counts.read
        # What it reads is a head, or an earlier request whole that this one starts with.
        whole = {
            _tokens(e, len(e.messages))
            for e in requests[:i]
            if _common(e, r) == _tokens(e, len(e.messages)) == _tokens(r, len(e.messages))
        }
        assert narrow.counts.read in {0, r.head_tokens} | whole


def test_a_long_replay_stays_linear() -> None:
    """5,000 requests of up to 300 messages, compacted to 51 whenever they reach it: the
    shape of a long replay, run once to show it finishes quickly (no time is asserted)."""
    simulator = CacheSimulator()
    messages: list[tuple[bytes, int]] = []
    for n in range(5_000):
        if len(messages) >= 300:
            messages = [(b"summary %d" % n, 500), *messages[-50:]]
        messages.append((b"m%d" % n, 300))
        simulator.add(SimRequest(b"head", 5_000, list(messages), float(n * 30)))
    run = simulator.result()
    assert len(run.requests) == 5_000
    assert run.totals.occupancy == sum(
        r.counts.read + r.counts.written + r.counts.fresh for r in run.requests
    )
