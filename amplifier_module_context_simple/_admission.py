"""Admission: a message as the history stores it (validated, timestamped, its tool results
capped), once per admitted message.

The cap itself is ``_ingress``'s; this module says what happens to a message on its way in.
"""

from __future__ import annotations

__all__ = ["Clock", "admit", "utc_timestamp"]

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ._ingress import clip_tool_results
from ._messages import validate_message

Clock = Callable[[], datetime]
"""Where admission reads the time (an aware ``datetime``); tests inject their own."""


def admit(
    message: Mapping[str, Any], index: int, cap: int, *, clock: Clock | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The message as stored (validated, timestamped, clipped to ``cap``) and one clip event
    payload per result it clipped.

    A message that has no ``metadata.timestamp`` gets one from ``clock`` (the current UTC
    time by default): the history records when each message arrived.

    Raises before anything is stored when the message is structurally broken.
    """
    validate_message(message, index)
    stored = dict(message)
    metadata = dict(stored.get("metadata") or {})
    if "timestamp" not in metadata:
        metadata["timestamp"] = utc_timestamp((clock or _utc_now)())
    stored["metadata"] = metadata
    clipped, clips = clip_tool_results(stored, cap)
    return clipped, [clip.payload() for clip in clips]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def utc_timestamp(moment: datetime) -> str:
    """How admission records a time: ISO 8601 in UTC, to the millisecond, with a ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
