"""The ``--plot`` chart: the view against budget and trigger, and the window by category.

matplotlib is an optional extra, so it is imported only when a chart is asked for. It, the
file format and the place the chart goes are checked before the replay runs, so a long replay
never ends in a missing dependency or a directory that is not there.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.report import ReplayReport
from ..errors import CliError
from ..payloads.payload import NOT_IN_LOG

__all__ = ["WindowSeries", "pyplot_for", "window_series", "write_plot"]


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


@dataclass(frozen=True)
class WindowSeries:
    """What the chart's lower panel draws: the window by category over the requests."""

    requests: list[int]
    categories: dict[str, list[int]]
    """Label -> tokens per request, bottom to top (free space and the output reserve last)."""
    window: int
    """The window (or, when none is simulated, the budget) the categories fill."""
    compactions: list[int]
    """Requests at which a compaction happened."""
    cache_breaks: list[int]
    """Requests at which the recorded requests broke the provider's cache."""


def window_series(report: ReplayReport) -> WindowSeries:
    """The categories of ``report.windows`` per request, with compactions and cache breaks."""
    entries = report.windows
    per_request = [dict(e.window.categories()) for e in entries]
    # A category some requests lack (what a log left out, when the provider counted nothing
    # beyond it) is 0 there; the order is the categories' own.
    labels = list(dict.fromkeys(label for found in per_request for label in found))
    categories = {label: [found.get(label, 0) for found in per_request] for label in labels}
    breaks = [r.number for r in report.cache.requests if r.is_break] if report.cache else []
    return WindowSeries(
        requests=[e.request for e in entries],
        categories=categories,
        window=entries[0].window.context_window if entries else 0,
        compactions=sorted({c.request for c in report.compactions}),
        cache_breaks=breaks,
    )


_CATEGORY_COLOURS = {
    "system prompt": "#5f6368", "tool definitions": "#9aa0a6", "overhead (given)": "#9aa0a6",
    NOT_IN_LOG: "#bdc1c6",
    "conversation messages": "#1a73e8", "ephemeral injections": "#e37400",
    "compaction notice": "#a142f4", "free space": "#e8f0fe", "kept back for output": "#fce8e6",
}  # fmt: skip


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
    """Two panels: the view against budget and trigger, and the window by category."""
    series = window_series(report)
    panels = 2 if series.requests else 1
    fig, axes = pyplot.subplots(panels, 1, figsize=(11, 5.5 * panels), dpi=110, squeeze=False)
    _draw_view(axes[0][0], report)
    if panels == 2:
        _draw_window(axes[1][0], series, report.window_basis)
    fig.tight_layout()
    try:
        fig.savefig(path, format=path.suffix.lower().lstrip("."))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        pyplot.close(fig)


def _draw_view(ax: Any, report: ReplayReport) -> None:
    requests = report.requests
    s = report.summary()
    x = [r.request for r in requests]
    ax.plot(x, [r.history_tokens + r.system_prompt_tokens for r in requests], color="#9aa0a6",
            label="history (+ any recorded system prompt)")  # fmt: skip
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
    _axes(ax)


def _draw_window(ax: Any, series: WindowSeries, basis: str) -> None:
    x = series.requests
    labels = list(series.categories)
    ax.stackplot(x, *(series.categories[label] for label in labels), labels=labels,
                 colors=[_CATEGORY_COLOURS.get(label, "#cccccc") for label in labels])  # fmt: skip
    ax.axhline(series.window, color="#202124", lw=1, label=f"window {series.window:,}")
    for n, request in enumerate(series.compactions):
        ax.axvline(request, color="#d93025", ls="--", lw=1,
                   label="compaction" if n == 0 else None)  # fmt: skip
    if series.cache_breaks:
        ax.scatter(series.cache_breaks, [series.window] * len(series.cache_breaks), marker="x",
                   color="#b31412", zorder=3, clip_on=False,
                   label="cache break (recorded)")  # fmt: skip
    ax.set_title(f"What the window held, by category ({basis})")
    ax.set_xlabel("request")
    ax.set_ylabel("estimated tokens")
    _axes(ax)


def _axes(ax: Any) -> None:
    ax.yaxis.set_major_formatter(
        importlib.import_module("matplotlib.ticker").FuncFormatter(_thousands)
    )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)


def _thousands(value: float, _position: int) -> str:
    return f"{value / 1000:,.0f}k"
