"""An independent oracle for what providers refuse: ``../shared/PROVIDER-RULES.md`` as code.

Amplifier's own provider modules are not installable here (``amplifier-module-provider-anthropic``
and ``-openai`` are not on the package index this project can reach), so tests cannot feed views
through their real request builders. This module stands in for them: it converts a view (the
message dicts a context manager returns) the way Amplifier's providers do, and checks the
vendor's rules on the result. It shares no code with the package under test on purpose.

* :func:`to_anthropic` builds the Anthropic Messages wire shape: system (and developer)
  messages go to the ``system`` parameter; ``tool_calls`` entries and ``tool_call`` blocks become
  ``tool_use`` blocks (``name`` from ``tool``, else ``name``; an OpenAI-style ``function`` call
  gets an empty name and no input, as the real provider sends it); a ``tool`` message becomes a
  user turn with one ``tool_result`` block; consecutive turns of the same role are merged into
  one, as the SDK documents.
* :func:`to_openai_chat` builds the chat-completions ``messages`` list.
* :func:`anthropic_violations` checks Anthropic rules 1–8, :func:`openai_violations` OpenAI
  rules 1–3, :func:`host_violations` the host's ``Message`` / ``ChatRequest`` models and
  :func:`call_shape_violations` the host call shape the providers read. Every violation names
  its rule and quotes the provider's own error text.

Modelling choices where the real builders are not visible (each conservative: it can only
report more, never hide a refusal):

* A call that appears both as a ``tool_call`` block and in ``tool_calls`` of the same message
  (what Amplifier orchestrators store) is sent once; a second occurrence of an id across
  messages is sent again (and is what rule 4 catches).
* String content is a text block when non-empty; an empty string adds no block. A text block in
  a list is sent as it is, so an empty one in the view is an empty one on the wire.
* ``reasoning`` blocks (OpenAI reasoning state) are not sent to Anthropic; unknown block types
  are passed through untouched (the host model check refuses them before any provider would).
* Rule 1 has no open-tail exception: a request whose last assistant turn has an unanswered
  ``tool_use`` is refused by the API, whatever a context manager allows mid-execution.
* Rule 7 also refuses whitespace-only text ("text content blocks must contain non-whitespace
  text").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Msg = Mapping[str, Any]

THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
SYSTEM_ROLES = frozenset({"system", "developer"})
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
OPENAI_CHAT_ID_MAX = 40
OPENAI_RESPONSES_ID_MAX = 64

# The providers' error texts, as PROVIDER-RULES.md quotes them.
ERRORS = {
    "anthropic-1": "`tool_use` ids were found without `tool_result` blocks immediately after",
    "anthropic-2": (
        "unexpected `tool_use_id` found in `tool_result` blocks ... must have a corresponding "
        "`tool_use` block in the previous message"
    ),
    "anthropic-3": "tool_result blocks must come first in a user turn (text may follow them)",
    "anthropic-4": "`tool_use` ids must be unique",
    "anthropic-5": "400 invalid_request_error (thinking blocks must go back unmodified)",
    "anthropic-6": (
        "Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is "
        "enabled, a final `assistant` message must start with a thinking block (preceeding the "
        "lastmost set of `tool_use` and `tool_result` blocks)"
    ),
    "anthropic-7-empty-text": "text content blocks must be non-empty",
    "anthropic-7-blank-text": "text content blocks must contain non-whitespace text",
    "anthropic-7-empty-message": (
        "all messages must have non-empty content except for the optional final assistant message"
    ),
    "anthropic-8": "tool ids must match ^[a-zA-Z0-9_-]+$",
    "openai-1-call": "No tool output found for function call",
    "openai-1-output": "No tool call found for function call output with call_id",
    "openai-2": "Duplicate item found with id {id}. Remove duplicate items from your input",
    "openai-3": (
        "Invalid 'messages[{n}].tool_calls[{k}].id': string too long. Expected a string with "
        "maximum length 40"
    ),
    "host-message": "the orchestrator aborts the turn: the host's Message model refuses it",
    "host-request": "the orchestrator aborts the turn: the host's ChatRequest model refuses it",
    "host-call-shape": (
        "an OpenAI-style call validates but reaches the wire with an empty name and no "
        "arguments, or is dropped"
    ),
}


@dataclass(frozen=True)
class Violation:
    """One rule a provider (or the host) would enforce by refusing the request."""

    rule: str
    """``anthropic-1`` … ``anthropic-8``, ``openai-1`` … ``openai-3``, ``host-*``."""
    where: str
    error: str
    """The provider's error text."""

    def __str__(self) -> str:
        return f"{self.rule} at {self.where}: {self.error}"


@dataclass
class AnthropicRequest:
    system: list[str] = field(default_factory=list[str])
    messages: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    origins: list[list[int]] = field(default_factory=list[list[int]])
    """For each wire turn, the view indexes merged into it."""


# --- reading the view (host and foreign shapes) --------------------------------------------


def _block(b: Any) -> dict[str, Any]:
    if isinstance(b, Mapping):
        return dict(b)
    dump = getattr(b, "model_dump", None)
    return dict(dump()) if callable(dump) else {"type": type(b).__name__}


def blocks_of(m: Msg) -> list[dict[str, Any]]:
    content = m.get("content")
    return [_block(b) for b in content] if isinstance(content, list) else []


def _name_of(call: Mapping[str, Any]) -> str:
    # What Amplifier's Anthropic provider reads: ``tool``; the host's ToolCall reads ``name``.
    for key in ("tool", "name"):
        value = call.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _input_of(call: Mapping[str, Any]) -> Any:
    for key in ("arguments", "input"):
        value = call.get(key)
        if isinstance(value, dict):
            return value
    return {}


def view_calls(m: Msg) -> list[dict[str, Any]]:
    """The calls of an assistant message as (id, name, input), blocks first, once per id."""
    if m.get("role") != "assistant":
        return []
    out: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for b in blocks_of(m):
        if b.get("type") in ("tool_call", "tool_use"):
            out.append({"id": b.get("id"), "name": _name_of(b), "input": _input_of(b)})
            seen.add(b.get("id"))
    calls = m.get("tool_calls")
    for c in calls if isinstance(calls, list) else []:
        if isinstance(c, Mapping) and c.get("id") not in seen:
            out.append({"id": c.get("id"), "name": _name_of(c), "input": _input_of(c)})
            seen.add(c.get("id"))
    return out


# --- Anthropic ------------------------------------------------------------------------------


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [_wire_block(_block(b)) for b in content if _block(b).get("type") != "reasoning"]


def _wire_block(b: dict[str, Any]) -> dict[str, Any]:
    kind = b.get("type")
    if kind == "text":
        return {"type": "text", "text": b.get("text")}
    if kind == "thinking":
        return {"type": "thinking", "thinking": b.get("thinking"), "signature": b.get("signature")}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": b.get("data")}
    if kind == "image":
        return {"type": "image", "source": b.get("source")}
    if kind == "image_url":
        url = b.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else url
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind in ("tool_call", "tool_use"):
        return {"type": "tool_use", "id": b.get("id"), "name": _name_of(b), "input": _input_of(b)}
    if kind == "tool_result":
        rid = b.get("tool_use_id", b.get("tool_call_id"))
        inner = b.get("content", b.get("output"))
        return {"type": "tool_result", "tool_use_id": rid, "content": _result_content(inner)}
    return b  # unknown: passed through


def _result_content(inner: Any) -> Any:
    if isinstance(inner, list):
        return _text_blocks(inner)
    if inner is None or isinstance(inner, str):
        return inner or ""
    return json.dumps(inner, default=str)


def to_anthropic(view: Sequence[Msg]) -> AnthropicRequest:
    """The Messages API request Amplifier's Anthropic provider would build from ``view``."""
    request = AnthropicRequest()
    for index, m in enumerate(view):
        role = m.get("role")
        if role in SYSTEM_ROLES:
            content = m.get("content")
            request.system.append(content if isinstance(content, str) else json.dumps(content))
            continue
        if role == "tool":
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_result",
                    "tool_use_id": m.get("tool_call_id"),
                    "content": _result_content(m.get("content")),
                }
            ]
            turn_role = "user"
        elif role == "assistant":
            content = []
            seen: set[Any] = set()
            for b in _text_blocks(m.get("content")):
                if b.get("type") == "tool_use":
                    seen.add(b.get("id"))
                content.append(b)
            calls = m.get("tool_calls")
            for c in calls if isinstance(calls, list) else []:
                if isinstance(c, Mapping) and c.get("id") not in seen:
                    seen.add(c.get("id"))
                    content.append(
                        {
                            "type": "tool_use",
                            "id": c.get("id"),
                            "name": _name_of(c),
                            "input": _input_of(c),
                        }
                    )
            turn_role = "assistant"
        else:  # user, function and anything else reach the API as user turns
            content = _text_blocks(m.get("content"))
            turn_role = "user"
        if request.messages and request.messages[-1]["role"] == turn_role:
            request.messages[-1]["content"].extend(content)
            request.origins[-1].append(index)
        else:
            request.messages.append({"role": turn_role, "content": content})
            request.origins.append([index])
    return request


def _where(request: AnthropicRequest, turn: int, block: int | None = None) -> str:
    at = f"messages.{turn}" + ("" if block is None else f".content.{block}")
    return f"{at} (view {request.origins[turn]})"


def _thinking_key(b: Mapping[str, Any]) -> tuple[Any, ...]:
    if b.get("type") == "redacted_thinking":
        return ("redacted_thinking", b.get("data"))
    return ("thinking", b.get("thinking"), b.get("signature"))


def view_has_thinking(messages: Iterable[Msg]) -> bool:
    return any(b.get("type") in THINKING_TYPES for m in messages for b in blocks_of(m))


def anthropic_violations(
    view: Sequence[Msg], *, history: Sequence[Msg] | None = None, thinking: bool | None = None
) -> list[Violation]:
    """Anthropic rules 1–8 on the request built from ``view``.

    ``thinking``: whether extended thinking is on (rule 6); ``None`` means "when the view (or
    the history, if given) carries a thinking block". With ``history`` rule 5 also checks that
    every thinking block is one of the history's, whole per message and in order.
    """
    request = to_anthropic(view)
    turns = request.messages
    out: list[Violation] = []

    def add(rule: str, where: str, key: str | None = None, **fmt: Any) -> None:
        out.append(Violation(rule, where, ERRORS[key or rule].format(**fmt)))

    # 1 and 2: pairing across adjacent turns.
    for t, turn in enumerate(turns):
        uses = [b.get("id") for b in turn["content"] if b.get("type") == "tool_use"]
        if turn["role"] == "assistant" and uses:
            nxt = turns[t + 1] if t + 1 < len(turns) else None
            answered = (
                {b.get("tool_use_id") for b in nxt["content"] if b.get("type") == "tool_result"}
                if nxt is not None and nxt["role"] == "user"
                else set()
            )
            missing = [u for u in uses if u not in answered]
            if missing:
                add("anthropic-1", _where(request, t) + f" ids {missing}")
        if turn["role"] == "user":
            prev = turns[t - 1] if t > 0 else None
            offered = (
                {b.get("id") for b in prev["content"] if b.get("type") == "tool_use"}
                if prev is not None and prev["role"] == "assistant"
                else set()
            )
            for k, b in enumerate(turn["content"]):
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in offered:
                    add("anthropic-2", _where(request, t, k) + f" id {b.get('tool_use_id')!r}")
            # 3: tool_result blocks first.
            kinds = [b.get("type") for b in turn["content"]]
            if "tool_result" in kinds:
                last_result = max(k for k, kind in enumerate(kinds) if kind == "tool_result")
                if any(kind != "tool_result" for kind in kinds[:last_result]):
                    first_other = next(k for k, kind in enumerate(kinds) if kind != "tool_result")
                    add("anthropic-3", _where(request, t, first_other))

    # 4: unique tool_use ids (and one result per id).
    seen_use: dict[Any, str] = {}
    seen_result: dict[Any, str] = {}
    for t, turn in enumerate(turns):
        for k, b in enumerate(turn["content"]):
            kind = b.get("type")
            table = (
                seen_use if kind == "tool_use" else seen_result if kind == "tool_result" else None
            )
            if table is None:
                continue
            ident = b.get("id") if kind == "tool_use" else b.get("tool_use_id")
            if ident in table:
                add("anthropic-4", _where(request, t, k) + f" id {ident!r} (first {table[ident]})")
            else:
                table[ident] = _where(request, t, k)

    # 5: thinking blocks unmodified, with signature, in order.
    out += _thinking_violations(request, view, history)

    # 6: the final assistant turn starts with thinking.
    enabled = thinking
    if enabled is None:
        enabled = view_has_thinking(view) or (history is not None and view_has_thinking(history))
    if enabled:
        plain_users = [
            t
            for t, turn in enumerate(turns)
            if turn["role"] == "user"
            and not any(b.get("type") == "tool_result" for b in turn["content"])
        ]
        start = plain_users[-1] + 1 if plain_users else 0
        first = next((t for t in range(start, len(turns)) if turns[t]["role"] == "assistant"), None)
        if first is not None:
            content = turns[first]["content"]
            kind = content[0].get("type") if content else "nothing"
            if kind not in THINKING_TYPES:
                add("anthropic-6", _where(request, first, 0), found=kind)

    # 7: non-empty text, non-empty messages.
    for t, turn in enumerate(turns):
        if not turn["content"] and not (t == len(turns) - 1 and turn["role"] == "assistant"):
            add("anthropic-7", _where(request, t), "anthropic-7-empty-message")
        for k, b in enumerate(turn["content"]):
            nested = b.get("content") if b.get("type") == "tool_result" else None
            for text_block in [b, *(nested if isinstance(nested, list) else [])]:
                if text_block.get("type") != "text":
                    continue
                text = text_block.get("text")
                if not isinstance(text, str) or text == "":
                    add("anthropic-7", _where(request, t, k), "anthropic-7-empty-text")
                elif not text.strip():
                    add("anthropic-7", _where(request, t, k), "anthropic-7-blank-text")

    # 8: id alphabet.
    for t, turn in enumerate(turns):
        for k, b in enumerate(turn["content"]):
            ident = (
                b.get("id")
                if b.get("type") == "tool_use"
                else (b.get("tool_use_id") if b.get("type") == "tool_result" else None)
            )
            if b.get("type") in ("tool_use", "tool_result") and not (
                isinstance(ident, str) and ANTHROPIC_ID.match(ident)
            ):
                add("anthropic-8", _where(request, t, k) + f" id {ident!r}")
    return out


def _thinking_violations(
    request: AnthropicRequest, view: Sequence[Msg], history: Sequence[Msg] | None
) -> list[Violation]:
    out: list[Violation] = []
    error = ERRORS["anthropic-5"]
    for t, turn in enumerate(request.messages):
        for k, b in enumerate(turn["content"]):
            if b.get("type") == "thinking" and not (
                isinstance(b.get("signature"), str) and b.get("signature")
            ):
                out.append(Violation("anthropic-5", _where(request, t, k) + " no signature", error))
            if b.get("type") == "redacted_thinking" and not b.get("data"):
                out.append(Violation("anthropic-5", _where(request, t, k) + " no data", error))
    if history is None:
        return out
    # Each history message's thinking, as the provider received it then.
    by_key: dict[tuple[Any, ...], tuple[int, list[tuple[Any, ...]]]] = {}
    for h, m in enumerate(history):
        if m.get("role") != "assistant":
            continue
        keys = [
            _thinking_key(_wire_block(b)) for b in blocks_of(m) if b.get("type") in THINKING_TYPES
        ]
        for key in keys:
            by_key.setdefault(key, (h, keys))
    last_position = -1
    for t, turn in enumerate(request.messages):
        if turn["role"] != "assistant":
            continue
        # A merged turn may hold several view messages; compare each message's own blocks.
        for index in request.origins[t]:
            keys = [
                _thinking_key(_wire_block(b))
                for b in blocks_of(view[index])
                if b.get("type") in THINKING_TYPES
            ]
            if not keys:
                continue
            found = by_key.get(keys[0])
            if found is None or found[1] != keys:
                out.append(Violation("anthropic-5", f"view[{index}] thinking changed", error))
                continue
            if found[0] < last_position:
                out.append(Violation("anthropic-5", f"view[{index}] thinking out of order", error))
            last_position = found[0]
    return out


# --- OpenAI chat completions ----------------------------------------------------------------


def to_openai_chat(view: Sequence[Msg]) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` Amplifier's OpenAI provider would build."""
    out: list[dict[str, Any]] = []
    for m in view:
        role = m.get("role")
        if role == "assistant":
            calls = view_calls(m)
            text = (
                "".join(str(b.get("text", "")) for b in blocks_of(m) if b.get("type") == "text")
                if isinstance(m.get("content"), list)
                else (m.get("content") or "")
            )
            wire: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                wire["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["input"])},
                    }
                    for c in calls
                ]
            out.append(wire)
        elif role == "tool":
            out.append(
                {"role": "tool", "tool_call_id": m.get("tool_call_id"), "content": m.get("content")}
            )
        else:
            results = [b for b in blocks_of(m) if b.get("type") == "tool_result"]
            for b in results:
                rid = b.get("tool_call_id", b.get("tool_use_id"))
                inner = b.get("output", b.get("content"))
                out.append({"role": "tool", "tool_call_id": rid, "content": inner})
            rest = [b for b in blocks_of(m) if b.get("type") != "tool_result"]
            if not results or rest:
                out.append({"role": role, "content": rest if results else m.get("content")})
    return out


def openai_violations(
    view: Sequence[Msg], *, max_call_id_length: int = OPENAI_CHAT_ID_MAX
) -> list[Violation]:
    """OpenAI rules 1–3 on the chat-completions request built from ``view``."""
    wire = to_openai_chat(view)
    out: list[Violation] = []
    seen: set[Any] = set()
    for n, m in enumerate(wire):
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            answered: set[Any] = set()
            j = n + 1
            while j < len(wire) and wire[j]["role"] == "tool":
                answered.add(wire[j]["tool_call_id"])
                j += 1
            for k, cid in enumerate(ids):
                if cid not in answered:
                    out.append(
                        Violation(
                            "openai-1", f"messages[{n}] call {cid!r}", ERRORS["openai-1-call"]
                        )
                    )
                if cid in seen:
                    out.append(
                        Violation(
                            "openai-2",
                            f"messages[{n}].tool_calls[{k}]",
                            ERRORS["openai-2"].format(id=cid),
                        )
                    )
                seen.add(cid)
                if not isinstance(cid, str) or len(cid) > max_call_id_length:
                    out.append(
                        Violation(
                            "openai-3",
                            f"messages[{n}].tool_calls[{k}].id {cid!r}",
                            ERRORS["openai-3"].format(n=n, k=k),
                        )
                    )
        if m["role"] == "tool":
            j = n - 1
            while j >= 0 and wire[j]["role"] == "tool":
                j -= 1
            offered = (
                {c["id"] for c in wire[j].get("tool_calls") or []}
                if j >= 0 and wire[j]["role"] == "assistant"
                else set()
            )
            if m["tool_call_id"] not in offered:
                out.append(
                    Violation(
                        "openai-1",
                        f"messages[{n}] output {m['tool_call_id']!r}",
                        ERRORS["openai-1-output"],
                    )
                )
    return out


# --- the host ---------------------------------------------------------------------------------


def host_violations(view: Sequence[Msg]) -> list[Violation]:
    """What the orchestrator refuses before any provider sees the request."""
    from amplifier_core.message_models import ChatRequest, Message

    out: list[Violation] = []
    models: list[Any] = []
    for i, m in enumerate(view):
        try:
            models.append(Message(**m))
        except Exception as exc:
            reason = " / ".join(str(exc).splitlines()[:3])
            out.append(
                Violation("host-message", f"view[{i}]", f"{ERRORS['host-message']}: {reason}")
            )
    if not out:
        try:
            ChatRequest(messages=models)
        except Exception as exc:
            out.append(Violation("host-request", "view", f"{ERRORS['host-request']}: {exc}"))
    return out


def call_shape_violations(view: Sequence[Msg]) -> list[Violation]:
    """Calls the providers cannot read: no ``tool``/``name`` string, or non-dict arguments."""
    out: list[Violation] = []
    for i, m in enumerate(view):
        calls = m.get("tool_calls")
        for k, c in enumerate(calls if isinstance(calls, list) else []):
            if not isinstance(c, Mapping):
                continue
            if not _name_of(c) or not isinstance(c.get("arguments", {}), dict):
                out.append(
                    Violation(
                        "host-call-shape", f"view[{i}].tool_calls[{k}]", ERRORS["host-call-shape"]
                    )
                )
    return out


def provider_violations(
    view: Sequence[Msg], *, history: Sequence[Msg] | None = None, thinking: bool | None = None
) -> list[Violation]:
    """Anthropic 1–8 and OpenAI 1–3 together."""
    return anthropic_violations(view, history=history, thinking=thinking) + openai_violations(view)
