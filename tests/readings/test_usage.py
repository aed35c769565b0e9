"""Reading a usage: the bounds of one reading, and usage that arrives as text (which reading
of it wins, and how long a text is read at all).

The host hands a handler the ``str()`` of anything that is not JSON, so a usage can be JSON
text, a Python dict rendering or a pydantic ``name=value`` rendering. A text is decoded whole
when it can be (JSON first, then a Python literal); only otherwise are the known keys picked
out one by one, and that picking refuses a key named twice. The cases below are the ones where
those ways disagree, so each rule shows in the reading.
"""

from __future__ import annotations

from amplifier_module_context_simple.readings._meter import parse_usage_reading

# The largest count a JSON double carries exactly: the largest a reading's field may hold.
LARGEST = 2**53


def test_a_reading_runs_from_one_token_to_the_largest_exact_count() -> None:
    assert parse_usage_reading({"input_tokens": 1}) == 1
    assert parse_usage_reading({"input_tokens": 0, "cache_write_tokens": 1}) == 1
    assert parse_usage_reading({"input_tokens": LARGEST}) == LARGEST
    assert parse_usage_reading({"input_tokens": LARGEST + 1}) is None


# The longest usage text that is read (a real rendering is a few hundred characters).
LONGEST = 16_384


def test_json_text_with_a_nested_repeat_is_read_whole() -> None:
    # ``null`` is JSON only, and the nested key would make the picking refuse the text.
    text = '{"input_tokens": 5, "extra": null, "details": {"input_tokens": 2}}'
    assert parse_usage_reading(text) == 5


def test_a_python_dict_rendering_with_a_nested_repeat_is_read_whole() -> None:
    text = str({"input_tokens": 7, "cache_write_tokens": 1, "details": {"input_tokens": 2}})
    assert parse_usage_reading(text) == 8


def test_only_a_text_braced_end_to_end_is_read_whole() -> None:
    # Python would read this literal whole (a comment is allowed); the keys, picked one by one,
    # name input_tokens twice, so the text is refused.
    assert parse_usage_reading("{'input_tokens': 5, 'details': {'input_tokens': 1}} # x") is None


def test_a_rendered_none_is_an_absent_field() -> None:
    assert parse_usage_reading("input_tokens=10 cache_write_tokens=None") == 10


def test_a_text_at_the_length_limit_is_read_and_a_longer_one_is_not() -> None:
    head = "input_tokens=10 output_tokens=1"
    at_limit = head + " " + "x" * (LONGEST - len(head) - 1)
    assert len(at_limit) == LONGEST
    assert parse_usage_reading(at_limit) == 10
    assert parse_usage_reading(at_limit + "x") is None
