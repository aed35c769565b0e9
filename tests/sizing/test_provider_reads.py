"""What the module reads from a provider when it has to (sizing/_provider_reads.py): the model
name behind an explicit budget, and the warnings a broken provider gets, once each."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from amplifier_module_context_simple.sizing._provider_reads import (
    PROVIDER_WARNINGS,
    WarnOnce,
    call_optional,
    model_name_only,
    publishes_unsent_output,
    read_field,
    warn_once,
)


def _provider(model_info: Any = None, info: Any = None) -> Any:
    async def get_model_info() -> Any:
        return model_info

    return SimpleNamespace(get_model_info=get_model_info, get_info=lambda: info)


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        (_provider({"model": "claude-opus-4", "name": "Opus", "id": "x"}), "claude-opus-4"),
        (_provider({"name": "gpt-4o", "id": "x"}), "gpt-4o"),
        (_provider(SimpleNamespace(id="o3-mini")), "o3-mini"),
        (_provider(None, {"model": "claude-sonnet-4", "name": "anthropic"}), "claude-sonnet-4"),
        (_provider(None, {"defaults": {"model": "gpt-5"}, "name": "openai"}), "gpt-5"),
        (_provider(None, SimpleNamespace(name="local-llama")), "local-llama"),
        (SimpleNamespace(), None),
    ],
    ids=["model", "name", "id", "info model", "info defaults", "info name", "nothing"],
)
async def test_the_model_name_comes_from_the_model_info_then_the_provider_info(
    provider: Any, name: str | None
) -> None:
    assert await model_name_only(provider) == name


async def test_a_lookup_that_fails_is_no_name_and_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Hostile(str):
        """A name that fails when read (read_field turns a raising attribute into no value,
        so this is what reaches the lookup's own guard)."""

        def strip(self, chars: str | None = None) -> str:
            raise RuntimeError("unreadable name")

    caplog.set_level(logging.DEBUG, logger="amplifier_module_context_simple")
    assert await model_name_only(_provider({"model": Hostile("claude")})) is None
    [failed] = [r for r in caplog.records if r.getMessage() == "Model name lookup failed"]
    assert failed.levelno == logging.DEBUG
    assert failed.exc_info is not None and "unreadable name" in str(failed.exc_info[1])


def test_a_problem_is_remembered_while_there_is_room_and_reported_new_after() -> None:
    seen = WarnOnce(limit=2)
    assert [seen.first(t) for t in ("a", "a", "b", "c", "c")] == [True, False, True, True, True]
    seen.clear()
    assert seen.first("a") is True


def test_a_warning_is_logged_once_then_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    PROVIDER_WARNINGS.clear()
    caplog.set_level(logging.DEBUG, logger="amplifier_module_context_simple")
    for _ in range(2):
        warn_once("provider %s returned %r", "p1", {"limit": "big"})
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    text = "provider p1 returned {'limit': 'big'}"
    assert records == [(logging.WARNING, text), (logging.DEBUG, text)]
    PROVIDER_WARNINGS.clear()


@pytest.mark.parametrize(
    ("provider", "info", "unsent"),
    [
        (SimpleNamespace(name="anthropic"), None, True),
        (SimpleNamespace(name=" Anthropic "), {"id": "x"}, True),
        (SimpleNamespace(name="openai"), {"id": "anthropic"}, True),
        (SimpleNamespace(name="openai"), {"id": "openai"}, False),
        (SimpleNamespace(), None, False),
    ],
    ids=["by-provider-name", "name-spaced-and-cased", "by-info-id", "neither", "nothing"],
)
def test_the_providers_whose_published_output_is_not_what_they_send(
    provider: Any, info: Any, unsent: bool
) -> None:
    assert publishes_unsent_output(provider, info) is unsent


def test_a_field_read_is_quiet_when_missing_and_logged_when_it_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Raising:
        @property
        def name(self) -> str:
            raise RuntimeError("not ready")

    caplog.set_level(logging.DEBUG, logger="amplifier_module_context_simple")
    assert read_field(SimpleNamespace(), "name") is None
    assert caplog.records == [], "a missing field is no failure"
    assert read_field(Raising(), "name") is None
    [record] = caplog.records
    assert record.levelno == logging.DEBUG
    assert record.getMessage() == "Reading 'name' from Raising failed"
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError


async def test_a_failing_provider_method_is_warned_about_or_logged_quietly_with_its_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Flaky:
        def get_info(self) -> Any:
            raise TimeoutError("slow network")

    PROVIDER_WARNINGS.clear()
    caplog.set_level(logging.DEBUG, logger="amplifier_module_context_simple")
    assert await call_optional(Flaky(), "get_info") is None
    assert await call_optional(Flaky(), "get_info", quiet=True) is None
    loud, quiet = caplog.records
    assert loud.getMessage() == (
        "Provider Flaky.get_info() failed (TimeoutError: slow network); trying the next budget "
        "source"
    )
    assert (quiet.levelno, quiet.getMessage()) == (logging.DEBUG, "Provider get_info() failed")
    assert quiet.exc_info is not None and quiet.exc_info[0] is TimeoutError
