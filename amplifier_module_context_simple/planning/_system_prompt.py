"""The host's system prompt factory: awaited once per request, turned into the view's message.

The factory (``set_system_prompt_factory``) may be a plain or an async callable and must return
a string. Its message is one dict for as long as the text stays the same, so consecutive views
share their first message by identity as they share the history's: whatever compares views by
identity (a prefix check, a caller's per-message cache) sees them extend one another. Its
estimate is cached on the text and the tokenizer family.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..history._history import HistoryIndex
from ..views._render import factory_message

__all__ = ["SystemPrompt", "SystemPromptFactory"]

SystemPromptFactory = Callable[[], Awaitable[str] | str]


class SystemPrompt:
    """The factory in force, the message its latest text became, and that message's tokens."""

    def __init__(self) -> None:
        self.factory: SystemPromptFactory | None = None
        self._message: dict[str, Any] | None = None
        self._tokens: tuple[object, int] = (None, 0)

    async def text(self) -> str | None:
        """The factory's text for this request (``None``: no factory); a non-string raises."""
        factory = self.factory
        if factory is None:
            return None
        text = factory()
        if inspect.isawaitable(text):
            text = await text
        if not isinstance(text, str):
            # Sending "None" as the system prompt would silently replace the real one.
            raise TypeError(
                "the system prompt factory must return a string, it returned "
                f"{type(text).__name__}: {text!r:.80}"
            )
        return text

    def message(self, text: str | None) -> dict[str, Any] | None:
        """The system message for ``text`` (the same dict while the text is unchanged)."""
        if text is None:
            return None
        cached = self._message
        if cached is None or cached["content"] != text:
            cached = self._message = factory_message(text)
        return cached

    def tokens(self, message: Mapping[str, Any], index: HistoryIndex) -> int:
        """The estimate of ``message``, cached on its text and ``index``'s family."""
        key = (message.get("content"), index.family)
        if self._tokens[0] != key:
            self._tokens = (key, index.estimate(message))
        return self._tokens[1]
