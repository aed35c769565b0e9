"""Every view a real provider accepts (issue 12's "Tests that must exist").

Generated sessions on small windows (8k–32k, budget passed as ``token_budget`` or published by a
provider as ``context_window`` / ``max_output_tokens``) with tool results of 2k–30k tokens, tool-
call ids reused across rounds and turns, OpenAI-style and host-style calls (``tool`` +
``arguments`` dicts, ``tool_call`` blocks), ``image_url`` and ``image`` blocks, unknown block
types, thinking on every round or only on a turn's first round, several human turns, hook
reminders, and turns a person interrupted. Like an orchestrator, the driver asks for a view
before every assistant message, through a real ``amplifier_core`` hook registry that records
the events. On every view:

* ``check_view(view, history=history)`` is empty, and so is an independent statement of the
  turn invariants (a human prompt follows a tool result only where it did in the history; an
  active turn that opens with thinking opens with it in the view too);
* each message validates as the host's ``Message``, the list as a ``ChatRequest``;
* the provider oracle (``tests/provider_rules.py``: Anthropic rules 1–8, OpenAI 1–3) finds
  nothing;
* the view's estimate (``sum(estimate_message_tokens(m))``, the unit the manager sizes in) is
  within the effective budget of ``context:budget`` whenever the floor fits (system messages,
  the first and the last human prompt, and the latest assistant message when it carries
  thinking or tool calls, as ``../shared/checks/fit_check.py`` computes it);
* the latest ``protected_tool_results`` results are whole (every text segment of the history's
  result, in order), unless a ``context:compaction`` event so far reported
  ``protection_relaxed`` with non-zero counts;
* the history is unchanged by the request;
* and every generated message is admitted (unknown block types included).

Each property is its own test, so each fails (and shrinks) on its own. The same checks also run
on every transcript of ``../shared/corpus`` at 16k/2k and 32k/4k (issue 12's "done when").
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from amplifier_core.hooks import HookRegistry, HookResult
from amplifier_core.message_models import ChatRequest, Message
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import (
    SimpleContextManager,
    check_view,
    estimate_message_tokens,
)

from .provider_rules import provider_violations

PROPERTY_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)

SAFETY_MARGIN = 4096  # what a provider's window loses besides the reserved output
PROTECTED_TOOL_RESULTS = 5  # the default
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC" + (
    "hwGA60e6kgAAAABJRU5ErkJggg=="
)
_CHUNK = "line 42: compiled module_7 in 3.4s; warning W12 at src/app/models.py:17 (unused)\n"
_CHARS_PER_TOKEN = len(_CHUNK * 200) / estimate_message_tokens(
    {"role": "tool", "content": _CHUNK * 200}
)
NON_HUMAN_SOURCES = ("hook", "context-compaction")

Msg = dict[str, Any]


# --- the vocabulary -------------------------------------------------------------------------


def is_human(m: Mapping[str, Any]) -> bool:
    meta = m.get("metadata") or {}
    return (
        m.get("role") == "user"
        and not meta.get("ephemeral")
        and meta.get("source") not in NON_HUMAN_SOURCES
        and not is_result(m)
    )


def is_result(m: Mapping[str, Any]) -> bool:
    """A tool result in any shape the generator stores (tool/function role, result blocks)."""
    return m.get("role") in ("tool", "function") or any(
        b.get("type") == "tool_result" for b in blocks(m)
    )


def blocks(m: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = m.get("content")
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def thinking_of(m: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [b for b in blocks(m) if b.get("type") in ("thinking", "redacted_thinking")]


def has_calls(m: Mapping[str, Any]) -> bool:
    return bool(m.get("tool_calls")) or any(
        b.get("type") in ("tool_call", "tool_use") for b in blocks(m)
    )


def texts(m: Mapping[str, Any]) -> list[str]:
    content = m.get("content")
    if isinstance(content, str):
        return [content]
    return [str(b.get("text")) for b in blocks(m) if b.get("type") == "text"]


def filler(marker: str, tokens: int) -> str:
    """``marker`` then text the estimator prices at about ``tokens``."""
    chars = int(tokens * _CHARS_PER_TOKEN)
    body = (_CHUNK * (chars // len(_CHUNK) + 1))[:chars]
    return f"{marker}{body}"


# --- generated sessions ---------------------------------------------------------------------


class Session:
    """A generated conversation and the window it runs on (a plain class: hypothesis prints
    a falsifying example with ``__repr__``, the compact picture of :func:`describe`)."""

    def __init__(
        self,
        messages: list[Msg],
        window: int,
        max_output: int,
        via_provider: bool,
        thinking: str,
        id_scheme: str,
    ) -> None:
        self.messages = messages
        self.window = window
        self.max_output = max_output
        self.via_provider = via_provider
        self.thinking = thinking
        """``none``, ``every`` (every assistant message) or ``first`` (a turn's first round)."""
        self.id_scheme = id_scheme
        self.factory: str | None = None
        """The system prompt factory's text (``None``: no factory)."""
        self.rewrite: tuple[str, float, float] | None = None
        """(``insert``/``delete``/``replace``, where in the history, at which request (a share
        of the session)): before that request ``manager.messages`` is reassigned with fresh
        dicts, one message inserted, deleted or replaced there."""

    @property
    def token_budget(self) -> int:
        return self.window - self.max_output // 2 - SAFETY_MARGIN

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        return f"Session<{describe(self)}>"


def _thinking_block(label: str) -> Msg:
    return {
        "type": "thinking",
        "thinking": f"Let me think about {label}.",
        "signature": f"sig-{label}",
    }


def _call_id(scheme: str, *, serial: int, in_turn: int, in_round: int) -> str:
    if scheme == "unique":
        return f"call_{serial}"
    if scheme == "per_turn":  # agents that number calls per turn: call_0, call_1 in every turn
        return f"call_{in_turn}"
    if scheme == "per_round":
        return f"call_{in_round}"
    # 40 characters (OpenAI's chat limit) and reused per turn: a derived id must stay <= 40.
    return f"toolu_01{'A' * 27}{in_turn:05d}"


def _assistant_round(style: str, calls: list[tuple[str, str, Msg]], thinking: Msg | None) -> Msg:
    head: list[Msg] = [thinking] if thinking else []
    if style == "openai":
        return {
            "role": "assistant",
            "content": head or None,
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for cid, name, args in calls
            ],
        }
    host_calls = [{"id": cid, "tool": name, "arguments": args} for cid, name, args in calls]
    call_blocks = [
        {"type": "tool_call", "id": cid, "name": name, "input": args} for cid, name, args in calls
    ]
    if style == "host":
        return {
            "role": "assistant",
            "content": [*head, {"type": "text", "text": "Checking."}],
            "tool_calls": host_calls,
        }
    if style == "host_blocks":  # what the published orchestrators store: blocks and tool_calls
        return {"role": "assistant", "content": [*head, *call_blocks], "tool_calls": host_calls}
    return {"role": "assistant", "content": [*head, *call_blocks]}  # blocks only


def _result_content(kind: str, marker: str, tokens: int) -> Any:
    text = filler(marker, tokens)
    if kind == "text":
        return text
    extra: Msg
    if kind == "image_url":
        extra = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1PX}"}}
    elif kind == "image":
        extra = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX},
        }
    else:  # a block type nobody here knows
        extra = {"type": "x-trace", "spans": [{"name": "exec", "ms": 12}]}
    return [{"type": "text", "text": text}, extra]


RESULT_SHAPES = ("tool", "tool", "tool", "anthropic_user", "host_user", "tool_block")
"""How a result is stored: mostly as a host tool message, else in the other shapes pairing
reads (a ``function`` result is left out: the view sends its role as stored, which the
provider oracle does not read as a result)."""


def _result_message(shape: str, cid: str, name: str, content: Any) -> Msg:
    if shape == "anthropic_user":
        block: Msg = {"type": "tool_result", "tool_use_id": cid, "content": content}
        return {"role": "user", "content": [block]}
    if shape == "host_user":
        output = content if isinstance(content, str) else json.dumps(content)
        block = {"type": "tool_result", "tool_call_id": cid, "output": output}
        return {"role": "user", "content": [block]}
    if shape == "tool_block":
        block = {"type": "tool_result", "tool_use_id": cid, "content": content}
        return {"role": "tool", "tool_call_id": cid, "name": name, "content": [block]}
    return {"role": "tool", "tool_call_id": cid, "name": name, "content": content}


def _prompt(turn: int, kind: str) -> Msg:
    text = f"H{turn}: please do task number {turn} and report back."
    if kind == "text":
        return {"role": "user", "content": text}
    if kind == "image_url":
        image: Msg = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1PX}"}}
    else:
        image = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX},
        }
    return {"role": "user", "content": [{"type": "text", "text": text}, image]}


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    window = draw(st.integers(8_000, 32_000))
    max_output = draw(st.integers(1_000, 4_000))
    thinking = draw(st.sampled_from(["none", "every", "first"]))
    scheme = draw(st.sampled_from(["unique", "per_turn", "per_round", "long_per_turn"]))
    styles = sorted(
        draw(st.sets(st.sampled_from(["openai", "host", "host_blocks", "blocks"]), min_size=1))
    )
    messages: list[Msg] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": "You are a careful coding agent."})
    serial = itertools.count()
    results = itertools.count()
    turns = draw(st.integers(1, 3))
    for turn in range(turns):
        messages.append(
            _prompt(turn, draw(st.sampled_from(["text", "text", "text", "image_url", "image"])))
        )
        in_turn = itertools.count()
        rounds = draw(st.integers(0 if turn < turns - 1 else 1, 4))
        for r in range(rounds):
            n_calls = draw(st.sampled_from([1, 1, 1, 2, 3]))
            style = draw(st.sampled_from(styles))
            calls = []
            for j in range(n_calls):
                cid = _call_id(scheme, serial=next(serial), in_turn=next(in_turn), in_round=j)
                calls.append((cid, "read_file", {"path": f"src/f{turn}_{r}_{j}.py"}))
            think = thinking == "every" or (thinking == "first" and r == 0)
            messages.append(
                _assistant_round(style, calls, _thinking_block(f"t{turn}r{r}") if think else None)
            )
            for cid, name, _ in calls:
                kind = draw(
                    st.sampled_from(["text", "text", "text", "image_url", "image", "unknown"])
                )
                # Now and then above the ingress cap (128 KiB), which admission clips.
                if draw(st.integers(0, 9)) == 9:
                    tokens = draw(st.integers(40_000, 60_000))
                else:
                    tokens = draw(st.integers(2_000, 30_000))
                shape = draw(st.sampled_from(RESULT_SHAPES))
                content = _result_content(kind, f"R{next(results)}|", tokens)
                messages.append(_result_message(shape, cid, name, content))
            if draw(st.integers(0, 9)) == 9:  # shrinks towards "no reminder"
                messages.append(
                    {
                        "role": "user",
                        "content": f"<system-reminder>turn {turn} round {r}</system-reminder>",
                        "metadata": {"source": "hook", "ephemeral": True, "persisted": True},
                    }
                )
        interrupted = turn < turns - 1 and rounds > 0 and draw(st.integers(0, 4)) == 4
        cancelled = turn < turns - 1 and not interrupted and draw(st.integers(0, 4)) == 4
        if cancelled:
            # The person cancels while the tool runs: the orchestrator stores the call and a
            # cancellation result, or no result at all, and the next prompt follows.
            cid = _call_id(scheme, serial=next(serial), in_turn=next(in_turn), in_round=0)
            style = draw(st.sampled_from(styles))
            think = thinking == "every" or (thinking == "first" and rounds == 0)
            messages.append(
                _assistant_round(
                    style,
                    [(cid, "run", {"cmd": "make"})],
                    _thinking_block(f"t{turn}c") if think else None,
                )
            )
            if draw(st.booleans()):
                cancellation = f"R{next(results)}|Cancelled by the user."
                messages.append({"role": "tool", "tool_call_id": cid, "content": cancellation})
        if (interrupted or cancelled) and draw(st.integers(0, 2)) == 2:
            # A hook reminder between the latest tool round and the next prompt, of any size.
            size = draw(st.integers(20, 9_000))
            messages.append(
                {
                    "role": "user",
                    "content": f"<system-reminder>{filler(f'M{turn}|', size)}</system-reminder>",
                    "metadata": {"source": "hook"},
                }
            )
        if not (interrupted or cancelled):
            answer: Msg = {"role": "assistant", "content": f"Task {turn} is done."}
            if thinking == "every" or (thinking == "first" and rounds == 0):
                answer["content"] = [
                    _thinking_block(f"t{turn}a"),
                    {"type": "text", "text": f"Task {turn} is done."},
                ]
            messages.append(answer)
    session = Session(messages, window, max_output, draw(st.booleans()), thinking, scheme)
    if draw(st.booleans()):
        # The host's system prompt factory: its text replaces the stored static system message.
        session.factory = "You are a careful coding agent; today's rules: " + "be brief. " * 20
    if draw(st.integers(0, 3)) == 3:
        # A subclass that re-reads its store finds it changed mid-history (issue 21 §3).
        session.rewrite = (
            draw(st.sampled_from(["insert", "delete", "replace"])),
            draw(st.floats(0.05, 0.6)),
            draw(st.floats(0.5, 1.0)),
        )
    return session


# --- driving a session like an orchestrator -------------------------------------------------


@dataclass
class _Info:
    defaults: dict[str, Any]
    model: str | None = None


class WindowProvider:
    """A provider that publishes its window the way ``derive_budget`` reads it."""

    def __init__(self, window: int, max_output: int) -> None:
        self.window, self.max_output = window, max_output

    def get_info(self) -> _Info:
        return _Info({"context_window": self.window, "max_output_tokens": self.max_output})


@dataclass
class Request:
    at: int
    """The position of the assistant message the view was asked for."""
    view: list[Msg]
    history: list[Msg]
    history_before: list[Msg]
    history_after: list[Msg]
    effective_budget: int | None
    relaxed: bool
    """A ``context:compaction`` so far reported ``protection_relaxed`` with non-zero counts."""
    turn_started: bool = False
    """A ``context:compaction`` so far was made at a turn start (``reason`` ``turn_start``)."""


@dataclass
class Run:
    session: Session
    requests: list[Request] = field(default_factory=list[Request])
    refused: list[str] = field(default_factory=list[str])


async def _drive(session: Session) -> Run:
    hooks = HookRegistry()
    events: list[tuple[str, dict[str, Any]]] = []

    async def record(event: str, data: dict[str, Any]) -> HookResult:
        events.append((event, data))
        return HookResult(action="continue")

    for name in ("context:compaction", "context:budget"):
        hooks.register(name, record, name=f"provider-views-{name}")
    manager = SimpleContextManager(hooks=hooks)
    factory_text = session.factory
    if factory_text is not None:
        await manager.set_system_prompt_factory(lambda: factory_text)
    provider = WindowProvider(session.window, session.max_output) if session.via_provider else None
    run = Run(session)
    rewrite_at = None if session.rewrite is None else session.rewrite[2] * len(session.messages)
    for position, message in enumerate(session.messages):
        if message["role"] == "assistant":
            if session.rewrite is not None and rewrite_at is not None and position >= rewrite_at:
                manager.messages = _rewritten(manager.messages, *session.rewrite[:2])
                rewrite_at = None
            before = copy.deepcopy(await manager.get_messages())
            if provider is not None:
                view = await manager.get_messages_for_request(provider=provider)
            else:
                view = await manager.get_messages_for_request(token_budget=session.token_budget)
            history = await manager.get_messages()
            budgets = [d for e, d in events if e == "context:budget"]
            relaxed = any(
                any((d.get("protection_relaxed") or {}).values())
                for e, d in events
                if e == "context:compaction"
            )
            compactions = [d for e, d in events if e == "context:compaction"]
            run.requests.append(
                Request(
                    at=position,
                    view=view,
                    history=history,
                    history_before=before,
                    history_after=copy.deepcopy(history),
                    effective_budget=int(budgets[-1]["effective_budget"]) if budgets else None,
                    relaxed=relaxed,
                    turn_started=any(d.get("reason") == "turn_start" for d in compactions),
                )
            )
        try:
            await manager.add_message(copy.deepcopy(message))
        except Exception as exc:  # the admission property reports it; the views so far count
            run.refused.append(f"message {position} refused: {type(exc).__name__}: {exc}"[:300])
            break
    return run


def _rewritten(messages: list[Msg], kind: str, where: float) -> list[Msg]:
    """Fresh dicts, as a store re-read gives them, with one message changed at ``where``."""
    fresh = copy.deepcopy(messages)
    if len(fresh) < 3:
        return fresh
    at = max(1, min(len(fresh) - 2, int(where * len(fresh))))
    note: Msg = {
        "role": "user",
        "content": "<system-reminder>the file watcher saw a change</system-reminder>",
        "metadata": {"source": "hook"},
    }
    if kind == "insert":
        fresh.insert(at, note)
    elif kind == "delete":
        # A prompt or reminder (deleting a call or result would orphan the other); where
        # ``at`` holds neither, the next prompt: a store re-read with a prompt gone.
        prompts = [i for i in range(at, len(fresh) - 1) if is_human(fresh[i])]
        if fresh[at].get("role") == "user" and not is_result(fresh[at]):
            del fresh[at]
        elif prompts:
            del fresh[prompts[0]]
    elif kind == "replace" and fresh[at].get("role") == "assistant" and not has_calls(fresh[at]):
        fresh[at] = {"role": "assistant", "content": "An answer, edited in the store."}
    return fresh


def drive(session: Session) -> Run:
    logging.disable(logging.WARNING)  # over-budget warnings are expected on the current code
    try:
        return asyncio.run(_drive(session))
    finally:
        logging.disable(logging.NOTSET)


def tokens(view: Sequence[Mapping[str, Any]]) -> int:
    return sum(estimate_message_tokens(m) for m in view)


def floor_tokens(view: Sequence[Mapping[str, Any]]) -> int:
    """What the fit pass may not touch, priced as in the view (as fit_check computes it)."""
    floor = tokens([m for m in view if m.get("role") == "system"])
    humans = [m for m in view if is_human(m)]
    ends = {id(m): m for m in humans[:1] + humans[-1:]}
    floor += tokens(list(ends.values()))
    latest = next((m for m in reversed(view) if m.get("role") == "assistant"), None)
    if latest is not None and (has_calls(latest) or thinking_of(latest)):
        floor += estimate_message_tokens(latest)
    return floor


def _after_tool(msgs: Sequence[Msg], i: int, *, calls: bool = False) -> bool:
    """Whether the human prompt at ``i`` follows a tool result, as Anthropic reads it.

    Non-human user messages (hook reminders, the compaction notice) merge into the same user
    turn, so they are looked through: T, reminder, H is the same conversation as T, H. With
    ``calls`` (read in a history) a call nobody answered counts too: the view answers it with a
    placeholder, so the prompt follows that round there as well.
    """
    j = i - 1
    while j >= 0 and msgs[j].get("role") == "user" and not is_human(msgs[j]):
        j -= 1
    return j >= 0 and (is_result(msgs[j]) or (calls and has_calls(msgs[j])))


def _prompt_key(message: Msg) -> str:
    """A prompt's words: the view sends image parts in the host's form, the text verbatim."""
    content = message.get("content")
    if not isinstance(content, list):
        return json.dumps(content)
    return json.dumps([b.get("text") for b in content if isinstance(b, dict) and "text" in b])


def turn_violations(view: Sequence[Msg], history: Sequence[Msg]) -> list[str]:
    """Issue 12 §3's invariants, stated independently of the package's check_view."""
    problems: list[str] = []
    allowed = {
        _prompt_key(history[i])
        for i in range(len(history))
        if is_human(history[i]) and _after_tool(history, i, calls=True)
    }
    for i in range(len(view)):
        moved = is_human(view[i]) and _prompt_key(view[i]) not in allowed
        if moved and _after_tool(view, i):
            problems.append(f"view[{i}]: a human prompt directly after a tool result")

    def opener(msgs: Sequence[Msg]) -> Msg | None:
        last = max((i for i, m in enumerate(msgs) if is_human(m)), default=None)
        return msgs[last + 1] if last is not None and last + 1 < len(msgs) else None

    h, v = opener(history), opener(view)
    opens_thinking = h is not None and h.get("role") == "assistant" and bool(thinking_of(h))
    if opens_thinking and (
        v is None or v.get("role") != "assistant" or thinking_of(v) != thinking_of(h or {})
    ):
        problems.append("the active turn does not open with its thinking assistant message")
    return problems


def protected_violations(request: Request) -> list[str]:
    if request.relaxed:
        return []
    # A turn-start escalation may shorten the latest results of finished turns; the active
    # turn's own (after the latest prompt) came after any such escalation.
    latest_prompt = max((i for i, m in enumerate(request.history) if is_human(m)), default=-1)
    results = [
        m
        for i, m in enumerate(request.history)
        if is_result(m) and (not request.turn_started or i > latest_prompt)
    ]
    problems: list[str] = []
    view_results = [m for m in request.view if m.get("role") == "tool"]
    for result in results[-PROTECTED_TOOL_RESULTS:]:
        segments = texts(result)
        if result.get("role") != "tool" or not segments:
            continue  # a result in a foreign shape: its text is not where this looks
        marker = segments[0].split("|", 1)[0] + "|"
        found = next((m for m in view_results if texts(m) and texts(m)[0].startswith(marker)), None)
        if found is None:
            problems.append(f"protected result {marker} left out of the view")
            continue
        rest = iter(texts(found))
        if not all(any(seg == got for got in rest) for seg in segments):
            problems.append(f"protected result {marker} is not whole in the view")
    return problems


def host_problems(view: Sequence[Msg]) -> list[str]:
    problems: list[str] = []
    models: list[Message] = []
    for i, m in enumerate(view):
        try:
            models.append(Message(**m))
        except Exception as exc:
            problems.append(f"view[{i}]: {str(exc).splitlines()[:3]}")
    if not problems:
        try:
            ChatRequest(messages=models)
        except Exception as exc:
            problems.append(f"ChatRequest: {exc}")
    return problems


def first_failure(run: Run, check: Callable[[Request], list[str]]) -> str | None:
    for request in run.requests:
        problems = check(request)
        if problems:
            return f"request before message {request.at}: {problems[:3]}"
    return None


def assert_every_request(run: Run, session: Session, check: Callable[[Request], list[str]]) -> None:
    """Fail with the first request ``check`` finds a problem in, and the session's picture."""
    failure = first_failure(run, check)
    assert failure is None, f"{failure}\n{describe(session)}"


def describe(session: Session) -> str:
    """A compact picture of a session for failure messages."""
    parts: list[str] = []
    for m in session.messages:
        role = m["role"]
        if role == "tool":
            size = sum(len(t) for t in texts(m))
            kinds = ",".join(str(b.get("type")) for b in blocks(m)) or "str"
            parts.append(f"T({m['tool_call_id']},{size}c,{kinds})")
        elif role == "assistant":
            ids = [c.get("id") for c in m.get("tool_calls") or []] or [
                b.get("id") for b in blocks(m) if b.get("type") == "tool_call"
            ]
            parts.append(("A*" if thinking_of(m) else "A") + (f"{ids}" if ids else ""))
        else:
            parts.append("H" if is_human(m) else role[0].upper())
    return (
        f"window={session.window} max_output={session.max_output} "
        f"via_provider={session.via_provider} budget~{session.token_budget} "
        f"thinking={session.thinking} ids={session.id_scheme}: " + " ".join(parts)
    )


# --- the properties -------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(sessions())
def test_every_generated_message_is_admitted(session: Session) -> None:
    run = drive(session)
    assert run.refused == [], describe(session)


@PROPERTY_SETTINGS
@given(sessions())
def test_check_view_finds_nothing(session: Session) -> None:
    run = drive(session)
    assert_every_request(run, session, lambda r: check_view(r.view, history=r.history))


@PROPERTY_SETTINGS
@given(sessions())
def test_turn_invariants_hold(session: Session) -> None:
    run = drive(session)
    assert_every_request(run, session, lambda r: turn_violations(r.view, r.history))


@PROPERTY_SETTINGS
@given(sessions())
def test_views_validate_as_the_host_model(session: Session) -> None:
    run = drive(session)
    assert_every_request(run, session, lambda r: host_problems(r.view))


@PROPERTY_SETTINGS
@given(sessions())
def test_provider_oracle_finds_nothing(session: Session) -> None:
    run = drive(session)
    thinking = session.thinking != "none"

    def check(r: Request) -> list[str]:
        return [str(v) for v in provider_violations(r.view, history=r.history, thinking=thinking)]

    assert_every_request(run, session, check)


@PROPERTY_SETTINGS
@given(sessions())
def test_views_fit_the_effective_budget_when_the_floor_does(session: Session) -> None:
    run = drive(session)

    def check(r: Request) -> list[str]:
        assert r.effective_budget is not None, "no context:budget event before a view"
        size, floor = tokens(r.view), floor_tokens(r.view)
        if size > r.effective_budget and floor <= r.effective_budget:
            return [f"view {size} tokens > effective budget {r.effective_budget} (floor {floor})"]
        return []

    assert_every_request(run, session, check)


@PROPERTY_SETTINGS
@given(sessions())
def test_protected_results_are_whole_unless_relaxation_was_reported(session: Session) -> None:
    run = drive(session)
    assert_every_request(run, session, protected_violations)


@PROPERTY_SETTINGS
@given(sessions())
def test_decisions_land_on_the_messages_they_were_made_for(session: Session) -> None:
    """Only a result is sent shortened, only a user message no person typed as a stub, and
    every message the view sends whole is one of the history's (a rewritten history
    included: decisions made for a shifted list must not be applied to it)."""
    run = drive(session)

    def check(r: Request) -> list[str]:
        problems: list[str] = []
        for m in r.view:
            if m.get("_truncated") and not is_result(m):
                problems.append(f"a {m.get('role')} message sent as a shortened result")
            if m.get("_stubbed") and (m.get("role") != "user" or is_human(m) or is_result(m)):
                problems.append(f"a {m.get('role')} message sent as a stub")
        return problems

    assert_every_request(run, session, check)


@PROPERTY_SETTINGS
@given(sessions())
def test_requests_leave_the_history_unchanged(session: Session) -> None:
    run = drive(session)

    def check(r: Request) -> list[str]:
        return [] if r.history_before == r.history_after else ["the history changed"]

    assert_every_request(run, session, check)


# --- the corpus, replayed as fit_check does ---------------------------------------------------

CORPUS_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CORPUS_FILES = sorted(CORPUS_DIR.glob("*.jsonl")) if CORPUS_DIR.is_dir() else []


async def _replay_corpus(path: Path, budget: int) -> list[str]:
    messages = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    manager = SimpleContextManager()
    problems: list[str] = []
    for position, message in enumerate(messages):
        if message.get("role") == "assistant" and position > 0:
            before = copy.deepcopy(await manager.get_messages())
            view = await manager.get_messages_for_request(token_budget=budget)
            history = await manager.get_messages()
            request = Request(position, view, history, before, history, budget, relaxed=False)
            found = [
                *check_view(view, history=history),
                *turn_violations(view, history),
                *host_problems(view),
                *(str(v) for v in provider_violations(view, history=history)),
            ]
            size, floor = tokens(view), floor_tokens(view)
            if size > budget and floor <= budget:
                found.append(f"view {size} tokens > budget {budget} (floor {floor})")
            if before != history:
                found.append("the history changed")
            problems += [f"request before message {request.at}: {p}" for p in found[:2]]
        await manager.add_message(copy.deepcopy(message))
    return problems


@pytest.mark.skipif(not CORPUS_FILES, reason="../shared/corpus is not available")
@pytest.mark.parametrize(("window", "max_output"), [(16_000, 2_000), (32_000, 4_000)])
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem[:40])
def test_corpus_views_are_accepted_and_fit(path: Path, window: int, max_output: int) -> None:
    """Issue 12's "done when", per transcript: 0 views over the budget, 0 invalid views."""
    budget = window - max_output // 2 - SAFETY_MARGIN
    logging.disable(logging.WARNING)
    try:
        problems = asyncio.run(_replay_corpus(path, budget))
    finally:
        logging.disable(logging.NOTSET)
    assert problems == [], "\n".join(problems[:6])
