"""Names: the strings of a text that an agent would pass to a tool again.

A *name* is a run of letters, digits and ``_ . / -`` (its ends trimmed of ``. / -``), at least
four characters long, holding a letter, and marked as a name by a ``/``, a ``.``, a ``_`` or a
camelCase step: ``src/app.py``, ``test_budget``, ``ContextConfig``, ``v1.2``; not ``pytest``,
``e.g`` or ``0.5``. Paths, identifiers, file names and ids are what an agent copies from one
tool's output into its next call, and what a reader needs to find a left-out result again.

One definition for the module and the replay tool: the map of what a compacted view left out
(``_left_out_map``) lists these names, and the replay's evidence measure counts them.
"""

from __future__ import annotations

import re

__all__ = ["MIN_NAME_CHARS", "name_forms", "names_in"]

MIN_NAME_CHARS = 4
_RUN = re.compile(rf"[A-Za-z0-9_./\-]{{{MIN_NAME_CHARS},}}")
_MARKED = re.compile(r"[/._]|[a-z][A-Z]")
_CAMEL = re.compile(r"[a-z][A-Z]")
_LETTER = re.compile(r"[A-Za-z]")


def names_in(text: str) -> dict[str, None]:
    """The names of ``text`` in the order they first occur (a dict used as an ordered set)."""
    found: dict[str, None] = {}
    # Each distinct run is judged once: a tool result repeats most of its words.
    for run in dict.fromkeys(_RUN.findall(text)):
        if run.isalnum():
            # Only a camelCase step can mark a plain word; most words have none (lower
            # case, capitalised, upper case, digits), told apart without a regex.
            if run.islower() or run.isupper() or run.isdigit() or run[1:].islower():
                continue
            if _CAMEL.search(run):
                found[run] = None
            continue
        if not _MARKED.search(run):
            continue
        word = run.strip("./-")
        if len(word) >= MIN_NAME_CHARS and _LETTER.search(word) and _MARKED.search(word):
            found[word] = None
    return found


def name_forms(name: str) -> set[str]:
    """``name`` and each of its path endings that is a name itself: ``p/src/app.py`` ->
    ``p/src/app.py``, ``src/app.py``, ``app.py`` (tools print paths shorter than agents pass
    them)."""
    found = {name}
    parts = name.split("/")
    for start in range(1, len(parts)):
        ending = "/".join(parts[start:])
        if ending in names_in(ending):
            found.add(ending)
    return found
