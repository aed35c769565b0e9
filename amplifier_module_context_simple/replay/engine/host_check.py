"""Checking a view against the host's own message models, where the host is installed.

amplifier-core is the host's package, not a dependency of this one, so it is imported lazily;
when it is not installed the check is reported as not run (``HOST_CHECK_NOT_RUN``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...checks._invariants import shared_start

__all__ = ["HOST_CHECK_NOT_RUN", "HOST_CHECK_RUN", "HostModelCheck"]

HOST_CHECK_RUN = "run"
HOST_CHECK_NOT_RUN = "not run: amplifier-core is not installed"


class HostModelCheck:
    """Validates views as the host does, when the host's package is installed.

    ``available`` is ``False`` when ``amplifier_core.message_models`` cannot be imported;
    :meth:`check` then returns ``None`` (not run). A view that re-sends the previous one's
    messages (the same objects, as a sticky request does) keeps their verdicts, so a long
    replay validates each message once while it stays in the view, not once per request.
    Only the latest view's verdicts are kept.
    """

    def __init__(self) -> None:
        try:
            from amplifier_core.message_models import ChatRequest, Message
        except ImportError:
            self.available = False
            return
        self.available = True
        self._message = Message
        self._request = ChatRequest
        self._view: list[Mapping[str, Any]] = []
        self._models: list[Any] = []  # per message of _view: its model, None if refused
        self._problems: list[tuple[int, str]] = []  # (index in _view, why it was refused)
        # Verdicts by identity (the message is held, so its id cannot be reused): of the views
        # since the last one that did not extend its predecessor, and of the views before it.
        self._verdicts: dict[int, tuple[Mapping[str, Any], Any, str]] = {}
        self._earlier: dict[int, tuple[Mapping[str, Any], Any, str]] = {}

    def check(
        self, view: Sequence[Mapping[str, Any]], *, shared: int | None = None
    ) -> list[str] | None:
        """The host model's objections to ``view`` (empty: accepted), or ``None``: not run.

        ``shared``: ``shared_start(previous, view)`` for the view this check was handed last,
        when the caller has counted it already.
        """
        if not self.available:
            return None
        start = shared_start(self._view, view) if shared is None else shared
        if start == 0:
            self._earlier, self._verdicts = self._verdicts, {}
        self._problems = [(i, p) for i, p in self._problems if i < start]
        added: list[Any] = []
        for index in range(start, len(view)):
            model, problem = self._verdict(view[index])
            added.append(model)
            if problem:
                self._problems.append((index, problem))
        self._models[start:] = added
        self._view = list(view)
        problems = [
            f"view[{index}]: the host's Message model refuses it: {problem}"
            for index, problem in self._problems
        ]
        if not problems:
            try:
                self._request(messages=self._models)
            except Exception as exc:
                problems.append(f"the host's ChatRequest model refuses the view: {_reason(exc)}")
        return problems

    def _verdict(self, message: Mapping[str, Any]) -> tuple[Any, str]:
        key = id(message)
        entry = self._verdicts.get(key) or self._earlier.get(key)
        if entry is None or entry[0] is not message:
            entry = (message, *self._validate(message))
        self._verdicts[key] = entry
        return entry[1], entry[2]

    def _validate(self, message: Mapping[str, Any]) -> tuple[Any, str]:
        try:
            return self._message(**message), ""
        except Exception as exc:  # ValidationError, or TypeError for a non-string key
            return None, _reason(exc)


_UNION_BRANCHES = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _is_branch_label(part: object) -> bool:
    """``str`` / ``list[tagged-union[...]]`` in a pydantic location; ``[key]`` is kept."""
    return isinstance(part, str) and (part in _UNION_BRANCHES or ("[" in part and part != "[key]"))


def _reason(exc: Exception) -> str:
    """One line saying why a model refused: its most specific error, location first.

    Pydantic reports a failed union once per branch (``content.str``, ``content.list[...]``);
    the branch labels are left out of the location and the deepest location wins, so an
    ``image_url`` part reads ``content.0: Input tag 'image_url' ... does not match ...``.
    """
    errors: Callable[[], Any] | None = getattr(exc, "errors", None)
    found: list[dict[str, Any]] = []
    if callable(errors):
        try:
            found = [e for e in errors() if isinstance(e, dict)]
        except Exception:
            found = []
    if not found:
        text = str(exc).splitlines()
        return text[0] if text and text[0] else type(exc).__name__
    located: list[tuple[tuple[str, ...], str]] = []
    for error in found:
        loc = tuple(str(part) for part in error.get("loc", ()) if not _is_branch_label(part))
        located.append((loc, str(error.get("msg", ""))))
    deepest = max(len(loc) for loc, _ in located)
    where = next(loc for loc, _ in located if len(loc) == deepest)
    messages = list(dict.fromkeys(msg for loc, msg in located if loc == where))
    return f"{'.'.join(where) or 'message'}: {'; or '.join(messages)}"
