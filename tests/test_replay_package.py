"""The replay tool is a package of its own: the runtime never loads it, it reads the runtime
only through declared exports, and its config options come from ``ContextConfig``."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

import amplifier_module_context_simple as package
from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple._config import command_line_option
from amplifier_module_context_simple.replay.engine.config_options import (
    config_option_specs,
)

REPLAY_DIR = Path(package.__file__).parent / "replay"


def test_importing_the_package_does_not_import_the_replay_package() -> None:
    code = (
        "import sys, amplifier_module_context_simple; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith('amplifier_module_context_simple.replay')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _runtime_imports() -> list[tuple[str, str, str]]:
    """(replay file, runtime module, name) for every ``from ..x import name`` in the package."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(REPLAY_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 2:
                module = package.__name__ + (f".{node.module}" if node.module else "")
                found += [(path.name, module, alias.name) for alias in node.names]
    return found


def test_the_replay_package_reads_the_runtime_only_through_declared_exports() -> None:
    imports = _runtime_imports()
    assert imports, "the replay package imports the runtime somewhere"
    for where, module_name, name in imports:
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        if module is package and name.startswith("_"):
            # A private module of the package, imported whole: it must say what it exports.
            exported = getattr(importlib.import_module(f"{module_name}.{name}"), "__all__", None)
            assert exported is not None, f"{where}: {name} declares no __all__"
            continue
        assert exported is not None, f"{where}: {module_name} declares no __all__"
        assert name in exported, f"{where}: {name} is not in {module_name}.__all__"


def test_the_options_are_the_config_fields_that_carry_one() -> None:
    specs = {spec.key: spec for spec in config_option_specs()}
    offered = {f.name for f in fields(ContextConfig) if command_line_option(f.name) is not None}
    assert set(specs) == offered
    assert "compact_threshold" in specs
    # Every notice setting a replay may change is offered (issue 29: two were missing).
    assert specs["compaction_notice_token_reserve"].flag == "--notice-reserve"
    assert specs["compaction_notice_min_level"].flag == "--notice-min-level"
    with pytest.raises(KeyError, match="no_such_key"):
        command_line_option("no_such_key")
    assert specs["compaction_notice_enabled"].flag == "--notice"
    assert specs["compact_threshold"].help == "Compact at this share of the budget [0.92]."


def test_the_package_docstring_gives_every_module_its_job() -> None:
    import amplifier_module_context_simple.replay as replay_package

    listed = replay_package.__doc__ or ""
    modules = sorted(p.stem for p in REPLAY_DIR.glob("*.py") if p.stem != "__init__")
    assert [m for m in modules if f"``{m}``" not in listed] == []
