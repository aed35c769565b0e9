"""The runtime's layout: every runtime module fits in one reading (docs/architecture.md).

A module that outgrows the limit is split along its own seams, each part with one job; the
command-line tool (``replay/``) is not runtime and is not counted here.
"""

from __future__ import annotations

from pathlib import Path

import amplifier_module_context_simple as package

RUNTIME_DIR = Path(package.__file__).parent
MAX_RUNTIME_LINES = 400


def _line_counts() -> dict[str, int]:
    """Lines per runtime module (the files directly in the package, not its subpackages)."""
    return {
        path.name: len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(RUNTIME_DIR.glob("*.py"))
    }


def test_the_runtime_modules_are_counted() -> None:
    counts = _line_counts()
    assert {"_manager.py", "_planner.py", "__init__.py"} <= counts.keys()
    assert not any(name.startswith("replay") for name in counts)


def test_no_runtime_module_is_longer_than_the_limit() -> None:
    over = {name: lines for name, lines in _line_counts().items() if lines > MAX_RUNTIME_LINES}
    assert not over, (
        f"runtime modules over {MAX_RUNTIME_LINES} lines (split each along its own seams): {over}"
    )
