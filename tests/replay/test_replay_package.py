"""The replay tool is a package of its own: the runtime never loads it, it reads the runtime
only through declared exports, and its config options come from ``ContextConfig``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

import amplifier_module_context_simple as package
from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.planning._config import command_line_option
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


# The subpackages, lowest first: a module may import its own subpackage and those below it,
# never one above (the command line on top, the readers of recordings at the bottom).
LAYERS = ("recordings", "payloads", "provider", "findings", "engine", "output", "command")
# Modules directly in ``replay/`` every subpackage may use (they import nothing of the tool).
SHARED = ("errors",)


def _relative_imports() -> list[tuple[str, str, ast.ImportFrom]]:
    """(replay file, absolute module imported from, node) for every relative import."""
    found: list[tuple[str, str, ast.ImportFrom]] = []
    for path in sorted(REPLAY_DIR.rglob("*.py")):
        where = path.relative_to(REPLAY_DIR).as_posix()
        here = [package.__name__, "replay", *path.relative_to(REPLAY_DIR).parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = here[: len(here) - node.level + 1]
                found.append((where, ".".join(base + ([node.module] if node.module else [])), node))
    return found


def _runtime_imports() -> list[tuple[str, str, str]]:
    """(replay file, runtime module, name) for every relative import of the runtime."""
    found: list[tuple[str, str, str]] = []
    replay = f"{package.__name__}.replay"
    for where, module, node in _relative_imports():
        if module != replay and not module.startswith(f"{replay}."):
            found += [(where, module, alias.name) for alias in node.names]
    return found


def test_the_replay_package_reads_the_runtime_only_through_declared_exports() -> None:
    imports = _runtime_imports()
    assert imports, "the replay package imports the runtime somewhere"
    for where, module_name, name in imports:
        module = importlib.import_module(module_name)
        exported = getattr(module, "__all__", None)
        if name.startswith("_") and importlib.util.find_spec(f"{module_name}.{name}"):
            # A private module of the runtime, imported whole: it must say what it exports.
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


def test_the_package_docstring_gives_every_subpackage_its_job() -> None:
    import amplifier_module_context_simple.replay as replay_package

    listed = replay_package.__doc__ or ""
    assert [name for name in (*LAYERS, *SHARED) if f"``{name}``" not in listed] == []


@pytest.mark.parametrize("name", LAYERS)
def test_each_subpackage_docstring_lists_the_modules_it_owns_and_no_others(name: str) -> None:
    subpackage = importlib.import_module(f"{package.__name__}.replay.{name}")
    listed = set(re.findall(r"``(\w+)``", subpackage.__doc__ or ""))
    own = {p.stem for p in (REPLAY_DIR / name).glob("*.py") if p.stem != "__init__"}
    others = {p.stem for p in REPLAY_DIR.glob("*/*.py") if p.parent.name != name} - {"__init__"}
    assert sorted(own - listed) == []
    assert sorted(listed & others - own) == []


def _layer(module: str) -> int:
    """The rank of a replay module's subpackage (shared modules below them all)."""
    parts = module.split(".")
    name = parts[0] if parts else ""
    if name in SHARED:
        return -1
    assert name in LAYERS, f"{module} is in no known subpackage"
    return LAYERS.index(name)


def test_every_replay_module_sits_in_a_subpackage_or_is_shared() -> None:
    loose = sorted(p.stem for p in REPLAY_DIR.glob("*.py") if p.stem != "__init__")
    assert loose == sorted(SHARED)
    assert sorted(p.name for p in REPLAY_DIR.iterdir() if (p / "__init__.py").exists()) == sorted(
        LAYERS
    )


def test_imports_between_the_subpackages_run_one_way() -> None:
    replay = f"{package.__name__}.replay."
    wrong: list[str] = []
    for where, module, node in _relative_imports():
        if not module.startswith(replay):
            continue
        targets = [module[len(replay) :]]
        if "." not in targets[0] and targets[0] in LAYERS:
            # ``from .. import name`` of a subpackage: the name is a module of it.
            targets = [f"{targets[0]}.{alias.name}" for alias in node.names]
        for target in targets:
            if _layer(target) > _layer(where.removesuffix(".py").replace("/", ".")):
                wrong.append(f"{where} imports {target}")
    assert wrong == []
