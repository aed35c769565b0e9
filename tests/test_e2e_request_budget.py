"""Issue 20: in the default configuration, a session with real tools completes every prompt.

Real kernel sessions (``AmplifierSession``, the real ``HookRegistry``), this package mounted
with ``context_config={}``, the ``loop-e2e`` orchestrator standing in for the published
``loop-basic`` / ``loop-streaming`` (they are not on PyPI; it sends what they send: every mounted
tool on every request, no ``max_output_tokens``, and does not catch ``ContextLengthError``), the
scripted provider counting messages, framing and tool definitions and refusing
``input + max_tokens > window`` with the model's whole max output as ``max_tokens``, and the
bulky tool's ~30,000-token definition. See ``tests/e2e/budget_rows.py`` for the rows; print
their table with ``uv run python -m tests.e2e.budget_rows``.

Each prompt: a user prompt, two rounds of two parallel ``echo`` calls with 4,000-12,000-character
results, a final answer. Every prompt must complete, no request may be refused, compaction must
still happen (the view is not simply kept tiny) and every view must pass ``check_view`` against
its history.

Before the budget counts the request the provider receives, these fail with
``ContextLengthError`` long before the module compacts (on the package as of branch
``e2e-budget``'s base: 200k / 64k without tools in prompt 10 of 30, with tools in prompt 8,
128k / 8k in prompt 7 of 20, 64k / 4k in prompt 3, with the injection in prompt 2).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .e2e.budget_rows import ALL_ROWS, Row, run_row


@pytest.mark.parametrize("row", ALL_ROWS, ids=[row.id for row in ALL_ROWS])
async def test_every_prompt_completes_in_the_default_configuration(
    row: Row, record_property: Callable[[str, object], None]
) -> None:
    result = await run_row(row, context_config={})
    record_property("prompts_completed", f"{result.completed}/{row.prompts}")
    record_property("compactions", len(result.compactions))
    record_property(
        "peak_request", f"{result.peak_request}/{row.context_window} ({result.peak_ratio:.1%})"
    )
    record_property("first_refusal", result.first_refusal)
    summary = (
        f"{row.id}: {result.completed}/{row.prompts} prompts, "
        f"{len(result.compactions)} compactions, peak request "
        f"{result.peak_request:,}/{row.context_window:,}"
    )
    if result.error is not None:
        pytest.fail(f"{summary}; prompt {result.completed + 1} failed: {result.error}")
    assert result.refusals == [], summary
    assert result.completed == row.prompts, summary
    assert result.compactions, f"{summary}: the view must not simply be kept tiny"
    assert result.view_problems == [], summary
    assert result.peak_request <= row.context_window, summary
    assert result.requests == row.prompts * (1 + 2), "two rounds of calls and an answer each"
