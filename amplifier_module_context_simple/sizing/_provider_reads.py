"""What a provider publishes, read without ever raising: fields, optional methods, the model
name, and each distinct problem logged once.

``derive_budget`` (``_budget``) runs before every request, so a provider that is broken stays
broken for the whole session: each distinct problem is logged once at WARNING, then at DEBUG.
"""

from __future__ import annotations

__all__ = [
    "PROVIDER_WARNINGS",
    "UNSENT_DEFAULT_OUTPUT",
    "WarnOnce",
    "call_optional",
    "model_name_only",
    "name_from",
    "provider_info_name",
    "publishes_unsent_output",
    "read_field",
    "warn_once",
]

import inspect
import logging
from collections.abc import Mapping

# Logged under the budget's name, as before these reads had a module of their own: the
# budget is what they serve, and log filters name it.
logger = logging.getLogger(__name__.removesuffix("_provider_reads") + "_budget")

#: Provider ids whose ``get_info().defaults["max_tokens"]`` is not what they send: Amplifier's
#: Anthropic provider publishes 4096 there and sends the model's whole max output.
UNSENT_DEFAULT_OUTPUT: frozenset[str] = frozenset({"anthropic"})

# How many distinct problems are remembered (past it, a problem may be logged again).
_WARNED_LIMIT = 256


class WarnOnce:
    """The distinct problems already logged at WARNING (bounded; ``clear`` starts over)."""

    def __init__(self, limit: int = _WARNED_LIMIT) -> None:
        self._seen: set[str] = set()
        self._limit = limit

    def first(self, text: str) -> bool:
        """Whether ``text`` is new (and remember it while there is room)."""
        if text in self._seen:
            return False
        if len(self._seen) < self._limit:
            self._seen.add(text)
        return True

    def clear(self) -> None:
        self._seen.clear()


PROVIDER_WARNINGS = WarnOnce()
"""Shared by every manager of the process: one broken provider is one warning."""


def warn_once(message: str, *args: object) -> None:
    """Log ``message % args`` at WARNING the first time, at DEBUG after."""
    text = message % args
    if not PROVIDER_WARNINGS.first(text):
        logger.debug("%s", text)
        return
    logger.warning("%s", text)


def read_field(source: object, key: str) -> object:
    """Read ``key`` from a mapping or an attribute-bearing object, never raising."""
    if source is None:
        return None
    try:
        if isinstance(source, Mapping):
            return source.get(key)
        return getattr(source, key, None)
    except Exception:  # a property that raises is just a missing value here
        logger.debug("Reading %r from %s failed", key, type(source).__name__, exc_info=True)
        return None


async def call_optional(provider: object, method_name: str, *, quiet: bool = False) -> object:
    """Call an optional, sync-or-async provider method; ``None`` if absent or failing."""
    method = read_field(provider, method_name)
    if not callable(method):
        return None
    try:
        result = method()
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception as exc:
        if quiet:
            logger.debug("Provider %s() failed", method_name, exc_info=True)
            return None
        warn_once(
            "Provider %s.%s() failed (%s: %s); trying the next budget source",
            type(provider).__name__,
            method_name,
            type(exc).__name__,
            exc,
        )
        return None


def publishes_unsent_output(provider: object, provider_info: object) -> bool:
    names = (read_field(provider_info, "id"), read_field(provider, "name"))
    return any(isinstance(n, str) and n.strip().lower() in UNSENT_DEFAULT_OUTPUT for n in names)


def name_from(source: object, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = read_field(source, key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def provider_info_name(provider_info: object, defaults: object) -> str | None:
    return (
        name_from(provider_info, ("model",))
        or name_from(defaults, ("model",))
        or name_from(provider_info, ("name", "id"))
    )


async def model_name_only(provider: object) -> str | None:
    """Best-effort model name when the budget itself came from elsewhere."""
    try:
        model_info = await call_optional(provider, "get_model_info", quiet=True)
        name = name_from(model_info, ("model", "name", "id"))
        if name is None:
            info = await call_optional(provider, "get_info", quiet=True)
            name = provider_info_name(info, read_field(info, "defaults"))
        return name
    except Exception:  # never let a name lookup fail a request
        logger.debug("Model name lookup failed", exc_info=True)
        return None
