"""Amplifier's public history, kept out of what a provider is sent: the one projection rule.

Amplifier keeps, beside the message a model executes, what the user saw. A row whose
``metadata.amplifier_public_reference_only`` is ``True`` is there for display only, and
``amplifier_public_message`` / ``amplifier_public_copy_source`` carry the public copy of a
message that was expanded before it was executed. Neither is for the model: a display-only row
is never sent, and the three keys come off a *copy* of the metadata (the stored message keeps
them). Both the views (``_history`` / ``_project``, once per message) and
``request_view`` (the function modules built on this one call) read this rule from here, and
``sent_metadata`` is what a view sends of any metadata (the host's model repairs included).
"""

from __future__ import annotations

__all__ = [
    "PUBLIC_KEYS",
    "REFERENCE_ONLY_KEY",
    "SEQUENCE_KEY",
    "answers_a_request",
    "carries_public_marker",
    "execution_form",
    "execution_metadata",
    "is_reference_only",
    "sent_metadata",
]

from collections.abc import Mapping
from typing import Any

from ._messages import is_mapping

REFERENCE_ONLY_KEY = "amplifier_public_reference_only"
PUBLIC_KEYS = ("amplifier_public_message", "amplifier_public_copy_source", REFERENCE_ONLY_KEY)
"""The metadata keys of the public history: never sent to a provider."""
SEQUENCE_KEY = "_seq"
"""A store's sequence number in the metadata (dropped only by the final execution projection)."""
_WITH_SEQUENCE = (*PUBLIC_KEYS, SEQUENCE_KEY)


def is_reference_only(message: Mapping[str, Any]) -> bool:
    """Whether the row is for display only (never sent). Only the JSON ``true`` counts, as for
    every other flag a message carries (``ephemeral``, ``persisted``)."""
    meta = message.get("metadata")
    return isinstance(meta, Mapping) and meta.get(REFERENCE_ONLY_KEY) is True  # pyright: ignore[reportUnknownMemberType]


def answers_a_request(message: Mapping[str, Any]) -> bool:
    """Whether a request was made right before this history message: it is what a model
    answered (an assistant message), not a row the user was shown in its place. The resume
    walk and the replay find their request points with this, as an orchestrator makes them.
    Anything but a mapping answers nothing (indexing it names it: ``validate_envelope``)."""
    return (
        is_mapping(message)
        and message.get("role") == "assistant"
        and not is_reference_only(message)
    )


def execution_metadata(
    meta: Mapping[str, Any], *, strip_sequence: bool = False
) -> dict[str, Any] | None:
    """A copy of ``meta`` without the public-history keys (and ``_seq`` when
    ``strip_sequence``), or ``None`` when it holds none of them: nothing to copy."""
    keys = _WITH_SEQUENCE if strip_sequence else PUBLIC_KEYS
    if not any(key in meta for key in keys):
        return None
    return {k: v for k, v in meta.items() if k not in keys}


def sent_metadata(meta: object) -> tuple[object, bool]:
    """What a view sends for a message's ``metadata`` (the same object when nothing changes),
    and whether the host's model needed a repair (a non-mapping is sent as ``None``, its keys
    as strings). The public history's keys are never sent, and that is no repair."""
    if not isinstance(meta, Mapping):
        return None, True
    repaired = not all(isinstance(k, str) for k in meta)  # pyright: ignore[reportUnknownVariableType]
    if repaired:
        meta = {str(k): v for k, v in meta.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    public = execution_metadata(meta)  # pyright: ignore[reportUnknownArgumentType]
    return (meta if public is None else public), repaired


def execution_form(
    message: Mapping[str, Any], *, strip_sequence: bool = False
) -> Mapping[str, Any]:
    """``message`` as it is executed (a display-only row aside, see ``is_reference_only``): the
    same object when its metadata holds no key to drop, else a copy with a copied metadata."""
    meta = message.get("metadata")
    if not isinstance(meta, Mapping):
        return message
    kept = execution_metadata(meta, strip_sequence=strip_sequence)  # pyright: ignore[reportUnknownArgumentType]
    return message if kept is None else {**message, "metadata": kept}


def carries_public_marker(message: Mapping[str, Any]) -> bool:
    """Whether a (view) message still carries a public-history key: no view may."""
    meta = message.get("metadata")
    return isinstance(meta, Mapping) and any(key in meta for key in PUBLIC_KEYS)
