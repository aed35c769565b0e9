"""The compaction notice's text, line by line: what each figure and each verbosity adds.

The sessions in the other tests reach the notice through real escalations; here every line it
can hold is pinned once, since a model reads it word for word.
"""

from __future__ import annotations

import pytest

from amplifier_module_context_simple.views._notice import (
    NOTICE_SOURCE,
    NoticeFigures,
    notice_message,
)

HEAD = "Earlier messages were compacted"
CHECK = (
    "Work asked for earlier may already be done: check recent messages before repeating a "
    "step, and do not redo state-changing actions."
)
SMALL = (
    "The window is small: recent tool results were shortened or left out too. Read them "
    "again with narrower parameters; never re-run a tool that changes state."
)
MARKED = "Shortened results say so at their start."
REMOVED = (
    "Removed turns are not visible to you any more; if a decision made in them matters, ask "
    "the user or re-derive it from files rather than guessing."
)


def _body(message: dict[str, object]) -> list[str]:
    content = message["content"]
    assert isinstance(content, str)
    opening = f'<system-reminder source="{NOTICE_SOURCE}">'
    assert content.startswith(opening + "\n")
    assert content.endswith("\n</system-reminder>")
    return content[len(opening) + 1 : -len("\n</system-reminder>")].split("\n")


def test_the_notice_is_an_ephemeral_user_message_from_its_source() -> None:
    message = notice_message(NoticeFigures(10, 1, 0, 0, relaxed=False), "normal")
    assert message["role"] == "user"
    assert message["metadata"] == {"source": NOTICE_SOURCE, "ephemeral": True}


@pytest.mark.parametrize(
    ("removed", "truncated", "stubbed", "summary"),
    [
        (0, 0, 0, f"{HEAD}."),
        (4, 0, 0, f"{HEAD}: of the first 30, 4 are left out."),
        (0, 2, 0, f"{HEAD}: of the first 30, 2 tool results shortened."),
        (0, 0, 1, f"{HEAD}: of the first 30, 1 long message reduced to a stub."),
        (0, 0, 3, f"{HEAD}: of the first 30, 3 long messages reduced to a stub."),
        (1, 1, 0, f"{HEAD}: of the first 30, 1 is left out and 1 tool result shortened."),
        (4, 2, 0, f"{HEAD}: of the first 30, 4 are left out and 2 tool results shortened."),
        (
            4,
            2,
            1,
            f"{HEAD}: of the first 30, 4 are left out, 2 tool results shortened and "
            "1 long message reduced to a stub.",
        ),
    ],
)
def test_the_summary_states_only_what_was_done(
    removed: int, truncated: int, stubbed: int, summary: str
) -> None:
    figures = NoticeFigures(30, removed, truncated, stubbed, relaxed=False)
    assert _body(notice_message(figures, "normal")) == [summary, CHECK, MARKED]


@pytest.mark.parametrize(
    ("verbosity", "relaxed", "after_check"),
    [
        ("minimal", False, []),
        ("minimal", True, [SMALL]),
        ("normal", False, [MARKED]),
        ("normal", True, [SMALL, MARKED]),
        ("verbose", False, [MARKED, REMOVED]),
        ("verbose", True, [SMALL, MARKED, REMOVED]),
    ],
)
def test_each_verbosity_and_a_relaxed_protection_add_their_lines(
    verbosity: str, relaxed: bool, after_check: list[str]
) -> None:
    figures = NoticeFigures(30, 4, 0, 0, relaxed=relaxed, left_out_map=("map 1", "map 2"))
    summary = f"{HEAD}: of the first 30, 4 are left out."
    expected = [summary, CHECK, *after_check, "map 1", "map 2"]
    assert _body(notice_message(figures, verbosity)) == expected
