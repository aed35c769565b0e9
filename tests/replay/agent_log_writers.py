"""Small logs in each agent's own format, written as that agent writes them.

Each writer takes the per-call usage to record, ``(fresh input, cache read, output)``: the
fresh input is what the agent's format calls its input where that excludes the cache (Pi,
OpenCode, Cline), and Codex's ``input_tokens`` is the gross figure. :func:`largest` is what
each such log records as its largest request: gross input (and cache writes, none here).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.2-codex"
CODEX_WINDOW = 258_400
Usage = tuple[int, int, int]


def largest(usages: list[Usage]) -> int:
    return max(fresh + read for fresh, read, _ in usages)


def _lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def codex(
    path: Path, usages: list[Usage], *, compact_after: int | None = None, summary: bool = True
) -> Path:
    """A Codex rollout; ``compact_after``: Codex compacted after that many calls (``summary``:
    its ``compacted`` line holds the summary it sends from then on, else nothing)."""
    stamp = "2026-01-25T10:32:00.000Z"
    rows: list[dict[str, Any]] = [
        {"timestamp": stamp, "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}},
        {"timestamp": stamp, "type": "response_item",
         "payload": {"type": "message", "role": "developer",
                     "content": [{"type": "input_text", "text": "be careful"}]}},
        {"timestamp": stamp, "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "make a file"}]}},
    ]  # fmt: skip
    total = 0
    for n, (fresh, read, output) in enumerate(usages, 1):
        rows.append({"timestamp": stamp, "type": "turn_context", "payload": {"model": CODEX_MODEL}})
        last = n == len(usages)
        if last:
            item = {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "done"}]}  # fmt: skip
        else:
            item = {"type": "function_call", "name": "exec_command", "call_id": f"call_{n}",
                    "arguments": json.dumps({"cmd": f"cat file{n}"})}  # fmt: skip
        rows.append({"timestamp": stamp, "type": "response_item", "payload": item})
        total += fresh + read + output
        usage = {"input_tokens": fresh + read, "cached_input_tokens": read,
                 "output_tokens": output, "total_tokens": fresh + read + output}  # fmt: skip
        info = {"total_token_usage": {"total_tokens": total}, "last_token_usage": usage,
                "model_context_window": CODEX_WINDOW}  # fmt: skip
        count = {"timestamp": stamp, "type": "event_msg",
                 "payload": {"type": "token_count", "info": info}}  # fmt: skip
        rows += [count, count]  # Codex writes each count twice
        if not last:
            rows.append({"timestamp": stamp, "type": "response_item",
                         "payload": {"type": "function_call_output", "call_id": f"call_{n}",
                                     "output": f"contents of file{n}\n" * 20}})  # fmt: skip
        if n == compact_after:
            said = {"message": "Summary: files read so far."} if summary else {}
            rows.append({"timestamp": stamp, "type": "compacted", "payload": said})
    return _lines(path, rows)


def pi(
    path: Path,
    usages: list[Usage],
    *,
    branch: bool = True,
    compact_after: int | None = None,
    tokens_before: int = 0,
) -> Path:
    """A Pi session; ``branch``: with an abandoned answer (a bigger request) off its prompt;
    ``compact_after``: Pi compacted after that many calls (``tokens_before`` its context)."""
    rows: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "sess", "timestamp": "2026-02-03T22:02:17Z"},
        {"type": "model_change", "id": "m0", "parentId": None, "modelId": MODEL},
        {"type": "message", "id": "u0", "parentId": "m0",
         "message": {"role": "user", "content": [{"type": "text", "text": "make a file"}]}},
    ]  # fmt: skip
    if branch:
        huge = largest(usages) * 2 + 1
        rows.append(_pi_answer("abandoned", "u0", None, (huge, 0, 1)))
    parent = "u0"
    for n, usage in enumerate(usages, 1):
        last = n == len(usages)
        rows.append(_pi_answer(f"a{n}", parent, None if last else f"call{n}", usage))
        parent = f"a{n}"
        if not last:
            rows.append(
                {"type": "message", "id": f"r{n}", "parentId": parent,
                 "message": {"role": "toolResult", "toolCallId": f"call{n}", "toolName": "read",
                             "content": [{"type": "text", "text": f"file {n}\n" * 20}]}}
            )  # fmt: skip
            parent = f"r{n}"
        if n == compact_after:
            rows.append({"type": "compaction", "id": f"c{n}", "parentId": parent,
                         "summary": "Summary: files read so far.", "firstKeptEntryId": parent,
                         "tokensBefore": tokens_before})  # fmt: skip
            parent = f"c{n}"
    return _lines(path, rows)


def _pi_answer(entry: str, parent: str, call: str | None, usage: Usage) -> dict[str, Any]:
    fresh, read, output = usage
    content: list[dict[str, Any]] = [{"type": "text", "text": f"answer {entry}"}]
    if call is not None:
        content.append({"type": "toolCall", "id": call, "name": "read",
                        "arguments": {"path": f"{call}.md"}})  # fmt: skip
    return {
        "type": "message", "id": entry, "parentId": parent,
        "message": {"role": "assistant", "model": MODEL, "content": content,
                    "usage": {"input": fresh, "cacheRead": read, "cacheWrite": 0,
                              "output": output}},
    }  # fmt: skip


def opencode_messages(usages: list[Usage]) -> list[dict[str, Any]]:
    """An ``opencode export``'s ``messages``: a prompt, then one assistant message per call."""
    messages: list[dict[str, Any]] = [
        {"info": {"id": "msg_0", "role": "user", "time": {"created": 1}},
         "parts": [{"id": "prt_0", "type": "text", "text": "make a file"}]}
    ]  # fmt: skip
    for n, (fresh, read, output) in enumerate(usages, 1):
        tokens = {"input": fresh, "output": output, "reasoning": 0,
                  "cache": {"read": read, "write": 0}}  # fmt: skip
        parts: list[dict[str, Any]] = [{"id": f"prt_{n}a", "type": "step-start"}]
        if n < len(usages):
            parts.append({"id": f"prt_{n}b", "type": "tool", "callID": f"call_{n}",
                          "tool": "read", "state": {"status": "completed",
                                                    "input": {"filePath": f"f{n}"},
                                                    "output": f"line {n}\n" * 20}})  # fmt: skip
        else:
            parts.append({"id": f"prt_{n}b", "type": "text", "text": "done"})
        parts.append({"id": f"prt_{n}c", "type": "step-finish", "tokens": tokens})
        messages.append(
            {"info": {"id": f"msg_{n}", "role": "assistant", "modelID": MODEL,
                      "time": {"created": 1 + n}, "tokens": tokens},
             "parts": parts}
        )  # fmt: skip
    return messages


def opencode_export(path: Path, usages: list[Usage]) -> Path:
    document = {"info": {"id": "ses_1", "title": "t"}, "messages": opencode_messages(usages)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2))
    return path


def opencode_database(path: Path, sessions: dict[str, list[Usage]]) -> Path:
    """OpenCode 1.2+'s database, its tables as the logs README gives them (and a column a
    later version added, which the reader must not need)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, directory TEXT,"
        " title TEXT, time_created INTEGER, time_updated INTEGER);"
        "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,"
        " time_updated INTEGER, data TEXT, compacted INTEGER DEFAULT 0);"
        "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,"
        " time_created INTEGER, time_updated INTEGER, data TEXT);"
    )
    for order, (sid, usages) in enumerate(sessions.items()):
        db.execute(
            "INSERT INTO session VALUES (?, 'p', '/w', 't', ?, ?)", (sid, order, 1000 * order)
        )
        for message in opencode_messages(usages):
            info = message["info"]
            mid = f"{sid}_{info['id']}"
            created = info["time"]["created"]
            db.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data)"
                " VALUES (?, ?, ?, ?, ?)",
                (mid, sid, created, created, json.dumps(info)),
            )
            for part in message["parts"]:
                db.execute(
                    "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                    (f"{mid}_{part['id']}", mid, sid, created, created, json.dumps(part)),
                )
    db.commit()
    db.close()
    return path


def cline_task(folder: Path, usages: list[Usage]) -> Path:
    """A Cline task folder: results sent as text (``[tool for 'x'] Result:``) as Cline does."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "<task>make a file</task>"}]}
    ]
    for n, (fresh, read, output) in enumerate(usages, 1):
        last = n == len(usages)
        block: dict[str, Any] = (
            {"type": "text", "text": "done"}
            if last
            else {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file",
                  "input": {"path": f"f{n}.md"}}
        )  # fmt: skip
        history.append(
            {"role": "assistant", "content": [block],
             "modelInfo": {"modelId": MODEL, "providerId": "anthropic"},
             "metrics": {"tokens": {"prompt": fresh, "cached": read, "completion": output}}}
        )  # fmt: skip
        if not last:
            history.append(
                {"role": "user", "content": [
                    {"type": "text", "text": f"[read_file for 'f{n}.md'] Result:\n" + "x\n" * 20},
                    {"type": "text", "text": "<environment_details>...</environment_details>"}]}
            )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "api_conversation_history.json").write_text(json.dumps(history, indent=2))
    (folder / "task_metadata.json").write_text(
        json.dumps({"model_usage": [{"model_id": MODEL}]}, indent=2)
    )
    return folder
