"""The JSON text the model reads for a value, bounded in depth (``json_text``, ``DEEPER``).

The projection sends JSON-shaped content as this text and the ingress cap measures it, so both
read the one rule here.
"""

from __future__ import annotations

__all__ = ["DEEPER", "json_text"]

import json
from collections.abc import Mapping

from ._messages import MAX_DEPTH

DEEPER = f"[nested deeper than {MAX_DEPTH} levels]"
"""What a value below ``MAX_DEPTH`` levels is sent as (the estimator bounds its walk the same)."""


def json_text(value: object, *, sort_keys: bool = False) -> str:
    """The JSON text the model reads for ``value`` (typed blocks as their JSON dump).

    Hostile nesting (a tool's in-process return value) would overflow the encoder's stack:
    then what lies below ``MAX_DEPTH`` levels is sent as ``DEEPER``.
    """
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, default=_json_default)
    except RecursionError:
        bounded = _bounded(value, 0)
        return json.dumps(bounded, ensure_ascii=False, sort_keys=sort_keys, default=_json_default)


def _json_default(item: object) -> object:
    dump = getattr(item, "model_dump", None)
    return dump(mode="json") if callable(dump) else str(item)


def _bounded(value: object, depth: int) -> object:
    if not isinstance(value, Mapping | list | tuple):
        return value
    if depth >= MAX_DEPTH:
        return DEEPER
    if isinstance(value, Mapping):
        return {k: _bounded(v, depth + 1) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    return [_bounded(v, depth + 1) for v in value]  # pyright: ignore[reportUnknownVariableType]
