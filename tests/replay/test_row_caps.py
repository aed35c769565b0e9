"""The per-compaction tables of a long session print the largest rows and say how many more."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.output.row_caps import COMPACTION_ROWS, largest

from .cli_runs import run_json

LONG = ("replay", "--full", "--messages", "1500", "--context-window", "30000")
"""The built-in example on a small window: it compacts far more than COMPACTION_ROWS times."""


@given(st.lists(st.integers(0, 1000)), st.integers(1, 30))
def test_largest_keeps_the_largest_in_their_order(sizes: list[int], limit: int) -> None:
    items = list(enumerate(sizes))  # (place, size): every item distinct
    kept = largest(items, lambda item: item[1], limit)
    assert len(kept) == min(limit, len(items))
    assert kept == sorted(kept)  # their own order
    if len(kept) < len(items):
        smallest_kept = min(size for _, size in kept)
        assert all(
            size <= smallest_kept for item in items if item not in kept for size in [item[1]]
        )


def test_a_long_session_s_tables_are_capped_and_json_keeps_every_row() -> None:
    document = run_json(*LONG)
    compactions = len(document["compactions"])
    dropping = len({d["request"] for d in document["drops"]})
    assert compactions > COMPACTION_ROWS and dropping > COMPACTION_ROWS
    text = CliRunner().invoke(app, list(LONG), env={"COLUMNS": "200"}).stdout
    flat = " ".join(text.split())
    assert f"… {compactions - COMPACTION_ROWS:,} more compactions (smaller); see --json" in flat
    assert f"… {dropping - COMPACTION_ROWS:,} more requests that dropped (smaller); see --json" in (
        flat
    )
    # The largest compaction is among the rows shown.
    biggest = max(document["compactions"], key=lambda c: c["before_tokens"] - c["after_tokens"])
    assert f"{biggest['before_tokens']:,} → {biggest['after_tokens']:,}" in text
    assert len(text.splitlines()) < 400
