"""The ``--plot`` chart: history and view size per request against the budget and trigger.

matplotlib is an optional extra, so it is imported only when a chart is asked for. It, the
file format and the place the chart goes are checked before the replay runs, so a long replay
never ends in a missing dependency or a directory that is not there.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from .errors import CliError
from .report import ReplayReport

__all__ = ["pyplot_for", "write_plot"]


def pyplot_for(path: Path) -> Any:
    """Check the chart can be written before a long replay: format, place and matplotlib."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise CliError(f"--plot writes .png or .svg files; got {path.name!r}")
    _check_place(path)
    try:
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        return importlib.import_module("matplotlib.pyplot")
    except ImportError:
        raise CliError(
            "--plot needs matplotlib, which is not installed: "
            "pip install 'amplifier-module-context-simple[plot]' (or: uv sync --extra plot)"
        ) from None


def _check_place(path: Path) -> None:
    """The chart's directory exists and is writable, and the path is not a directory."""
    folder = path.parent
    if path.is_dir():
        raise CliError(f"--plot {path} is a directory; give a file name ending in .png or .svg")
    if not folder.exists():
        raise CliError(f"--plot {path}: the directory {folder} does not exist")
    if not folder.is_dir():
        raise CliError(f"--plot {path}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CliError(f"--plot {path}: the directory {folder} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise CliError(f"--plot {path}: the file exists and is not writable")


def write_plot(pyplot: Any, report: ReplayReport, path: Path) -> None:
    requests = report.requests
    s = report.summary()
    x = [r.request for r in requests]
    fig, ax = pyplot.subplots(figsize=(11, 5.5), dpi=110)
    ax.plot(x, [r.history_tokens for r in requests], color="#9aa0a6", label="history")
    ax.plot(x, [r.view_tokens for r in requests], color="#1a73e8", lw=2, label="view sent")
    ax.axhline(s["budget"], color="#d93025", ls="--", label=f"budget {s['budget']:,}")
    ax.axhline(s["trigger_tokens"], color="#f29900", ls=":", lw=2,
               label=f"compaction trigger {s['trigger_tokens']:,}")  # fmt: skip
    if report.compactions:
        ax.scatter([c.request for c in report.compactions],
                   [c.before_tokens for c in report.compactions], marker="v", color="#d93025",
                   zorder=3, label="compaction (view before it; L = ladder level)")  # fmt: skip
        for c in report.compactions:
            ax.annotate(f"L{c.level}", (c.request, c.before_tokens), textcoords="offset points",
                        xytext=(0, 7), ha="center", fontsize=8, color="#d93025")  # fmt: skip
    ax.set_title(f"{report.source.get('name')}: {s['requests']} requests, "
                 f"{s['compactions']} compactions")  # fmt: skip
    ax.set_xlabel("request (one before each assistant message)")
    ax.set_ylabel("estimated tokens")
    ax.yaxis.set_major_formatter(
        importlib.import_module("matplotlib.ticker").FuncFormatter(_thousands)
    )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path, format=path.suffix.lower().lstrip("."))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        pyplot.close(fig)


def _thousands(value: float, _position: int) -> str:
    return f"{value / 1000:,.0f}k"
