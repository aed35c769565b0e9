"""What docs/api.md tells an orchestrator author (and the README an installer), held to the code:
how stored tool calls reach the view, the explicit ``token_budget`` (no tools held back), the
``llm:response`` payload the meter reads, ``metadata.timestamp``, the error's message index and
``ContextLengthError`` without amplifier-core."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
from amplifier_core.message_models import Message

from amplifier_module_context_simple import SimpleContextManager

from .sizing.test_request_budget import DefaultsOnly, Tool, answer, mounted

API = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
FLAT = " ".join(API.split())


async def test_an_openai_style_call_reaches_the_view_as_stored_without_a_name() -> None:
    manager = SimpleContextManager()
    openai = {"id": "c1", "type": "function",
              "function": {"name": "read", "arguments": '{"path": "a.py"}'}}  # fmt: skip
    published = {"id": "c2", "tool": "read", "name": "read", "arguments": {"path": "b.py"}}
    await manager.add_message({"role": "user", "content": "Read both."})
    await manager.add_message({"role": "assistant", "content": "", "tool_calls": [openai]})
    await manager.add_message({"role": "tool", "tool_call_id": "c1", "content": "a"})
    await manager.add_message({"role": "assistant", "content": "", "tool_calls": [published]})
    await manager.add_message({"role": "tool", "tool_call_id": "c2", "content": "b"})
    view = await manager.get_messages_for_request()
    calls = [m["tool_calls"][0] for m in view if m.get("tool_calls")]
    assert calls == [openai, published]  # carried as stored, not normalised
    # The host's model keeps the entry as it is: a provider reading ``name`` or ``tool`` at
    # the top of the call finds neither (what the doc warns of).
    carried = Message(**view[1]).model_dump()["tool_calls"]
    assert "name" not in carried[0] and "tool" not in carried[0]
    assert "reaches those providers **without a name and without arguments**" in FLAT


async def test_an_explicit_token_budget_holds_back_no_tools() -> None:
    coordinator, manager, budgets = await mounted()
    tool = Tool("delegate", words=2_000)
    await coordinator.mount("tools", tool, name=tool.name)
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request(provider=DefaultsOnly(context_window=100_000))
    assert budgets[-1]["tool_definitions_tokens"] > 2_000  # held back from a derived budget
    await manager.get_messages_for_request(token_budget=5_000)
    explicit = budgets[-1]
    assert explicit["source"] == "explicit" and explicit["tool_definitions_tokens"] == 0
    assert explicit["effective_budget"] == 5_000
    assert "never from an explicit `token_budget`" in FLAT


@pytest.mark.parametrize(
    ("usage", "reading"),
    [
        ({"input_tokens": 1_000, "cache_read_tokens": 800, "cache_write_tokens": 200}, 1_200),
        ({"prompt_tokens": 1_000, "cache_creation_tokens": 50}, 1_050),
        # Raw Anthropic usage: input_tokens excludes the cache reads, which are added back.
        ({"input_tokens": 200, "cache_read_input_tokens": 800,
          "cache_creation_input_tokens": 200}, 1_200),
    ],
)  # fmt: skip
async def test_the_meter_reads_the_usage_the_doc_names(usage: dict[str, int], reading: int) -> None:
    coordinator, manager, _ = await mounted()
    await manager.add_message({"role": "user", "content": "hello"})
    await manager.get_messages_for_request()
    await coordinator.hooks.emit("llm:response", {"usage": usage, "model": "m"})
    assert manager.meter.latest_reading == reading
    await answer(coordinator, 7)  # the test helper's own shape is read too
    assert manager.meter.latest_reading == 7


async def test_every_admitted_message_gains_the_documented_timestamp() -> None:
    manager = SimpleContextManager()
    await manager.add_message({"role": "user", "content": "hi"})
    stamp = (await manager.get_messages())[0]["metadata"]["timestamp"]
    documented = re.search(r'`"(\d{4}-\d\d-\d\dT[\d:.]+Z)"`', API)
    assert documented is not None
    shape = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert re.fullmatch(shape, stamp) and re.fullmatch(shape, documented.group(1))


async def test_the_error_names_the_index_the_message_would_take() -> None:
    manager = SimpleContextManager()
    for n in range(12):
        await manager.add_message({"role": "user" if n % 2 == 0 else "assistant", "content": "x"})
    with pytest.raises(ValueError) as caught:
        await manager.add_message({"role": "tool", "tool_call_id": 5, "content": "r"})
    assert (
        str(caught.value) == "message #12 (role='tool'): 'tool_call_id' must be a string, got int"
    )
    assert str(caught.value) in FLAT  # the doc's example is the real text


async def test_context_length_error_without_amplifier_core_is_a_runtime_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager = SimpleContextManager(max_tokens=1_000)
    await manager.add_message({"role": "user", "content": "word " * 5_000})
    # amplifier-core cannot be imported: the module's error is a RuntimeError.
    monkeypatch.setitem(sys.modules, "amplifier_core.llm_errors", None)
    with pytest.raises(RuntimeError, match="context-simple"):
        await manager.get_messages_for_request_retaining(retain_contents=[], hard_fit=True)
    assert "a `RuntimeError` with the same message when it is not" in FLAT


def test_the_readme_installs_from_a_clone_or_a_git_url_with_the_declared_extras() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    install = readme.split("## Install\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in install.splitlines() if line.startswith("pip install")]
    # Nothing asks a registry for a package it does not have: a path or a git URL each time.
    assert lines and all("./" in line or "@ git+" in line for line in lines), lines
    pyproject = tomllib.loads(
        (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    )
    extras = set(pyproject["project"]["optional-dependencies"])
    assert extras == {"cli", "plot"}
    assert "[cli]" in install and "[cli,plot]" in install
