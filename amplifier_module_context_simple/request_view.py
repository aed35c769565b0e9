"""``request_view``: the history as it is executed, for modules built on context-simple.

``amplifier-module-context-managed`` imports it (``from amplifier_module_context_simple.
request_view import request_view``) to count and send what this module's own views send: the
same public-history projection (``_public``), applied to any list of messages. The views apply
it once per message as they build each message's sent form; this is the same rule for a caller
that holds the rows itself.
"""

from __future__ import annotations

__all__ = ["request_view"]

from collections.abc import Iterable, Mapping
from typing import Any

from .vocabulary._messages import describe
from .vocabulary._public import execution_form, is_reference_only


def request_view(
    messages: Iterable[Mapping[str, Any]], *, strip_sequence: bool = False
) -> list[dict[str, Any]]:
    """The rows of ``messages`` projected for execution, as a new list.

    Rows whose ``metadata.amplifier_public_reference_only`` is ``True`` are left out. The
    metadata keys ``amplifier_public_message``, ``amplifier_public_copy_source`` and
    ``amplifier_public_reference_only`` (and ``_seq`` when ``strip_sequence``) come off a copy
    of the metadata, never off the stored message; a row with nothing to drop, or without dict
    metadata, is passed through as the same object. Idempotent. A row that is not a mapping
    raises ``TypeError`` naming its position.
    """
    out: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"request_view: {describe(message, position)} is not a mapping"  # pyright: ignore[reportUnknownArgumentType]
            )
        if is_reference_only(message):
            continue
        sent = execution_form(message, strip_sequence=strip_sequence)
        out.append(sent if isinstance(sent, dict) else dict(sent))
    return out
