"""A seeded generator of realistic Amplifier agent sessions.

The CLI replays one of these when it is given no transcript, and the benchmarks use them at
1,000 to 50,000 messages. Messages come out in the shapes the published Amplifier orchestrators
store: assistant turns carry ``tool_calls`` entries ``{"id", "tool", "arguments": {...}}`` and
usually a block list (``thinking`` with a signature, ``text``, ``tool_call``); each call is
answered by one ``{"role": "tool", "tool_call_id", "name", "content"}`` message, in call order,
directly after the assistant turn. Hook reminders are user messages flagged in ``metadata``;
human prompts are user messages without flags.

Length rule: the result has exactly ``n_messages`` entries and is built from complete units
only (a human prompt, a hook reminder, a final assistant answer, or an assistant turn together
with all of its results). A tool round is shrunk to fewer parallel calls when the room left is
small, so the session never ends between a call and its results. The last message is always a
final assistant answer, except for ``n_messages == 1`` (only the opening prompt) and
``n_messages == 0`` (empty list). The length only decides where generation stops, so for one
seed a shorter session equals the start of a longer one except for its last few messages.

Text is assembled from small templates with one ``random.Random(seed)``, so the same seed
always gives the same session. To stay fast at 50,000 messages, the code of a fictional
repository is generated once per session and re-read (as agents do), and logs are cut from a
pool of prepared lines instead of being composed character by character.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import struct
import zlib
from typing import Any

__all__ = ["generate_session"]

_Msg = dict[str, Any]

_NOUNS = (
    "session", "context", "message", "budget", "token", "provider", "config", "cache",
    "request", "result", "event", "hook", "view", "history", "meter", "usage", "payload",
    "record", "stream", "buffer", "window", "policy", "entry", "batch", "schema", "worker",
)  # fmt: skip
_VERBS = (
    "load", "parse", "build", "render", "compute", "validate", "apply", "fetch", "emit",
    "merge", "split", "resolve", "collect", "update", "reset", "restore", "estimate", "format",
)  # fmt: skip
_TYPES = ("str", "int", "bool", "float", "dict[str, Any]", "list[str]", "Path", "bytes")
_BODY = (
    '    if {a} is None:\n        raise ValueError("{n} must not be None")',
    "    result: list[{t}] = []\n    for item in {a}:\n        if item.{n}_id in seen:\n"
    "            continue\n        seen.add(item.{n}_id)\n        result.append(item)",
    '    logger.debug("{v} %s (%d items)", {a}, len(self._{n}s))',
    "    try:\n        value = self._{n}s[{a}]\n    except KeyError:\n"
    "        value = self._{v}_default({a})",
    "    total = sum(len(x) for x in {a})\n    if total > self.max_{n}s:\n"
    "        return self._{v}_slow({a}, limit=total)",
    "    with self._lock:\n        self._{n}s.append({a})\n        self._dirty = True",
    "    data = json.loads({a}) if isinstance({a}, str) else dict({a})\n"
    '    data.setdefault("{n}", {{}})',
    "    # keep the order stable: callers diff consecutive {n} snapshots\n"
    "    items = sorted({a}, key=lambda x: (x.priority, x.{n}_id))",
)
_THOUGHTS = (
    "The {n} handling lives in {p}; I should check how {v}_{n} treats an empty input.",
    "The failing test expects the {n} to survive a {v}, so the bug is probably in the cache.",
    "I need to keep the public signature of {v}_{n} unchanged because other modules call it.",
    "Running the focused tests first is cheaper than the whole suite.",
    "The traceback points at {p}; the {n} list is mutated while it is being iterated.",
    "Before editing I want to see every caller of {v}_{n}, a grep will show them.",
)
_CHANGES = (
    "`{v}_{n}` copies the {n} list before iterating over it",
    "added a regression test for `{v}_{n}` with an empty input",
    "`max_{n}s` is validated like the other options",
    "removed the unused import flagged by ruff",
)
_TASKS = (
    "The {n} module drops entries when {v}_{n} is called twice in a row. Find the cause, fix "
    "it and add a regression test. Keep the public API unchanged.",
    "Add a `max_{n}s` option to the {n} config, validated like the other options, and document "
    "it in the README. Run the test suite when you are done.",
    "pytest fails on main since yesterday in tests/test_{n}.py. Please investigate and fix.",
    "Refactor {p} so that {v}_{n} becomes a pure function; it is hard to test as it is.",
)
_FOLLOW_UPS = (
    "Thanks. Can you also make {v}_{n} handle an empty list without raising?",
    "Looks good, but the type checker complains about {p} now. Please fix that too.",
    "Now run the whole test suite and ruff, and fix whatever comes up.",
    "Please also add a short note to the changelog about the {n} change.",
)
_HOOKS = (
    ("hooks-todo-reminder", "Your todo list:\n{todo}\nKeep it current as you work."),
    ("hooks-status-context", "Working directory: /home/dev/proj\nGit branch: fix/{n}-{v}\n"
     "Uncommitted changes: {k} files"),
    ("hooks-python-check", "Python check found {k} issue(s) in {p} after your last edit:\n"
     "{p}:{k}0:5: F401 `typing.Any` imported but unused"),
)  # fmt: skip
_PYTEST_HEADER = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0\n"
    "rootdir: /home/dev/proj\nconfigfile: pyproject.toml"
)
_TOOLS = ("read_file", "bash", "grep", "edit_file", "glob", "todo", "write_file")
_TOOL_WEIGHTS = (32, 24, 15, 13, 6, 5, 4)


class _Gen:
    """Stateful helper holding the seeded random source, the fictional repository and pools."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.ids: set[str] = set()
        self.paths = [f"src/proj/{n}.py" for n in _NOUNS] + [f"tests/test_{n}.py" for n in _NOUNS]
        self.files: dict[str, list[str]] = {}
        self.ran_suite = False
        self.code_pool = [self._code_block() for _ in range(120)]
        self.code_lines = [ln for b in self.code_pool for ln in b.splitlines() if ln.strip()]
        self.test_ids = [
            f"tests/test_{self._n()}.py::test_{self._v()}_{self._n()}_{i}" for i in range(600)
        ]

    # --- small random helpers -------------------------------------------------------------
    def _n(self) -> str:
        return self.rng.choice(_NOUNS)

    def _v(self) -> str:
        return self.rng.choice(_VERBS)

    def _fill(self, template: str) -> str:
        r = self.rng
        todo = self._todo() if "{todo}" in template else ""
        return template.format(
            n=self._n(), v=self._v(), p=r.choice(self.paths), k=r.randint(1, 9), todo=todo
        )

    def _call_id(self) -> str:
        while True:
            cid = f"call_{self.rng.getrandbits(96):024x}"
            if cid not in self.ids:
                self.ids.add(cid)
                return cid

    def _todo(self) -> str:
        marks, k = ("[x]", "[x]", "[ ]", "[~]"), self.rng.randint(2, 5)
        return "\n".join(f"- {self.rng.choice(marks)} Fix {self._n()} handling" for _ in range(k))

    # --- fictional repository -------------------------------------------------------------
    def _code_block(self) -> str:
        r = self.rng
        n, v, a, t = self._n(), self._v(), f"{self._n()}s", r.choice(_TYPES)
        body = "\n".join(r.choice(_BODY).format(n=n, v=v, a=a, t=t) for _ in range(r.randint(1, 4)))
        if r.random() < 0.3:
            return (
                f"@dataclass(frozen=True)\nclass {n.capitalize()}{v.capitalize()}er:\n"
                f'    """Holds the state needed to {v} a {n}."""\n\n'
                f"    {n}_id: str\n    priority: int = 0\n    items: {t} | None = None\n"
            )
        return (
            f"def {v}_{n}({a}: {t}, *, strict: bool = False) -> {r.choice(_TYPES)}:\n"
            f'    """{v.capitalize()} the {n} from ``{a}``."""\n{body}\n    return result\n'
        )

    def _file(self, path: str) -> list[str]:
        """Return the numbered lines of ``path``, creating it on first read (20-800 lines)."""
        lines = self.files.get(path)
        if lines is None:
            want = 20 + int(780 * self.rng.random() ** 2.5)
            text = [f'"""{path.rsplit("/", 1)[-1][:-3]} support for proj."""', ""]
            text += ["from __future__ import annotations", "", "import json", "import logging"]
            text += ["from dataclasses import dataclass", "from typing import Any", ""]
            text += ["logger = logging.getLogger(__name__)", ""]
            while len(text) < want:
                text += ["", *self.rng.choice(self.code_pool).splitlines()]
            lines = [f"{i:>6}\t{ln}" for i, ln in enumerate(text[:want], 1)]
            self.files[path] = lines
        return lines

    # --- tool calls and their results -----------------------------------------------------
    def _tool(self, tool: str) -> tuple[dict[str, Any], str | list[dict[str, Any]]]:
        """Pick arguments for one call of ``tool`` and build the output it would return."""
        r = self.rng
        path = r.choice(self.paths)
        if tool == "read_file":
            if r.random() < 0.04:
                return {"file_path": f"docs/img/{self._n()}.png"}, self._image()
            lines = self._file(path)
            if len(lines) > 200 and r.random() < 0.4:
                start = r.randrange(len(lines) - 100)
                args = {"file_path": path, "offset": start + 1, "limit": 100}
                return args, "\n".join(lines[start : start + 100])
            return {"file_path": path}, "\n".join(lines)
        if tool == "bash":
            return self._bash()
        if tool == "grep":
            pat = f"def {self._v()}_{self._n()}"
            hits = [
                f"{r.choice(self.paths)}:{r.randint(1, 700)}:{r.choice(self.code_lines)}"
                for _ in range(int(60 * r.random() ** 2))
            ]
            out = "\n".join(hits) or "No matches found"
            return {"pattern": pat, "path": "src", "output_mode": "content"}, out
        if tool == "glob":
            pat = r.choice(("**/*.py", "tests/**/test_*.py", "src/**/*.py"))
            hits = r.sample(self.paths, r.randint(1, 20))
            result = {"pattern": pat, "matches": hits, "count": len(hits)}
            return {"pattern": pat}, json.dumps(result)
        if tool == "todo":
            todos = [
                {"content": f"{self._v().capitalize()} {self._n()} handling", "status": s}
                for s in r.choices(("completed", "in_progress", "pending"), k=r.randint(2, 6))
            ]
            args = {"action": "update", "todos": todos}
            return args, json.dumps({"success": True, "todos": todos, "count": len(todos)})
        old = r.choice(self.code_lines)
        if tool == "edit_file":
            new = old.replace(self._n(), self._n()) + "  # keep insertion order"
            args = {"file_path": path, "old_string": old, "new_string": new}
            diff = f"@@ -{r.randint(1, 600)},3 +{r.randint(1, 600)},3 @@\n-{old}\n+{new}"
            return args, json.dumps({"success": True, "file_path": path, "diff": diff})
        body = r.choice(self.code_pool)
        result = {"success": True, "file_path": path, "bytes_written": len(body.encode())}
        return {"file_path": path, "content": body}, json.dumps(result)

    def _bash(self) -> tuple[dict[str, Any], str]:
        r = self.rng
        kind = r.random()
        if kind < 0.45:
            n_tests = int(10 + 900 * r.random() ** 3)
            # A verbose full-suite run (~150 KB, above the ingress cap) now and then, and always
            # as the first test run, so even a short example session shows the cap at work.
            if r.random() < 0.04 or not self.ran_suite:
                n_tests, self.ran_suite = r.randint(1700, 2000), True
            target = f" tests/test_{self._n()}.py" if n_tests < 1700 else ""
            cmd = f"uv run pytest -v{target}"
            return {"command": cmd, "timeout": 600}, self._test_log(n_tests)
        if kind < 0.65:
            errs = [
                f"{r.choice(self.paths)}:{r.randint(1, 700)}:{r.randint(1, 40)}: "
                f"{r.choice(('F401', 'E501', 'B006', 'UP007'))} {r.choice(self.code_lines).strip()}"
                for _ in range(int(40 * r.random() ** 2))
            ]
            summary = f"Found {len(errs)} errors." if errs else "All checks passed!"
            return {"command": "uv run ruff check ."}, "\n".join([*errs, summary])
        if kind < 0.85:
            changed = r.sample(self.paths, r.randint(0, 6))
            out = "On branch main\nChanges not staged for commit:\n" + "".join(
                f"\tmodified:   {p}\n" for p in changed
            )
            return {
                "command": "git status"
            }, out if changed else "nothing to commit, working tree clean"
        names = r.sample(self.paths, r.randint(3, 15))
        out = "\n".join(f"-rw-r--r-- 1 dev dev {r.randint(200, 40000):>6} May 9 {p}" for p in names)
        return {"command": "ls -la src/proj tests"}, out

    def _test_log(self, n_tests: int) -> str:
        r = self.rng
        start = r.randrange(len(self.test_ids))
        out = [_PYTEST_HEADER, f"collected {n_tests} items", ""]
        failed: list[str] = []
        ids, rand = self.test_ids, r.random  # hot loop: a ~150 KB log has ~1,800 lines
        for i in range(n_tests):
            tid = ids[(start + i) % len(ids)]
            x = rand()
            status = "PASSED" if x < 0.94 else "FAILED" if x < 0.97 else "SKIPPED"
            tid = f"{tid}[case{i}]"
            if status == "FAILED":
                failed.append(tid)
            out.append(f"{tid} {status:<7} [{100 * (i + 1) // n_tests:>3}%]")
        for tid in failed:
            out += ["", f"_____ {tid} _____", "", *r.sample(self.code_lines, 6)]
            out += [">       assert result == expected", "E       AssertionError: 3 != 4"]
        out.append(f"===== {len(failed)} failed, {n_tests - len(failed)} passed in "
                   f"{r.uniform(0.5, 90):.2f}s =====")  # fmt: skip
        return "\n".join(out)

    def _image(self) -> list[dict[str, Any]]:
        """A tiny but real PNG (an RGB gradient), built by hand so no imaging library is needed."""
        r = self.rng
        w, h = r.randint(16, 64), r.randint(16, 48)
        base = (r.randrange(256), r.randrange(256), r.randrange(256))
        raw = bytearray()
        for y in range(h):
            raw.append(0)  # filter type "none" for this scanline
            for x in range(w):
                raw += bytes(((base[0] + 4 * x) & 255, (base[1] + 5 * y) & 255, base[2]))

        def chunk(tag: bytes, data: bytes) -> bytes:
            crc = zlib.crc32(tag + data) & 0xFFFFFFFF
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

        png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        png += chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b"")
        data = base64.b64encode(png).decode()
        source = {"type": "base64", "media_type": "image/png", "data": data}
        return [
            {"type": "text", "text": f"Image file ({w}x{h}, {len(png)} bytes)"},
            {"type": "image", "source": source},
        ]

    # --- messages ---------------------------------------------------------------------------
    def _thinking(self) -> dict[str, Any]:
        r = self.rng
        text = " ".join(self._fill(r.choice(_THOUGHTS)) for _ in range(r.randint(1, 6)))
        sig = base64.b64encode(r.randbytes(r.randint(120, 300))).decode()
        return {"type": "thinking", "thinking": text, "signature": sig}

    def human(self, *, first: bool) -> _Msg:
        text = self._fill(self.rng.choice(_TASKS if first else _FOLLOW_UPS))
        return {"role": "user", "content": text}

    def hook_reminder(self) -> _Msg:
        source, template = self.rng.choice(_HOOKS)
        text = f'<system-reminder source="{source}">\n{self._fill(template)}\n</system-reminder>'
        meta = {"source": "hook", "ephemeral": True, "persisted": True}
        return {"role": "user", "content": text, "metadata": meta}

    def final_answer(self) -> _Msg:
        r = self.rng
        changed = r.sample(self.paths, r.randint(1, 5))
        text = f"Done: `{self._v()}_{self._n()}` now keeps every entry and the tests pass.\n\n"
        text += "Changes:\n" + "".join(
            f"- `{p}`: {self._fill(r.choice(_CHANGES))}\n" for p in changed
        )
        if r.random() < 0.5:
            return {"role": "assistant", "content": text}
        return {"role": "assistant", "content": [self._thinking(), {"type": "text", "text": text}]}

    def tool_round(self, n_calls: int) -> list[_Msg]:
        """One assistant turn with ``n_calls`` parallel calls, followed by their results."""
        r = self.rng
        calls: list[dict[str, Any]] = []
        results: list[_Msg] = []
        for tool in r.choices(_TOOLS, _TOOL_WEIGHTS, k=n_calls):
            cid = self._call_id()
            args, output = self._tool(tool)
            calls.append({"id": cid, "tool": tool, "arguments": args})
            results.append({"role": "tool", "tool_call_id": cid, "name": tool, "content": output})
        msg: _Msg = {"role": "assistant", "content": "", "tool_calls": calls}
        if r.random() < 0.75:
            blocks = [self._thinking()] if r.random() < 0.6 else []
            if r.random() < 0.7:
                blocks.append({"type": "text", "text": self._fill(r.choice(_THOUGHTS))})
            # The input is a copy: the orchestrators build it from the same provider data, but
            # the two must not alias, or an edit of one would silently change the other.
            for c in calls:
                args = copy.deepcopy(c["arguments"])
                blocks.append(
                    {"type": "tool_call", "id": c["id"], "name": c["tool"], "input": args}
                )
            msg["content"] = blocks
        return [msg, *results]


def generate_session(n_messages: int = 400, *, seed: int = 7) -> list[dict[str, Any]]:
    """Return a realistic agent session of exactly ``n_messages`` messages.

    The same ``seed`` always yields the same messages. The session opens with a human prompt,
    works through tool rounds (1-4 parallel calls, results right after their call) with the
    occasional hook reminder, closes each task with an assistant answer and sometimes continues
    with a human follow-up. See the module docstring for how the exact length is reached.
    """
    if n_messages < 0:
        raise ValueError(f"n_messages must be >= 0, got {n_messages}")
    g = _Gen(seed)
    r = g.rng
    out: list[_Msg] = [g.human(first=True)] if n_messages else []
    rounds_left = r.randint(5, 40)
    # Fill all slots but the last, which is reserved for the closing assistant answer.
    while 1 <= len(out) < n_messages - 1:
        room = n_messages - 1 - len(out)
        if room == 1:
            out.append(g.hook_reminder())
        elif rounds_left <= 0:
            out += [g.final_answer(), g.human(first=False)]
            rounds_left = r.randint(5, 40)
        elif r.random() < 0.07:
            out.append(g.hook_reminder())
        else:
            want = r.choices((1, 2, 3, 4), (55, 25, 12, 8))[0]
            out += g.tool_round(min(want, room - 1))
            rounds_left -= 1
    if n_messages > 1:
        out.append(g.final_answer())
    return out
