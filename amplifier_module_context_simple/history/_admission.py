"""Admission: a message as the history stores it (validated, timestamped, its tool results
capped), once per admitted message.

The cap itself is ``_ingress``'s; this module says what happens to a message on its way in.
"""

from __future__ import annotations

__all__ = ["Admission", "Clock", "admit", "admit_all", "utc_timestamp"]

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..vocabulary._messages import RESULT_BLOCK_ROLES, RESULT_ROLES, ROLES, validate_message
from ._ingress import clip_tool_results
from ._shape_warnings import ShapeWarnings

Clock = Callable[[], datetime]
"""Where admission reads the time (an aware ``datetime``); tests inject their own."""


class Admission:
    """One manager's way in: the ingress cap, the clock, and the stored shapes a provider
    would not read as meant, each warned about once (``ShapeWarnings``)."""

    def __init__(self, cap: int, clock: Clock | None) -> None:
        self.cap = cap
        self.clock = clock
        """None: the current UTC time (the cold-cache rule reads the stamps)."""
        self._shapes = ShapeWarnings()

    def one(
        self, message: Mapping[str, Any], position: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """``message`` as stored at ``position``, and its clip event payloads (``admit``)."""
        stored, clips = admit(message, position, self.cap, clock=self.clock)
        self._shapes.check(stored, position)
        return stored, clips

    def all(self, messages: object) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A whole history as stored, and its clip event payloads (``admit_all``)."""
        if not isinstance(messages, list | tuple):
            raise TypeError(
                f"set_messages expects a list of messages, got {type(messages).__name__}"
            )
        stored, clips = admit_all(messages, self.cap, clock=self.clock)  # pyright: ignore[reportUnknownArgumentType]
        self._shapes.check_all(stored)
        return stored, clips


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


def admit_all(
    messages: Sequence[object], cap: int, *, clock: Clock | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``admit`` for a whole history (a resume), in order: what is stored and every clip
    event payload. Raises before anything is stored when a message is broken.

    A plain message (``_plain_admitted``) is checked and stored in one pass; the rest go
    through ``admit`` one by one.
    """
    stored: list[dict[str, Any]] = []
    payloads: list[dict[str, Any]] = []
    now = clock or _utc_now
    for index, message in enumerate(messages):
        kept = _plain_admitted(message, cap, now)
        if kept is None:
            kept, clips = admit(message, index, cap, clock=now)  # pyright: ignore[reportArgumentType]
            payloads += clips
        stored.append(kept)
    return stored, payloads


def _plain_admitted(message: object, cap: int, now: Clock) -> dict[str, Any] | None:
    """``admit(message, ...)``'s stored message when ``validate_message`` has nothing to
    refuse and the ingress cap nothing to clip; ``None``, having done nothing, otherwise."""
    if type(message) is not dict:
        return None
    role = message.get("role")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if type(role) is not str or role not in ROLES:
        return None
    content = message.get("content")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if type(content) is str:
        # No code point takes more than four bytes: a result this short is under the cap.
        if role in RESULT_ROLES and len(content) * 4 > cap:
            return None
    elif content is not None:
        # Blocks that may hold a result (the cap's business) take the general path.
        if type(content) is not list or role in RESULT_BLOCK_ROLES:
            return None
        for block in content:  # pyright: ignore[reportUnknownVariableType]
            if type(block) is not dict:
                return None
    tool_calls = message.get("tool_calls")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if tool_calls is not None:
        if type(tool_calls) is not list:
            return None
        for call in tool_calls:  # pyright: ignore[reportUnknownVariableType]
            if type(call) is not dict:
                return None
    for key in ("tool_call_id", "name"):
        value = message.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if value is not None and type(value) is not str:
            return None
    meta = message.get("metadata")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if meta is None:
        metadata: dict[str, Any] = {}
    elif type(meta) is dict:
        for key in meta:  # pyright: ignore[reportUnknownVariableType]
            if type(key) is not str:  # pyright: ignore[reportUnknownArgumentType]
                return None
        metadata = dict(meta)  # pyright: ignore[reportUnknownArgumentType]
    else:
        return None
    if "timestamp" not in metadata:
        metadata["timestamp"] = utc_timestamp(now())
    stored = dict(message)  # pyright: ignore[reportUnknownArgumentType]
    stored["metadata"] = metadata
    return stored


def _utc_now() -> datetime:
    return datetime.now(UTC)


def utc_timestamp(moment: datetime) -> str:
    """How admission records a time: ISO 8601 in UTC, to the millisecond, with a ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
