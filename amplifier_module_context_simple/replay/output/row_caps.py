"""How many per-compaction rows the text report prints, and which: the largest.

A long session compacts a hundred times or more, and one row (or five, in the drops table) per
compaction would bury the report; ``--json`` keeps them all. The tables show the
:data:`COMPACTION_ROWS` largest, in their own order, and one line that says how many more there
are, as the window table does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ..findings.records import CompactionRecord
from .table_fit import Cell

__all__ = ["COMPACTION_ROWS", "capped_rows", "freed", "largest", "more_text"]

COMPACTION_ROWS = 20
"""Compactions (and requests in the drops table) shown in the text report."""

T = TypeVar("T")


def freed(compaction: CompactionRecord) -> int:
    """What a compaction took off the view: the size the tables rank compactions by."""
    return compaction.before_tokens - compaction.after_tokens


def largest(items: Sequence[T], size: Callable[[T], int], limit: int = COMPACTION_ROWS) -> list[T]:
    """The ``limit`` items of the greatest ``size`` (the earlier first on a tie), in the
    order ``items`` has them."""
    if len(items) <= limit:
        return list(items)
    ranked = sorted(range(len(items)), key=lambda i: (-size(items[i]), i))[:limit]
    return [items[i] for i in sorted(ranked)]


def more_text(hidden: int, what: str) -> str:
    """The line under a capped table: ``… 127 more compactions (smaller); see --json``."""
    return f"… {hidden:,} more {what} (smaller); see --json"


def capped_rows(
    items: Sequence[T], size: Callable[[T], int], row: Callable[[int, T], list[Cell]], *, what: str
) -> tuple[list[list[Cell]], str | None]:
    """One row per item (``row(1-based place, item)``) for the largest items, and the line
    saying how many more there are (``None``: every item has its row), for the caption."""
    shown = {id(item) for item in largest(items, size)}
    rows = [row(i, item) for i, item in enumerate(items, 1) if id(item) in shown]
    hidden = len(items) - len(shown)
    return rows, more_text(hidden, what) if hidden else None
