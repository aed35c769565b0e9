"""Which parts of a recorded request payload are the transcript's, and which were injected.

:func:`align` walks the payload's messages in order (:func:`payload_parts` takes them out of
either provider shape):

* a block with an id matches by id: ``tool_result`` / a ``tool`` message by ``tool_use_id`` /
  ``tool_call_id``, ``tool_use`` blocks and ``tool_calls`` by the call id; a result whose id
  the transcript lacks (the view renames reused and malformed ids) is the next transcript
  ``tool`` message when its text matches;
* an assistant message without ids is the next transcript assistant message; a user text is the
  next transcript user message whose text it matches (:func:`text_match`), else an injection
  (an equal or extended text is found anywhere ahead, one with edits among the next
  ``USER_LOOKAHEAD`` user messages);
* a message that is the module's compaction notice is the notice, never an injection, and the
  view's stub of a long user message is that (next) user message, edited.

:func:`text_match` is the rule for "the same text, perhaps with an appended injection": the
payload text *equals* the transcript text, or *begins with* it (the rest is an appended
injection), or, once a trailing injection is cut off at the first ``<system-reminder`` tag that
the transcript text does not hold itself, it is the transcript text *with edits*: equal with
each ``[REDACTED...]`` marker standing for any text (the redaction the recording applied), or
sharing a common prefix and suffix that cover ``EDIT_COVERAGE`` of the longer text. A block
matched by id is conversation even when its text differs (the view may have shortened it); only
its tail from such an unheld tag, or past the transcript text it begins with, is an injection.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import estimate_message_tokens
from ...sizing._estimate import MESSAGE_OVERHEAD
from ...views._render import NOTICE_SOURCE, STUB_TEMPLATE, text_of

__all__ = [
    "EDIT_COVERAGE",
    "INJECTION_TAG",
    "USER_LOOKAHEAD",
    "Alignment",
    "Injection",
    "MessageMatch",
    "TranscriptIndex",
    "align",
    "block_text",
    "content_blocks",
    "payload_parts",
    "text_match",
]

INJECTION_TAG = "<system-reminder"
"""Where Amplifier's hooks start an ephemeral injection (``<system-reminder source=...>``)."""
EDIT_COVERAGE = 0.9
"""Share of the longer text a common prefix and suffix must cover to count as one edit."""
_NOTICE_START = f'{INJECTION_TAG} source="{NOTICE_SOURCE}">'
USER_LOOKAHEAD = 16
"""How many of the next user messages a user text with edits is compared with."""
_HEAD = 48
_STUB_START = STUB_TEMPLATE.split("{", 1)[0]
_REDACTION = re.compile(r"\[REDACTED(?::[^\]\n]{0,40})?\]")
_ASSISTANT_TEXT = frozenset({"text", "thinking", "redacted_thinking", "reasoning"})


Json = Mapping[str, Any]


@dataclass(frozen=True)
class Injection:
    """Payload content the transcript does not hold."""

    message_index: int
    """Index of the payload message that carries it."""
    block_index: int | None
    """Index of its block in :func:`content_blocks` of that message (None: the whole message is
    the injection)."""
    position: int | None
    """Transcript position of the message it was appended to (None: a message of its own)."""
    start: int
    """Character offset in the block's text where it begins (0 for a whole block)."""
    first_line: str
    tokens: int


@dataclass(frozen=True)
class MessageMatch:
    """One payload message: the transcript positions it renders, and its conversation tokens."""

    index: int
    role: str
    positions: tuple[int, ...]
    tokens: int
    """Its estimate less its injections (0 for a whole injection or the notice)."""
    edited: bool = False
    """Matched, but some text differs from the transcript's (redaction, or shortened)."""
    notice: bool = False
    estimate: int = 0
    """The whole message's estimate (conversation, injections and notice)."""


@dataclass(frozen=True)
class Alignment:
    """The payload's messages matched to the transcript, with the injections found."""

    messages: tuple[MessageMatch, ...]
    injections: tuple[Injection, ...]
    notice_tokens: int
    """Estimate of the compaction notice messages found in the payload (0: none)."""


def payload_parts(payload: Json) -> tuple[list[Any], list[Any], list[tuple[int, Json]]]:
    """(system blocks or messages, tool definitions, (payload index, conversation message))."""
    system: list[Any] = []
    raw_system = payload.get("system")
    if isinstance(raw_system, str):
        system.append(raw_system)
    elif isinstance(raw_system, list):
        system.extend(raw_system)
    messages: list[tuple[int, Json]] = []
    raw_messages = payload.get("messages")
    for index, message in enumerate(raw_messages if isinstance(raw_messages, list) else []):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in ("system", "developer"):  # OpenAI chat keeps them in line
            system.append(message)
        else:
            messages.append((index, message))
    tools = payload.get("tools")
    return system, list(tools) if isinstance(tools, list) else [], messages


# ---------------------------------------------------------------- text rule


def text_match(payload_text: str, transcript_text: str) -> tuple[bool, int]:
    """(matches, where the appended injection starts in ``payload_text``; its length: none).

    See the module docstring for the rule. When it does not match, the offset is where an
    unheld ``<system-reminder`` tag starts (or the text's length), for id-matched blocks.
    """
    if payload_text.startswith(transcript_text):
        rest = payload_text[len(transcript_text) :]
        return True, len(transcript_text) if rest.strip() else len(payload_text)
    cut = _unheld_tag(payload_text, transcript_text)
    base = payload_text[:cut].rstrip()
    if not payload_text[cut:].strip():
        cut = len(payload_text)
    else:  # the transcript's own trailing whitespace stays with it; the rest goes with the tail
        trailing = transcript_text[len(transcript_text.rstrip()) :]
        cut = len(base) + _common_prefix(payload_text[len(base) : cut], trailing)
    return _same_with_edits(base, transcript_text.rstrip()), cut


def _unheld_tag(payload_text: str, transcript_text: str) -> int:
    """Offset of the first injection tag beyond those the transcript text holds (else len)."""
    held = transcript_text.count(INJECTION_TAG)
    at = -1
    for _ in range(held + 1):
        at = payload_text.find(INJECTION_TAG, at + 1)
        if at < 0:
            return len(payload_text)
    return at


def _same_with_edits(text: str, original: str) -> bool:
    if text == original:
        return True
    if _REDACTION.search(text) and _glob(_REDACTION.split(text), original):
        return True
    longer = max(len(text), len(original))
    prefix = _common_prefix(text, original)
    suffix = _common_prefix(text[prefix:][::-1], original[prefix:][::-1])
    return longer > 0 and prefix + suffix >= EDIT_COVERAGE * longer


def _glob(pieces: list[str], text: str) -> bool:
    """Whether ``text`` is ``pieces`` joined by arbitrary runs (one wildcard between pieces)."""
    first, last = pieces[0], pieces[-1]
    if not text.startswith(first) or len(text) < len(first) + len(last):
        return False
    if not text.endswith(last):
        return False
    at, end = len(first), len(text) - len(last)
    for piece in pieces[1:-1]:  # greedy leftmost is exact for anchored globs
        found = text.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by bisection over slice comparisons (C speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


# ---------------------------------------------------------------- alignment


def content_blocks(message: Json) -> list[Json]:
    """A message's blocks as mappings; string content is one ``text`` block."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def block_text(block: Json) -> str | None:
    """The text a text or tool_result block carries (None: not a text-bearing block)."""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return text if isinstance(text, str) else None
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, str):
            return inner
        if isinstance(inner, list):
            return "\n".join(str(b.get("text", "")) for b in inner if isinstance(b, Mapping))
    return None


def _call_ids(message: Json) -> list[str]:
    found: list[str] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping) and isinstance(call.get("id"), str):
            found.append(call["id"])
    for block in content_blocks(message):
        if block.get("type") in ("tool_use", "tool_call") and isinstance(block.get("id"), str):
            found.append(block["id"])
    return found


class TranscriptIndex:
    """Lookups over a transcript: call ids, result ids, user texts by their head, roles.

    Build one per transcript and pass it to :func:`align` for every request: a replay's history
    is a list that only grows at its end, so each alignment first indexes what was appended
    since the one before (:meth:`catch_up`) and a whole session costs each transcript message
    once, not once per request. A list that got shorter is indexed again from its start.
    """

    def __init__(self, transcript: Sequence[Json]) -> None:
        self.messages = transcript
        self._reset()
        self.catch_up()

    def _reset(self) -> None:
        self._indexed = 0
        self._texts: dict[int, str] = {}
        self.by_call: dict[str, int] = {}
        self.by_result: dict[str, int] = {}
        self.users: list[int] = []
        self.short_sizes: set[int] = set()
        self.by_head: dict[str, list[int]] = {}
        """User positions by the first ``_HEAD`` characters of their text (shorter: whole)."""
        self._by_role: dict[str, list[int]] = {}

    def catch_up(self) -> None:
        """Index the messages appended to the transcript since the last call."""
        if len(self.messages) < self._indexed:
            self._reset()
        for position in range(self._indexed, len(self.messages)):
            self._add(position, self.messages[position])
        self._indexed = len(self.messages)

    def _add(self, position: int, message: Json) -> None:
        role = message.get("role")
        if isinstance(role, str):
            self._by_role.setdefault(role, []).append(position)
        if role == "user":
            self.users.append(position)
            head = self.text(position)[:_HEAD]
            self.by_head.setdefault(head, []).append(position)
            if len(head) < _HEAD:
                self.short_sizes.add(len(head))
        for call_id in _call_ids(message):
            self.by_call.setdefault(call_id, position)
        result_id = message.get("tool_call_id")
        if role == "tool" and isinstance(result_id, str):
            self.by_result.setdefault(result_id, position)
        for block in content_blocks(message):
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                self.by_result.setdefault(block["tool_use_id"], position)

    def text(self, position: int) -> str:
        if position not in self._texts:
            self._texts[position] = text_of(self.messages[position])
        return self._texts[position]

    def user_match(self, text: str, start: int) -> int | None:
        """The first user position from ``start`` whose text ``text`` matches (text_match).

        Equal or extended texts are found through the head index wherever they are; a text
        with edits is searched for among the next ``USER_LOOKAHEAD`` user messages only, so
        aligning stays linear in a long session.
        """
        found = [p for p in self.by_head.get(text[:_HEAD], ()) if p >= start]
        for size in self.short_sizes:  # texts shorter than the head, which ``text`` may extend
            found += [p for p in self.by_head.get(text[:size], ()) if p >= start]
        first = bisect_left(self.users, start)
        found += self.users[first : first + USER_LOOKAHEAD]
        for position in sorted(set(found)):
            if text_match(text, self.text(position))[0]:
                return position
        return None

    def next_role(self, role: str, start: int) -> int | None:
        """The first position from ``start`` of a message in ``role`` (None: none)."""
        positions = self._by_role.get(role, [])
        at = bisect_left(positions, start)
        return positions[at] if at < len(positions) else None


def _is_notice(message: Json) -> bool:
    blocks = content_blocks(message)
    text = block_text(blocks[0]) if len(blocks) == 1 else None
    return message.get("role") == "user" and text is not None and text.startswith(_NOTICE_START)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _text_tokens(text: str, family: str | None) -> int:
    """What ``text`` adds inside a message: its estimate without the message framing."""
    return max(0, estimate_message_tokens({"content": text}, family=family) - MESSAGE_OVERHEAD)


def _block_tokens(block: Json, family: str | None) -> int:
    estimate = estimate_message_tokens({"content": [block]}, family=family)
    return max(0, estimate - MESSAGE_OVERHEAD)


@dataclass
class _Walk:
    """The state of one alignment walk."""

    transcript: TranscriptIndex
    family: str | None
    cursor: int = 0
    injections: list[Injection] = field(default_factory=list[Injection])

    def message(self, index: int, message: Json) -> MessageMatch:
        role = str(message.get("role"))
        total = estimate_message_tokens(message, family=self.family)
        positions: list[int] = []
        injected: list[Injection] = []
        edited = False
        for call_id in _call_ids(message):
            if call_id in self.transcript.by_call:
                positions.append(self.transcript.by_call[call_id])
        result_id = message.get("tool_call_id")  # an OpenAI ``tool`` message
        if role == "tool" and isinstance(result_id, str):
            position = self._result(result_id, text_of(message), positions)
            if position is not None:
                positions.append(position)
                edited = self._tail(injected, index, 0, position, text_of(message))
        if role == "assistant" and not positions:
            found = self.transcript.next_role("assistant", self.cursor)
            positions += [] if found is None else [found]
        blocks = content_blocks(message)
        for b, block in enumerate(blocks):
            kind = block.get("type")
            text = block_text(block)
            if kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                position = self._result(block["tool_use_id"], text or "", positions)
                if position is None:
                    injected.append(self._injection(index, b, None, 0, text or "", block))
                    continue
                positions.append(position)
                edited |= self._tail(injected, index, b, position, text or "")
            elif role == "user" and kind == "text" and text is not None:
                position = self._user_text(text)
                if position is None:
                    injected.append(self._injection(index, b, None, 0, text, block))
                    continue
                positions.append(position)
                edited |= self._tail(injected, index, b, position, text)
            elif role == "assistant" and kind in _ASSISTANT_TEXT and not positions:
                injected.append(self._injection(index, b, None, 0, text or "", block))
        if positions:
            self.cursor = max(self.cursor, max(positions) + 1)
        elif blocks and len(injected) == len(blocks):
            # Every block is injected: the message is one injection, framing included.
            text = "\n".join(block_text(b) or "" for b in blocks)
            injected = [Injection(index, None, None, 0, _first_line(text), total)]
        self.injections += injected
        conversation = max(0, total - sum(i.tokens for i in injected))
        found = tuple(sorted(set(positions)))
        return MessageMatch(index, role, found, conversation, edited, estimate=total)

    def _result(self, result_id: str, text: str, matched: list[int]) -> int | None:
        """The tool result's position: by id, or else (the view renamed a reused or malformed
        id) the next tool message in order, when its text matches."""
        position = self.transcript.by_result.get(result_id)
        if position is not None:
            return position
        start = max([self.cursor, *(p + 1 for p in matched)])
        position = self.transcript.next_role("tool", start)
        if position is not None and text_match(text, self.transcript.text(position))[0]:
            return position
        return None

    def _user_text(self, text: str) -> int | None:
        """The next transcript user message this text matches, searching forward."""
        start = self.cursor
        if text.startswith(_STUB_START):  # the view's stub of the next user message
            return self.transcript.next_role("user", start)
        return self.transcript.user_match(text, start)

    def _injection(
        self, index: int, b: int | None, position: int | None, start: int, text: str, block: Json
    ) -> Injection:
        return Injection(
            index, b, position, start, _first_line(text), _block_tokens(block, self.family)
        )

    def _tail(
        self, out: list[Injection], index: int, b: int | None, position: int, text: str
    ) -> bool:
        """Record the injection appended to ``text``, if any; whether the rest was edited."""
        original = self.transcript.text(position)
        _, start = text_match(text, original)
        tail = text[start:]
        if tail.strip():
            tokens = _text_tokens(tail, self.family)
            out.append(Injection(index, b, position, start, _first_line(tail), tokens))
        return text[:start].rstrip() != original.rstrip()


def align(
    payload: Json, transcript: Sequence[Json] | TranscriptIndex, *, family: str | None = None
) -> Alignment:
    """The payload's conversation messages matched to ``transcript`` (module docstring).

    Aligning many payloads with one transcript: pass the same :class:`TranscriptIndex` each
    time (a plain sequence is indexed afresh on every call).
    """
    if isinstance(transcript, TranscriptIndex):
        transcript.catch_up()
        index = transcript
    else:
        index = TranscriptIndex(transcript)
    walk = _Walk(index, family)
    rows: list[MessageMatch] = []
    notice = 0
    _, _, messages = payload_parts(payload)
    for index, message in messages:
        if _is_notice(message):
            tokens = estimate_message_tokens(message, family=family)
            notice += tokens
            rows.append(MessageMatch(index, "user", (), 0, notice=True, estimate=tokens))
            continue
        rows.append(walk.message(index, message))
    return Alignment(tuple(rows), tuple(walk.injections), notice)
