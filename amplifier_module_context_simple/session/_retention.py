"""Request-scoped retention and hard fit (the ``context.request_retention`` capability).

An orchestrator names the exact reminder bodies its next request must carry; those envelopes
are kept whole through every rung for that one call. ``hard_fit`` makes the call target the
budget itself and fail closed, typed, when even the protected set cannot fit.
"""

from __future__ import annotations

__all__ = [
    "MAX_REPLANS",
    "check_fits",
    "get_messages_for_request_retaining",
    "resolve_retained",
]

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..planning._plan import RequestPlan
from ..sizing._budget import context_length_error
from ..vocabulary._messages import metadata
from ..vocabulary._public import is_reference_only
from ._session import Pipeline

MAX_REPLANS = 3


def resolve_retained(
    messages: Sequence[Mapping[str, Any]], retain_contents: Iterable[str]
) -> frozenset[int]:
    """Positions of the newest persisted ephemeral envelope matching each requested body.

    Only user-role messages flagged ``ephemeral`` and ``persisted`` qualify, so a person who
    quotes reminder markup in a prompt does not change what is retained.
    """
    if isinstance(retain_contents, str):
        raise TypeError("retain_contents must be a collection of strings, not one string")
    wanted: list[str] = []
    for body in retain_contents:
        if not isinstance(body, str):
            raise TypeError(f"retain_contents holds a {type(body).__name__}, expected str")
        wanted.append(body)
    found: dict[str, int] = {}
    pending = set(wanted)
    for position in range(len(messages) - 1, -1, -1):
        if not pending:
            break
        message = messages[position]
        content = message.get("content")
        if not isinstance(content, str) or content not in pending:
            continue
        if message.get("role") != "user" or is_reference_only(message):
            continue  # a display-only copy is never sent: retaining it would keep nothing
        meta = metadata(message)
        if meta.get("ephemeral") is True and meta.get("persisted") is True:
            found[content] = position
            pending.discard(content)
    if pending:
        first = sorted(pending)[0]
        raise ValueError(
            f"retain_contents names {len(pending)} reminder(s) that were never admitted as a "
            f"persisted ephemeral user message, e.g. {first[:80]!r}"
        )
    return frozenset(found.values())


def check_fits(plan: RequestPlan) -> None:
    """Fail closed when the view the plan would deliver does not fit its budget.

    Checked in both units: the plan's modelled real size against the real budget, and the
    estimate itself against the effective budget (the same check in estimate mode; in actual
    mode a model learned from noisy readings must not let through what the estimate says
    is over).
    """
    parts = plan.budget
    checks = (
        (plan.size_model.to_real(plan.view_tokens), plan.real_budget),
        (plan.view_tokens, parts.effective_budget),
    )
    over = [(needed, budget) for needed, budget in checks if needed > budget]
    if not over:
        return
    needed, budget = over[0]
    if parts.starved:
        raise context_length_error(
            f"context-simple: the request cannot fit: {parts.parts_text()}, so no view fits; "
            "send fewer or smaller tools, ask for less output, or use a larger window"
        )
    raise context_length_error(
        f"context-simple: the view needs ~{needed} tokens but the budget is {budget} after "
        "every compaction step; the system prompt, the first and latest prompts and the "
        f"retained reminders cannot be reduced - shorten them, or retain fewer reminders "
        f"({parts.parts_text()})"
    )


async def get_messages_for_request_retaining(
    pipeline: Pipeline,
    *,
    retain_contents: Iterable[str],
    provider: Any = None,
    token_budget: int | None = None,
    hard_fit: bool = False,
    max_output_tokens: int | None = None,
) -> list[dict[str, Any]]:
    wanted = retain_contents if isinstance(retain_contents, str) else list(retain_contents)
    host = pipeline.host
    retained = resolve_retained(host.messages, wanted)
    for _ in range(MAX_REPLANS):
        scope = await pipeline.scope(
            token_budget, provider, retained=retained, requested_output=max_output_tokens
        )
        plan = pipeline.plan(scope, hard_fit=hard_fit)
        # The plan awaited the budget and the system prompt factory: a set_messages meanwhile
        # moves (or removes: ValueError) the reminders, so resolve again on what was planned.
        current = resolve_retained(host.messages, wanted)
        if current == retained:
            break
        retained = current
    else:
        raise RuntimeError("context-simple: the history kept changing while a request was planned")
    check_fits(plan)
    # The compaction event below is the commit boundary: nothing before it changed state.
    await pipeline.deliver(plan)
    return plan.view  # type: ignore[return-value]
