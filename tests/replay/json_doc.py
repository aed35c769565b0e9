"""Test helper: ``docs/replay-json.md`` read back as data, and a ``--json`` document held to it.

The doc is the one list of the documents' keys; tests read it through :func:`documented` rather
than keeping key sets of their own. Its layout, which this parser relies on:

* a ``## `context-simple <command>`` heading per document (:data:`DOCUMENTS`);
* under it, tables whose rows start ``| `dotted.path` | type | unit | null or absent |``;
* a ``#### Keys of `path``` heading over a table of the fixed keys a map can have.

:func:`problems` walks a document and returns every disagreement with those rows: a key with no
row, a value of another type than its row says, a key missing that its row does not call
absent. :func:`seen` collects what a walk met, for the test that checks the other direction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "replay-json.md"
API = ROOT / "docs" / "api.md"

DOCUMENTS = {
    "replay": "## `context-simple replay",
    "sweep": "## `context-simple sweep",
    "why": "## `context-simple inspect --why",
    "view": "## `context-simple inspect --at",
}
"""Document kind -> the start of its section heading."""

ALIASES: dict[tuple[str, str], tuple[str, str]] = {
    ("sweep", "source"): ("replay", "source"),
    ("sweep", "window"): ("replay", "window"),
    ("why", "changes[]"): ("replay", "drops[]"),
}
"""Parts one document shares with another, as the doc says in words: documented once, under
the replay's paths, so a key added there is documented for all three."""

_ROW = re.compile(r"^\| `([^`]+)` \| (.*) \|$")
_KEYS_OF = re.compile(r"^#{3,4} Keys of `([^`]+)`")
_SCALARS = {"integer", "number", "string", "boolean", "null", "any"}
_ELEMENTS = {"integers": "integer", "numbers": "number", "strings": "string", "objects": "object"}


@dataclass(frozen=True)
class Row:
    path: str
    type: str
    unit: str
    absent: str
    meaning: str

    @property
    def may_be_absent(self) -> bool:
        return "absent" in self.absent

    @property
    def is_map(self) -> bool:
        return any(kind.startswith("map") for kind in self.type.split(" or "))


@dataclass
class Documented:
    rows: dict[str, dict[str, Row]]
    """Document kind -> path -> its row."""
    map_keys: dict[str, set[str]]
    """Map path (the replay's) -> the keys its "Keys of" table lists."""


@cache
def documented() -> Documented:
    rows: dict[str, dict[str, Row]] = {kind: {} for kind in DOCUMENTS}
    map_keys: dict[str, set[str]] = {}
    kind: str | None = None
    keys_of: str | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            kind = next((k for k, head in DOCUMENTS.items() if line.startswith(head)), None)
            keys_of = None
        elif line.startswith("###"):
            found = _KEYS_OF.match(line)
            keys_of = found.group(1) if found else None
        elif (found := _ROW.match(line)) is not None and kind is not None:
            name, rest = found.group(1), found.group(2).split(" | ")
            if keys_of is not None:
                map_keys.setdefault(keys_of, set()).add(name)
                continue
            assert len(rest) == 4, f"docs/replay-json.md: a row needs five cells: {line}"
            assert name not in rows[kind], f"docs/replay-json.md: {name} twice"
            kinds(rest[0])  # an unknown type fails here, naming the row
            rows[kind][name] = Row(name, *rest)
    return Documented(rows, map_keys)


def kinds(type_text: str) -> list[tuple[str, str]]:
    """``"array of objects or null"`` -> ``[("array", "object"), ("null", "")]``."""
    found: list[tuple[str, str]] = []
    for part in type_text.split(" or "):
        words = part.split(" of ")
        if words[0] in _SCALARS and len(words) == 1:
            found.append((words[0], ""))
        elif words[0] == "object" and len(words) == 1:
            found.append(("object", ""))
        elif words[0] in ("array", "map") and len(words) <= 2:
            element = _ELEMENTS.get(words[1]) if len(words) == 2 else "any"
            assert element is not None, f"unknown element type in {type_text!r}"
            found.append((words[0], element))
        else:
            raise AssertionError(f"docs/replay-json.md: unknown type {type_text!r}")
    return found


def parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def resolve(kind: str, path: str) -> tuple[str, str]:
    """Where the key at ``path`` of a ``kind`` document is documented: its own row, or through
    an alias the replay's (the alias itself, ``source`` in a sweep, keeps its own row)."""
    for (owner, alias), (target, to) in ALIASES.items():
        if owner == kind and path.startswith(alias + "."):
            return target, to + path[len(alias) :]
    return kind, path


def children(kind: str, path: str) -> list[Row]:
    """The rows of the keys directly under the object at ``path`` (aliases followed)."""
    rows = documented().rows
    owner, at = kind, path
    for (alias_owner, alias), (target, to) in ALIASES.items():
        if alias_owner == kind and (path == alias or path.startswith(alias + ".")):
            owner, at = target, to + path[len(alias) :]
    return [row for row in rows[owner].values() if parent(row.path) == at]


@dataclass
class Walk:
    kind: str
    problems: list[str] = field(default_factory=list[str])
    seen: set[tuple[str, str]] = field(default_factory=set[tuple[str, str]])
    """(kind, path) of every row met, aliases resolved to the row they lead to."""
    keys: dict[str, set[str]] = field(default_factory=dict[str, set[str]])
    """Map path (resolved) -> the keys met in it."""


def walk(document: Mapping[str, Any], kind: str) -> Walk:
    found = Walk(kind)
    _object(found, document, "")
    return found


def problems(document: Mapping[str, Any], kind: str) -> list[str]:
    return walk(document, kind).problems


def seen(walks: Iterable[Walk]) -> set[tuple[str, str]]:
    return set().union(*(w.seen for w in walks))


def _row(found: Walk, path: str) -> Row | None:
    owner, at = resolve(found.kind, path)
    row = documented().rows[owner].get(at)
    if row is not None:
        found.seen.add((owner, at))
    return row


def _object(found: Walk, value: Mapping[str, Any], path: str) -> None:
    for key, item in value.items():
        child = f"{path}.{key}" if path else str(key)
        row = _row(found, child)
        if row is None:
            found.problems.append(f"{found.kind}: {child} is not in docs/replay-json.md")
            continue
        _value(found, item, row, child)
    for row in children(found.kind, path):
        name = row.path.rsplit(".", 1)[-1]
        if name not in value and not row.may_be_absent:
            found.problems.append(
                f"{found.kind}: {path or 'the top level'} lacks {name}, which the doc does not "
                "call absent"
            )


def _value(found: Walk, value: Any, row: Row, path: str) -> None:
    allowed = kinds(row.type)
    kind = _json_kind(value)
    match = next((k for k in allowed if _fits(kind, k[0])), None)
    if match is None:
        found.problems.append(f"{found.kind}: {path} is {kind}, the doc says {row.type}")
        return
    container, element = match
    if container == "object":
        _object(found, value, path)
    elif container == "map":
        found.keys.setdefault(resolve(found.kind, path)[1], set()).update(value)
        _elements(found, list(value.values()), element, f"{path}.*")
    elif container == "array":
        _elements(found, value, element, f"{path}[]")


def _elements(found: Walk, values: list[Any], element: str, path: str) -> None:
    for item in values:
        kind = _json_kind(item)
        if element == "object" and kind == "object":
            _object(found, item, path)
        elif not _fits(kind, element):
            found.problems.append(f"{found.kind}: an element of {path} is {kind}, not {element}")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _fits(kind: str, documented_kind: str) -> bool:
    if documented_kind == "any":
        return True
    if documented_kind == "number":
        return kind in ("number", "integer")  # JSON has one number type
    if documented_kind == "map":
        return kind == "object"
    return kind == documented_kind


@cache
def api_event_keys(event: str) -> frozenset[str]:
    """The keys docs/api.md lists for ``event`` (its table's first column)."""
    text = API.read_text(encoding="utf-8")
    section = text.split(f"### `{event}`\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return frozenset(re.findall(r"^\| `([a-z0-9_]+)` \|", section, re.MULTILINE))
