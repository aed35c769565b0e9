"""A test tool whose definition is big, like Amplifier's real tool set (~30,000 tokens).

Its description and ``input_schema`` (many documented properties, generated
deterministically) weigh about ``definition_tokens`` tokens (config, default 30,000) by the
package's estimator: ``estimate_message_tokens`` over the definition's JSON as the Anthropic
API receives it (``{"name", "description", "input_schema"}``) wrapped as a user message, in
the ``token_family`` config key's family (default ``None``: the largest of all families, what
the module counts when it does not know the model). It mounts under the coordinator's
``tools`` mount point, so an orchestrator sends it with every request; the scripted provider
never calls it (if called, it echoes its input).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from amplifier_core.models import ToolResult

from amplifier_module_context_simple import estimate_message_tokens

__amplifier_module_type__ = "tool"

NAME = "bulky"
DESCRIPTION = (
    "Configure and run a deployment pipeline across every environment. Each property below "
    "is one documented pipeline option; unset options take the documented default."
)
_AREAS = ("build", "cache", "deploy", "network", "storage", "review", "metrics", "secrets")
_THINGS = ("timeout", "retries", "region", "label", "budget", "policy", "window", "target")
_TYPES: tuple[dict[str, Any], ...] = (
    {"type": "string"},
    {"type": "integer", "minimum": 0},
    {"type": "boolean"},
    {"type": "array", "items": {"type": "string"}},
    {"type": "string", "enum": ["fast", "balanced", "thorough"]},
)


def _property(number: int) -> tuple[str, dict[str, Any]]:
    area = _AREAS[number % len(_AREAS)]
    thing = _THINGS[(number // len(_AREAS)) % len(_THINGS)]
    name = f"{area}_{thing}_{number:04d}"
    schema = dict(_TYPES[number % len(_TYPES)])
    schema["description"] = (
        f"Option {number}: sets the {thing} used by the {area} stage of the pipeline. When it "
        f"is left out the stage inherits the {thing} of the environment it runs in; see the "
        f"{area} guide, section {number % 17 + 1}, for the values each environment accepts."
    )
    return name, schema


def definition(properties: int) -> dict[str, Any]:
    """The tool's definition with ``properties`` documented properties, as the API gets it."""
    props = dict(_property(n) for n in range(properties))
    return {
        "name": NAME,
        "description": DESCRIPTION,
        "input_schema": {"type": "object", "properties": props, "required": []},
    }


def definition_tokens(spec: Mapping[str, Any], family: str | None = None) -> int:
    """The definition's JSON, wrapped as a user message, by the package's estimator."""
    return estimate_message_tokens({"role": "user", "content": json.dumps(spec)}, family=family)


@lru_cache(maxsize=16)
def _sized(tokens: int, family: str | None) -> dict[str, Any]:
    # The smallest definition that reaches ``tokens``: a binary search on the property count.
    low, high = 0, 1
    while definition_tokens(definition(high), family) < tokens:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if definition_tokens(definition(middle), family) < tokens:
            low = middle
        else:
            high = middle
    return definition(high)


def sized_definition(tokens: int, family: str | None = None) -> dict[str, Any]:
    """A deterministic definition of about ``tokens`` tokens (at least, by one property)."""
    return json.loads(json.dumps(_sized(tokens, family)))  # a copy: the cache stays intact


class BulkyTool:
    """A tool with a big definition; see the module docstring."""

    name = NAME

    def __init__(self, config: Mapping[str, Any]) -> None:
        tokens = int(config.get("definition_tokens", 30_000))
        family = config.get("token_family")
        spec = sized_definition(tokens, None if family is None else str(family))
        self.description: str = spec["description"]
        self.input_schema: dict[str, Any] = spec["input_schema"]
        self.calls = 0

    async def execute(self, input: dict[str, Any]) -> ToolResult:
        self.calls += 1
        return ToolResult(success=True, output=json.dumps(input, sort_keys=True))


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
    tool = BulkyTool(config or {})
    await coordinator.mount("tools", tool, name=tool.name)
