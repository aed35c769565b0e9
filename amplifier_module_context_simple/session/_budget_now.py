"""The request budget for a caller that cannot await (the subclass surface's ``_calculate_budget``).

``derive_budget`` is async only because a provider's info methods may be; it awaits nothing
else. For a provider whose methods answer at once (plain methods, or async ones that never
suspend) its coroutine therefore runs to completion without an event loop, and ``budget_now``
drives it so: the very rule, and the very figure, a request derives, with no second copy of it.
A provider whose info call really suspends (it waits for I/O) cannot be read synchronously:
that one call gets the budget derived without a provider (``max_tokens_fallback``), and a
warning says so once.
"""

from __future__ import annotations

__all__ = ["budget_now"]

import logging
from collections.abc import Coroutine
from typing import Any

from ..planning._config import ContextConfig
from ..sizing._budget import PROVIDER_WARNINGS, Budget, derive_budget

logger = logging.getLogger(__name__)


def budget_now(config: ContextConfig, token_budget: int | None, provider: object | None) -> Budget:
    """``derive_budget`` for ``config``, run to completion here (see the module doc).

    Raises ``ValueError`` for an invalid explicit ``token_budget``, as a request does.
    """

    def derive(source: object | None) -> Budget | None:
        return _run(
            derive_budget(
                token_budget=token_budget,
                provider=source,
                max_tokens=config.max_tokens,
                max_tokens_fallback=config.max_tokens_fallback,
                output_reserve_fraction=config.output_reserve_fraction,
            )
        )

    budget = derive(provider)
    if budget is not None:
        return budget
    text = (
        f"Provider {type(provider).__name__} publishes its window only asynchronously; "
        "the synchronous budget uses max_tokens_fallback"
    )
    if PROVIDER_WARNINGS.first(text):
        logger.warning("%s", text)
    fallback = derive(None)
    assert fallback is not None, "without a provider nothing is awaited"
    return fallback


def _run(coroutine: Coroutine[Any, Any, Budget]) -> Budget | None:
    """The coroutine's result, or ``None`` (closed) when it waits for an event loop."""
    try:
        while True:
            # A bare yield (``asyncio.sleep(0)``) only lets others run: go on. Anything else
            # is a future an event loop would have to complete.
            if coroutine.send(None) is not None:
                break
    except StopIteration as done:
        return done.value  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    coroutine.close()
    return None
