"""The ``--json`` documents as text: objects indented, each item of a list on one line.

A replay's document holds a record per request, per change to a message and per window. Item
by item indented, the 20 MB benchmark transcript's report is 10 MB, mostly white space, and
takes a third of a second to write: ``indent`` turns off the C encoder. Written here, objects
keep their indented keys, and each list item is one compact line (encoded in C), which also
makes a record one ``grep`` match. The text parses to the same value as ``json.dumps`` gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["json_text"]

_INDENT = "  "


def json_text(
    value: Any, *, ensure_ascii: bool = True, default: Callable[[Any], Any] | None = None
) -> str:
    """``value`` as JSON text: objects indented by two spaces, list items one per line."""
    encode = json.JSONEncoder(
        ensure_ascii=ensure_ascii, default=default, separators=(", ", ": ")
    ).encode
    out: list[str] = []
    _write(value, 0, encode, out)
    return "".join(out)


def _write(value: Any, depth: int, encode: Callable[[Any], str], out: list[str]) -> None:
    pad = _INDENT * (depth + 1)
    if isinstance(value, dict) and value:
        out.append("{\n")
        for number, (key, item) in enumerate(value.items()):
            # Keys as json.dumps writes them: a string as it is, "true"/"1"/"null" for others.
            name = encode(key if isinstance(key, str) else encode(key))
            out.append(f",\n{pad}{name}: " if number else f"{pad}{name}: ")
            _write(item, depth + 1, encode, out)
        out.append(f"\n{_INDENT * depth}}}")
    elif isinstance(value, list) and value:
        out.append("[\n")
        out.append(",\n".join(pad + encode(item) for item in value))
        out.append(f"\n{_INDENT * depth}]")
    else:
        out.append(encode(value))
