"""The measured request view says why a counted envelope was unusable: in the result's
``unusable_reason`` and in the log (a warning for a count in the wrong shape, information for a
request that was not counted), one reason per rule of docs/api.md's envelope contract."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager

from .test_measured_path import Ref, call, measured

LOGGER = "amplifier_module_context_simple.session._measured"


class Shaped(Ref):
    """The reference double whose first count carries ``measurement`` (or no decision)."""

    def __init__(self, manager: SimpleContextManager, measurement: Any, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.measurement = measurement

    async def count_view(self, view: list[dict[str, Any]]) -> dict[str, Any]:
        envelope = await super().count_view(view)
        if self.measurement == "no decision":
            envelope["budget_decision"] = None
        elif self.measurement != "as counted":
            estimated = envelope["budget_decision"]["estimated_input_tokens"]
            measurement = self.measurement
            if isinstance(measurement, dict) and measurement.get("input_tokens") == "above":
                measurement = {**measurement, "input_tokens": estimated + 1}
            envelope["budget_decision"]["measurement"] = measurement
        return envelope


GOOD = {"kind": "provider_count", "source": "anthropic.count_tokens"}
CASES = [
    (None, "'measurement' is None (the provider did not count the request)"),
    ("90", "'measurement' is a str, not a mapping"),
    ({**GOOD, "kind": "heuristic", "input_tokens": 5},
     "measurement 'kind' is 'heuristic', not 'provider_count'"),
    ({"kind": "provider_count", "input_tokens": 5},
     "measurement 'source' must be a non-empty string, got None"),
    ({**GOOD, "source": "", "input_tokens": 5},
     "measurement 'source' must be a non-empty string, got ''"),
    ({**GOOD, "input_tokens": -3},
     "measurement 'input_tokens' must be a non-negative int, got -3"),
    ({**GOOD, "input_tokens": True},
     "measurement 'input_tokens' must be a non-negative int, got True"),
    ({**GOOD, "input_tokens": "above"}, "is below the measured 'input_tokens'"),
]  # fmt: skip


@pytest.mark.parametrize(("measurement", "reason"), CASES)
async def test_each_broken_rule_is_named_in_the_result_and_the_log(
    measurement: Any, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    manager, _ = await measured(max_tokens=1_000_000)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        result = await call(manager, Shaped(manager, measurement))
    assert result["outcome"] == "measurement_unavailable"
    assert reason in result["unusable_reason"]
    [record] = [r for r in caplog.records if "unusable" in r.getMessage()]
    assert record.levelno == logging.WARNING and reason in record.getMessage()


async def test_a_request_not_counted_is_information_not_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager, _ = await measured(max_tokens=1_000_000)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        result = await call(manager, Shaped(manager, "no decision"))
    assert result["unusable_reason"] == "not counted ('budget_decision' is None)"
    [record] = [r for r in caplog.records if "unusable" in r.getMessage()]
    assert record.levelno == logging.INFO


async def test_a_usable_count_has_no_reason(caplog: pytest.LogCaptureFixture) -> None:
    manager, _ = await measured(max_tokens=1_000_000)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        result = await call(manager, Shaped(manager, "as counted"))
    assert result["outcome"] == "not_needed" and result["unusable_reason"] is None
    assert not [r for r in caplog.records if "unusable" in r.getMessage()]


async def test_a_count_lost_mid_walk_names_the_later_envelope_s_reason() -> None:
    manager, _ = await measured(max_tokens=12_000)
    result = await call(manager, Ref(manager, faults={3: "unusable"}))
    assert result["outcome"] == "measurement_unavailable" and result["count_calls"] == 3
    assert result["unusable_reason"] == "measurement 'kind' is 'heuristic', not 'provider_count'"
