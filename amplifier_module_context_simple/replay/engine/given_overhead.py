"""A bare transcript's ``--overhead``, held back by the replayed budget as tools are.

A live module holds back the tool definitions the coordinator has mounted (``mount`` hands
them to ``set_tool_definitions``), so its view is compacted against what is left beside them. A
bare transcript records no tools; ``--overhead`` states what its requests carried besides the
view. The replay hands the manager one stand-in definition priced at exactly that many tokens
by the runtime's own estimator, so the replayed budget holds it back through the same path (and
the same ``context:budget`` figure, ``tool_definitions_tokens``) as a mounted tool set.
"""

from __future__ import annotations

from typing import Any

from ...sizing._tool_definitions import estimate_tool_definitions

__all__ = ["stand_in_definitions"]

_KEY = "overhead"
_UNIT = " a"
"""One unit of filler: a word adds less than one token in every family, so the estimate climbs
by 0 or 1 per unit and every figure above the empty definition's is reached exactly."""


def stand_in_definitions(tokens: int, family: str | None) -> list[dict[str, Any]]:
    """Definitions whose estimate in ``family`` is ``tokens`` (none for 0).

    Below the smallest definition's own cost (about ten tokens) that smallest one is used: the
    budget then holds back a few tokens more than given.
    """
    if tokens <= 0:
        return []

    def priced(units: int) -> int:
        return estimate_tool_definitions([_definition(units)], family)

    low, high = 0, max(1, tokens)  # a unit adds at least a fraction of a token: tokens*2 is ample
    while priced(high) < tokens:
        high *= 2
    while low < high:  # the fewest units priced at least ``tokens`` (the estimate is monotone)
        middle = (low + high) // 2
        if priced(middle) < tokens:
            low = middle + 1
        else:
            high = middle
    return [_definition(low)]


def _definition(units: int) -> dict[str, Any]:
    return {_KEY: _UNIT * units}
