"""A test tool that returns deterministic text of a requested size (some of it large).

Input: ``{"size": <chars>, "label": <str>}``. The output is line-oriented filler, exactly
``size`` characters long (capped at the ``max_size`` config key), so the tests control how
much each tool result weighs on the context window. The ``style`` config key chooses the
filler: ``"log"`` (the default: build-log lines, dense in digits, about 1.8 characters a
token) or ``"source"`` (lines of Python source, about 3.5 characters a token, as a file read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amplifier_core.models import ToolResult

__amplifier_module_type__ = "tool"


def filler(label: str, size: int) -> str:
    """``size`` characters of build-log-like text tagged with ``label``."""
    lines: list[str] = []
    total = 0
    number = 0
    while total < size:
        line = (
            f"{label} {number:05d}: compiled module_{number % 97} in {number % 13}.{number % 7}s\n"
        )
        lines.append(line)
        total += len(line)
        number += 1
    return "".join(lines)[:size]


def source(label: str, size: int) -> str:
    """``size`` characters of Python-source-like text tagged with ``label``."""
    lines: list[str] = [f"# {label}\n"]
    total = len(lines[0])
    number = 0
    while total < size:
        line = (
            f"def check_module_{number % 97}(report, options):\n"
            f"    return report.stage(options.name).passed and not report.failed\n"
        )
        lines.append(line)
        total += len(line)
        number += 1
    return "".join(lines)[:size]


def prose(label: str, size: int) -> str:
    """``size`` characters of English report text tagged with ``label``."""
    sentence = (
        f"The {label} stage finished without errors, and the reviewers agreed that the "
        "remaining warnings can wait for the next release. "
    )
    return (sentence * (size // len(sentence) + 1))[:size]


STYLES = {"log": filler, "source": source, "prose": prose}


class EchoTool:
    name = "echo"
    description = "Return deterministic text of the requested size."
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"size": {"type": "integer"}, "label": {"type": "string"}},
        "required": ["size"],
    }

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.default_size = int(config.get("default_size", 200))
        self.max_size = int(config.get("max_size", 200_000))
        style = str(config.get("style", "log"))
        if style not in STYLES:
            raise ValueError(f"echo style must be one of {sorted(STYLES)}, got {style!r}")
        self.text = STYLES[style]
        self.calls = 0

    async def execute(self, input: dict[str, Any]) -> ToolResult:
        self.calls += 1
        size = min(int(input.get("size", self.default_size)), self.max_size)
        return ToolResult(success=True, output=self.text(str(input.get("label", "echo")), size))


async def mount(coordinator: Any, config: dict[str, Any] | None = None) -> None:
    tool = EchoTool(config or {})
    await coordinator.mount("tools", tool, name=tool.name)
