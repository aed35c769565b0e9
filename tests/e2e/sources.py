"""How the real kernel is pointed at local module source trees.

amplifier-core 2.0.2 loads every mount-plan module through ``ModuleLoader.load(module_id,
config, source_hint=entry["source"])``. When a resolver is mounted at the coordinator's
``"module-source-resolver"`` mount point, the loader asks it for a ``ModuleSource``, puts the
resolved directory on ``sys.path``, validates the package it finds there
(``amplifier_module_<id>``) with the host's validator for its declared type - which calls
``mount()`` once on a mock coordinator - and then imports and mounts it for real. Without a
resolver the loader only knows installed entry points. Resolution policy is app-layer by
design (``amplifier_core.module_sources``), so the tests supply the simplest one: a plan
entry's ``source`` is a local directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amplifier_core.module_sources import ModuleNotFoundError as SourceNotFoundError

E2E_DIR = Path(__file__).resolve().parent
MODULES_DIR = E2E_DIR / "modules"
REPO_ROOT = E2E_DIR.parents[1]

ORCHESTRATOR_SOURCE = MODULES_DIR / "amplifier-module-loop-e2e"
PROVIDER_SOURCE = MODULES_DIR / "amplifier-module-provider-scripted"
TOOL_SOURCE = MODULES_DIR / "amplifier-module-tool-echo"
BULKY_TOOL_SOURCE = MODULES_DIR / "amplifier-module-tool-bulky"


class LocalSource:
    """A module source that is a directory on disk (``ModuleSource`` protocol)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def resolve(self) -> Path:
        return self.path

    def __str__(self) -> str:
        return f"local:{self.path}"


class LocalSourceResolver:
    """Resolves a mount-plan ``source`` that names a local directory (optionally ``file://``).

    An entry without a source raises the kernel's ``ModuleNotFoundError``, on which the
    loader falls back to installed entry points. Every resolution is recorded.
    """

    def __init__(self) -> None:
        self.resolved: dict[str, Path] = {}

    def resolve(
        self, module_id: str, source_hint: Any = None, profile_hint: Any = None
    ) -> LocalSource:
        hint = source_hint if source_hint is not None else profile_hint
        if not isinstance(hint, str):
            raise SourceNotFoundError(f"{module_id}: no local source given")
        path = Path(hint.removeprefix("file://")).resolve()
        if not path.is_dir():
            raise SourceNotFoundError(f"{module_id}: {path} is not a directory")
        self.resolved[module_id] = path
        return LocalSource(path)


def mount_plan(
    *,
    context_config: dict[str, Any],
    provider_config: dict[str, Any],
    tool_config: dict[str, Any] | None = None,
    bulky_tool_config: dict[str, Any] | None = None,
    orchestrator_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A mount plan loading this package from its source tree plus the test modules.

    With ``bulky_tool_config`` (``{}`` for its defaults) the ``tool-bulky`` module is mounted
    too, after ``echo``: a ~30,000-token tool definition sent with every request.
    """
    tools: list[dict[str, Any]] = [
        {"module": "tool-echo", "source": str(TOOL_SOURCE), "config": tool_config or {}}
    ]
    if bulky_tool_config is not None:
        tools.append(
            {"module": "tool-bulky", "source": str(BULKY_TOOL_SOURCE), "config": bulky_tool_config}
        )
    return {
        "session": {
            "orchestrator": {
                "module": "loop-e2e",
                "source": str(ORCHESTRATOR_SOURCE),
                "config": orchestrator_config or {},
            },
            "context": {
                "module": "context-simple",
                "source": str(REPO_ROOT),
                "config": context_config,
            },
        },
        "providers": [
            {
                "module": "provider-scripted",
                "source": str(PROVIDER_SOURCE),
                "config": provider_config,
            }
        ],
        "tools": tools,
    }
