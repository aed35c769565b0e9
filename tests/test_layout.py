"""The runtime's layout (docs/architecture.md): its modules sit in layer folders whose imports
run one way, each folder says its job, and every module fits in one reading.

The command-line tool (``replay/``) is not runtime: its own layout is held by
``tests/replay/test_replay_package.py``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import amplifier_module_context_simple as package

RUNTIME_DIR = Path(package.__file__).parent
MAX_RUNTIME_LINES = 400
MAX_SHELL_LINES = 250
MOST_MODULES_A_FOLDER = 12

LAYERS = (
    "vocabulary",
    "history",
    "sizing",
    "readings",
    "views",
    "checks",
    "planning",
    "session",
)
"""The runtime's folders, lowest first: a module imports its own folder and those below it."""
SHELL = ("__init__", "__main__", "_manager", "_mount", "request_view")
"""The modules directly in the package: the shell on top of every folder."""


def _runtime_files() -> list[Path]:
    return [
        p
        for p in sorted(RUNTIME_DIR.rglob("*.py"))
        if "replay" not in p.relative_to(RUNTIME_DIR).parts
    ]


def _layer(path: Path) -> int:
    parts = path.relative_to(RUNTIME_DIR).parts
    return LAYERS.index(parts[0]) if len(parts) > 1 else len(LAYERS)


def test_the_runtime_is_the_shell_over_the_layer_folders() -> None:
    loose = sorted(p.stem for p in RUNTIME_DIR.glob("*.py"))
    assert loose == sorted(SHELL)
    folders = sorted(p.name for p in RUNTIME_DIR.iterdir() if (p / "__init__.py").exists())
    assert folders == sorted([*LAYERS, "replay"])


def test_each_folder_says_its_job_and_names_the_modules_it_holds() -> None:
    for layer in LAYERS:
        folder = importlib.import_module(f"{package.__name__}.{layer}")
        doc = folder.__doc__ or ""
        modules = sorted(
            p.stem for p in (RUNTIME_DIR / layer).glob("_*.py") if p.stem != "__init__"
        )
        assert doc.strip(), layer
        assert 0 < len(modules) <= MOST_MODULES_A_FOLDER, (layer, modules)
        for module in modules:
            assert f"``{module}``" in doc, f"{layer}'s docstring does not name {module}"


def test_imports_between_the_folders_run_one_way() -> None:
    wrong: list[str] = []
    for path in _runtime_files():
        here = [package.__name__, *path.relative_to(RUNTIME_DIR).parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            parts = target.split(".")
            if parts[0] != package.__name__ or len(parts) < 2 or parts[1] not in LAYERS:
                continue
            if LAYERS.index(parts[1]) > _layer(path):
                wrong.append(f"{path.relative_to(RUNTIME_DIR)} imports {target}")
    assert wrong == []


def test_no_runtime_module_is_longer_than_the_limit() -> None:
    counts = {
        p.relative_to(RUNTIME_DIR).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in _runtime_files()
    }
    assert {"_manager.py", "planning/_planner.py", "__init__.py"} <= counts.keys()
    over = {name: lines for name, lines in counts.items() if lines > MAX_RUNTIME_LINES}
    assert not over, (
        f"runtime modules over {MAX_RUNTIME_LINES} lines (split each along its own seams): {over}"
    )
    assert counts["_manager.py"] <= MAX_SHELL_LINES
