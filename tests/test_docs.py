"""The README's Python example runs as printed, and docs/api.md lists exactly what the code emits.

Keys are collected from real requests through the public surface (the plain, retention and
measured paths, admission's ingress cap, a provider's window and an explicit budget), so a key
added to a payload without a line in docs/api.md fails here, and so does a documented key that
nothing emits any more.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from amplifier_core import AmplifierSession

import amplifier_module_context_simple as package
from amplifier_module_context_simple import SimpleContextManager, estimate_message_tokens, mount

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
API = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


def readme_example() -> str:
    section = README.split("## Use it from Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the section holds a python code block"
    return match.group(1)


def test_the_readme_example_runs_and_prints_what_the_readme_says() -> None:
    code = readme_example()
    assert len(code.strip().splitlines()) <= 30, "a short example"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    section = README.split("## Use it from Python", 1)[1].split("\n## ", 1)[0]
    promised = re.findall(r"It prints `([^`]+)`.*?and `([^`]+)`", section, re.DOTALL)
    assert promised, "the README says what the example prints"
    for line in promised[0]:
        assert line in done.stdout, (line, done.stdout)


# --- every event key, both ways ----------------------------------------------------------------


def documented_keys() -> dict[str, set[str]]:
    """Per ``### `event` `` section of docs/api.md: the keys in its table's first column."""
    keys: dict[str, set[str]] = {}
    for heading, body in re.findall(r"^### `(context:[a-z_]+)`\n(.*?)(?=^### |^## |\Z)", API,
                                    re.DOTALL | re.MULTILINE):  # fmt: skip
        keys[heading] = set(re.findall(r"^\| `([a-z0-9_]+)` \|", body, re.MULTILINE))
    return keys


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, event: str, payload: dict[str, Any]) -> None:
        self.events.append((event, payload))


class WindowProvider:
    def get_info(self) -> dict[str, Any]:
        return {"defaults": {"context_window": 16_000, "max_output_tokens": 2_000}}


async def _fill(manager: SimpleContextManager, rounds: int = 12) -> None:
    await manager.add_message({"role": "user", "content": "Summarise the logs."})
    for n in range(rounds):
        call = {"id": f"c{n}", "tool": "read", "arguments": {"n": n}}
        await manager.add_message({"role": "assistant", "content": "", "tool_calls": [call]})
        body = f"log line {n}\n" * 400
        await manager.add_message({"role": "tool", "tool_call_id": f"c{n}", "content": body})


async def emitted_keys() -> dict[str, set[str]]:
    recorder = Recorder()
    plain = SimpleContextManager(hooks=recorder, max_tool_result_bytes=2_000)
    await _fill(plain)
    await plain.get_messages_for_request(provider=WindowProvider())
    await plain.meter.on_llm_response("llm:response", {"usage": {"input_tokens": 10**7}})
    await plain.get_messages_for_request(token_budget=3_000)
    await plain.get_messages_for_request_retaining(retain_contents=[], token_budget=2_500)

    session = AmplifierSession({"session": {"orchestrator": "none", "context": "none"}})
    coordinator = session.coordinator
    await mount(coordinator, {"token_meter": "actual"})
    measured_manager = coordinator.get("context")
    measured_manager.hooks = recorder
    await _fill(measured_manager)

    async def count_view(view: list[dict[str, Any]]) -> dict[str, Any]:
        tokens = sum(estimate_message_tokens(m) for m in view)
        return {
            "dispatch": {"messages": view},
            "budget_decision": {
                "estimated_input_tokens": tokens,
                "input_limit_tokens": 10**6,
                "measurement": {"kind": "provider_count", "source": "t", "input_tokens": tokens},
            },
        }

    measured_view = coordinator.get_capability("context.measured_request_view")
    result = await measured_view(
        provider=WindowProvider(), retain_contents=[], count_view=count_view
    )
    assert await result["transaction"].commit()
    declared = await coordinator.collect_contributions("observability.events")
    keys: dict[str, set[str]] = {"declared": {e for batch in declared for e in batch}}
    for event, payload in recorder.events:
        keys.setdefault(event, set()).update(payload)
    return keys


async def test_every_emitted_event_key_is_documented_and_every_documented_key_is_emitted() -> None:
    emitted = await emitted_keys()
    declared = emitted.pop("declared")
    documented = documented_keys()
    assert set(emitted) == set(documented) == declared, "what mount declares to the host"
    for event, keys in emitted.items():
        assert keys == documented[event], (
            event,
            sorted(keys - documented[event]),
            sorted(documented[event] - keys),
        )


# --- every public name, method and capability ----------------------------------------------------


def test_every_public_name_method_and_capability_is_documented() -> None:
    for name in package.__all__:
        assert f"`{name}" in API, name
    methods = [
        n
        for n in dir(SimpleContextManager)
        if not n.startswith("_") and callable(getattr(SimpleContextManager, n))
    ]
    for name in methods:
        assert f"`{name}(" in API, name
    for prop in ("messages", "config", "decisions", "compaction_level", "compaction_stats"):
        assert f"| `{prop}` |" in API, prop
    capabilities = set(re.findall(r"^### `(context\.[a-z_]+)`", API, re.MULTILINE))
    assert capabilities == {
        "context.request_retention",
        "context.measured_request_view",
        "context.foreground_usage",
    }
