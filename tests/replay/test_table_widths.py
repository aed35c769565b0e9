"""Every table the command prints fits 60, 80 and 120 columns: no line wider than the terminal,
every figure the ``--json`` document holds for a shown cell printed whole, every header shown
whole or named in the table's footnote (and, on the fitting itself, the same for random tables).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from amplifier_module_context_simple import estimate_message_tokens
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.output.findings_output import DROP_ROWS
from amplifier_module_context_simple.replay.output.table_fit import (
    Cell,
    Column,
    Kind,
    Note,
    fit_table,
)

from .cli_runs import runner

WIDTHS = (60, 80, 120)
REAL = Path(__file__).resolve().parents[3] / "shared" / "sessions" / "opus-session-recall"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/sessions is not available")
SWEEP = ["--compact-threshold", "0.7,0.92", "--target-usage", "0.4", "--max-tokens", "60000,100000"]
SMALL_WINDOW = ["--context-window", "30000", "--max-output-tokens", "4000"]

# The tables each output prints, by the line their title starts, with every header their code
# declares (a line break in a header is where it breaks).
BARE_WINDOW = ["req", "msgs", "injected", "notice", "free", "output", "ours"]
"""A transcript without recorded usage: no provider figure to compare with."""
WINDOW = [*BARE_WINDOW, "provider", "gap", "gap %"]
# fmt: off
TABLES: dict[str, list[str]] = {
    r"Settings$": ["setting", "value", "from"],
    r"Summary$": [],
    r"What the window held": BARE_WINDOW,
    r"Request \d+: the [\d,]+-token window": ["category", "tokens", "share"],
    r"Request \d+: ephemeral injections": ["msg", "block", "after #", "tokens", "first line"],
    r"Request \d+: tool definitions, per tool": ["tool", "tokens", "share"],
    r"Request \d+: system prompt, per part": ["part", "tokens", "share"],
    r"Cache reuse": ["req", "read", "wrote", "occupancy", "cached", "covers", "differs at",
                     "hist", "cause"],
    r"Compactions$": ["#", "request", "level", "view tokens\nbefore → after",
                      "messages\nbefore → after", "removed", "truncated", "stubbed"],
    r"Requests$": ["request", "history\nmsgs", "history\ntok", "view\nmsgs", "view\ntok",
                   "request\ntok", "used", "level", "left\nout", "shortened", "stubs", "notice",
                   "ok"],
    r"What each compaction dropped": ["req", "pos", "change", "role", "call", "tokens", "level",
                                      "first line"],
    r"Refused views": ["request", "why"],
    r"Request \d+ \(before history message": ["#", "hist", "tokens", "chars", "role", "markers",
                                              "tool call ids", "content"],
    r"What this view left out": ["pos", "role", "call", "tokens", "left at", "level",
                                 "first line"],
    r"Sweep:": ["compact\nthreshold", "target\nusage", "max\ntokens", "priced\ninput",
                "at the\nmarkers", "kept\nmean", "kept\nmin", "compactions", "prefix\nbreaks",
                "peak of\nwindow", "refused", "budget"],
}
# fmt: on
DROPPED = r"What each compaction dropped"
FOOTNOTE = re.compile(r"not shown at this width: (.*?) \(see --json, or a wider COLUMNS\)")


def invoke(width: int, *args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(width)})
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout


def as_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.stderr
    return json.loads(result.stdout)


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def sections(text: str) -> dict[str, str]:
    """Per table title (the pattern above): the text from its title to the next table's."""
    lines = text.splitlines()
    starts: list[tuple[int, str]] = []
    for n, line in enumerate(lines):
        for pattern in TABLES:
            if re.match(pattern, line.strip()):
                starts.append((n, pattern))
                break
    found: dict[str, str] = {}
    for k, (n, pattern) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        found.setdefault(pattern, "\n".join(lines[n:end]))
    return found


def whole(figure: str, text: str) -> bool:
    """``figure`` printed whole: no digit, separator or decimal part glued to either side."""
    return re.search(rf"(?<![\d,.]){re.escape(figure)}(?![\d,]|\.\d)", text) is not None


def footnoted(section: str) -> list[str]:
    return [n for m in FOOTNOTE.findall(flat(section)) for n in m.split(", ")]


def assert_fits(text: str, width: int) -> None:
    wide = [line for line in text.splitlines() if len(line) > width]
    assert not wide, wide


def assert_headers(text: str, expected: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Every header of every table printed is shown whole or named in its footnote."""
    found = sections(text)
    for pattern, section in found.items():
        named = footnoted(section)
        for header in (expected or TABLES)[pattern]:
            if " ".join(header.split()) in named:
                continue
            for line in header.split("\n"):
                assert re.search(rf"(?<!\S){re.escape(line)}(?!\S)", section), (pattern, header)
    return found


def assert_whole(section: str, figures: Iterable[int | str], what: str) -> None:
    for figure in figures:
        shown = f"{figure:,}" if isinstance(figure, int) else figure
        assert whole(shown, section), (what, shown)


# --- the outputs, once per width ----------------------------------------------------------------


@pytest.fixture(scope="module")
def example_json() -> dict[str, Any]:
    return as_json("replay")


@pytest.fixture(scope="module")
def example() -> dict[int, str]:
    return {w: invoke(w, "replay", "--full", "--requests") for w in WIDTHS}


@pytest.mark.parametrize("width", WIDTHS)
def test_the_example_replay_fits(
    example: dict[int, str], example_json: dict[str, Any], width: int
) -> None:
    text = example[width]
    assert_fits(text, width)
    found = assert_headers(text)
    assert {r"Compactions$", r"Requests$", r"What each compaction dropped"} <= set(found)
    windows = example_json["window_by_category"]
    table = found[r"What the window held"]
    assert_whole(table, [w["used"] for w in windows], "ours")
    assert_whole(table, [w["categories"]["conversation messages"] for w in windows], "msgs")
    categories = found[r"Request \d+: the [\d,]+-token window"]
    assert_whole(categories, windows[-1]["categories"].values(), "category")
    compactions = found[r"Compactions$"]
    for c in example_json["compactions"]:
        assert_whole(compactions, [c["before_tokens"], c["after_tokens"]], "compaction")
    requests = found[r"Requests$"]
    assert_whole(requests, [r["view_tokens"] for r in example_json["requests"]], "view tok")
    assert_whole(requests, [f"{r['utilisation']:.0%}" for r in example_json["requests"]], "used")
    drops = found[DROPPED]
    by_request: dict[int, list[dict[str, Any]]] = {}
    for d in example_json["drops"]:
        by_request.setdefault(d["request"], []).append(d)
    for listed in by_request.values():
        for d in sorted(listed, key=lambda d: (-d["tokens_before"], d["position"]))[:DROP_ROWS]:
            assert_whole(drops, [d["tokens_before"], d["tokens_after"], d["position"]], "drop")
    summary = found[r"Summary$"]
    s = example_json["summary"]
    assert_whole(summary, [s["peak_request_tokens"], s["tokens_saved"], s["history_tokens"]], "s")


def test_narrow_tables_name_what_they_leave_out(example: dict[int, str]) -> None:
    narrow, wide = sections(example[60]), sections(example[120])
    assert "notice" in footnoted(narrow[r"What the window held"])
    header = next(line for line in narrow[r"What the window held"].splitlines() if " req " in line)
    assert "provider" not in header, "no provider figure recorded, no column for it"
    assert "stubs" in footnoted(narrow[r"Requests$"])
    assert {"change", "level"} <= set(footnoted(narrow[DROPPED]))
    assert footnoted(wide[r"What the window held"]) == []
    # A first line too long for its column ends in an ellipsis (not cut short unmarked).
    cut = re.compile(r"\S…\s*$")
    assert any(cut.search(line) for line in sections(example[80])[DROPPED].splitlines())
    assert footnoted(wide[DROPPED]) == []


def test_a_long_remark_wraps_instead_of_being_cut(example: dict[int, str]) -> None:
    for width in WIDTHS:
        drops = flat(sections(example[width])[DROPPED])
        assert re.search(r"… \d+ more \(\d+ left out, \d+ shortened\)", drops), width


def test_the_summary_labels_never_wrap(example: dict[int, str]) -> None:
    for width in WIDTHS:
        summary = sections(example[width])[r"Summary$"]
        for label in ("Budget used (whole request), max / mean", "Tokens not sent, last request"):
            assert any(label in line for line in summary.splitlines()), (width, label)


@needs_real
@pytest.mark.parametrize("width", WIDTHS)
def test_the_recorded_session_fits(width: int) -> None:
    text = invoke(width, "replay", "--full", str(REAL), "--requests")
    document = as_json("replay", str(REAL))
    assert_fits(text, width)
    expected = {**TABLES, r"What the window held": ["system", "tools", *WINDOW]}
    found = assert_headers(text, expected)
    table = found[r"What the window held"]
    windows = document["window_by_category"]
    assert_whole(table, [w["provider"] for w in windows], "provider")
    assert_whole(table, [w["used"] for w in windows], "ours")
    assert_whole(table, [w["categories"]["system prompt"] for w in windows], "system")
    categories = found[r"Request \d+: the [\d,]+-token window"]
    assert_whole(categories, windows[-1]["categories"].values(), "category")
    cache = found[r"Cache reuse"]
    for r in document["cache"]["requests"]:
        assert_whole(cache, [r["cache_read_tokens"] or 0, r["cache_write_tokens"] or 0], "cache")
    injections = found[r"Request \d+: ephemeral injections"]
    assert_whole(injections, [i["tokens"] for i in windows[-1]["injections"]], "injection")
    settings_table = found[r"Settings$"]
    assert_whole(settings_table, ["1,000,000", "300,000", "128,000"], "settings")
    if width == 60:
        assert "provider" in table and "gap %" in footnoted(table)


@needs_real
@pytest.mark.parametrize("width", WIDTHS)
def test_check_prints_the_refused_views_whole(width: int) -> None:
    text = invoke(width, "replay", "--full", str(REAL), *SMALL_WINDOW, "--check", code=4)
    document = as_json("replay", str(REAL), *SMALL_WINDOW, "--check", code=4)
    assert_fits(text, width)
    refused = assert_headers(text)[r"Refused views"]
    for verdict in document["refusals"]["refused"]:
        for figure in re.findall(r"\d[\d,]*", "; ".join(verdict["reasons"])):
            assert whole(figure, refused), (verdict["request"], figure)


@pytest.mark.parametrize("width", WIDTHS)
def test_check_on_the_example_fits(width: int) -> None:
    text = invoke(width, "replay", "--full", "--check")
    assert_fits(text, width)
    assert_headers(text)


@pytest.fixture(scope="module")
def compacted(example_json: dict[str, Any]) -> int:
    # The request after the first compaction that left messages out: both tables printed.
    return next(c["request"] for c in example_json["compactions"] if c["removed"]) + 1


@pytest.mark.parametrize("width", WIDTHS)
def test_inspect_of_a_compacted_request_fits(width: int, compacted: int) -> None:
    text = invoke(width, "inspect", "--at", str(compacted))
    view = json.loads(invoke(width, "inspect", "--at", str(compacted), "--json"))["view"]
    assert_fits(text, width)
    found = assert_headers(text)
    table = found[r"Request \d+ \(before history message"]
    assert_whole(table, [estimate_message_tokens(m) for m in view], "view tokens")
    assert r"What this view left out" in found


@pytest.mark.parametrize("width", WIDTHS)
def test_sweep_fits(width: int) -> None:
    text = invoke(width, "sweep", *SWEEP)
    rows = as_json("sweep", *SWEEP)["rows"]
    assert_fits(text, width)
    table = assert_headers(text)[r"Sweep:"]
    for r in rows:
        figures = [r["compactions"], r["prefix_breaks"], r["refused_views"]]
        assert_whole(table, [*figures, f"{r['peak_share']:.1%}", r["setting"]["max_tokens"]], "s")


# --- the fitting itself -------------------------------------------------------------------------

HEADER_WORDS = st.text(alphabet="abcdefghij", min_size=1, max_size=9)
KINDS: Sequence[Kind] = ("figure", "word", "text", "preview")


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Column], list[list[Cell]], int]:
    count = draw(st.integers(1, 9))
    columns: list[Column] = []
    for n in range(count):
        words = draw(st.lists(HEADER_WORDS, min_size=1, max_size=3))
        header = f"h{n}" + draw(st.sampled_from([" ", "\n"])).join(["", *words]).rstrip()
        kind = draw(st.sampled_from(KINDS))
        drop = draw(st.integers(0, 5))
        floor = draw(st.none() | st.integers(1, 30))
        ceiling = draw(st.none() | st.integers(1, 40))
        columns.append(Column(header, kind=kind, drop=drop, floor=floor, ceiling=ceiling))
    rows: list[list[Cell]] = []
    for _ in range(draw(st.integers(1, 6))):  # the command prints no table without a row
        row: list[Cell] = []
        for c in columns:
            if c.kind == "figure":
                row.append(f"{draw(st.integers(-(10**12), 10**12)):,}")
            else:
                words = draw(st.lists(st.text(alphabet="xyz…-,.0", min_size=1, max_size=14),
                                      max_size=8))  # fmt: skip
                row.append(" ".join(words))
        rows.append(row)
    if draw(st.booleans()):  # a remark row, as "… 12 more" under a table
        remark = draw(st.lists(st.text(alphabet="xyz…(),0", min_size=1, max_size=12), max_size=6))
        rows.append([*([""] * (count - 1)), Note(" ".join(remark))])
    return columns, rows, draw(st.integers(40, 200))


@settings(max_examples=150, deadline=None)
@given(tables())
def test_a_fitted_table_fits_keeps_figures_whole_and_names_what_it_leaves_out(
    table: tuple[list[Column], list[list[Cell]], int],
) -> None:
    columns, rows, width = table
    out = io.StringIO()
    console = Console(file=out, width=width, highlight=False)
    ends = {n for n in range(len(rows)) if n % 2}
    console.print(fit_table(columns, rows, title="T", caption="a caption", section_ends=ends))
    text = out.getvalue()
    assert_fits(text, width)
    named = footnoted(text)
    strings = [[cell if isinstance(cell, str) else "" for cell in r] for r in rows]
    for n, c in enumerate(columns):
        name = " ".join(c.header.split())
        if name in named or not any(r[n].strip() for r in strings):
            continue  # left out, or nothing to show (the list form skips blank cells)
        tokens = text.split()
        for word in c.header.split():  # shown: a header breaks between its words, if at all
            assert word in tokens, (c.header, text)
        if c.kind == "figure":
            for cell in (r[n] for r in strings if r[n]):
                assert re.search(rf"(?<![\d,-]){re.escape(cell)}(?![\d,])", text), (cell, text)
    assert all(any(" ".join(c.header.split()) == n for c in columns) for n in named)
    required = [c for c in columns if not c.drop]
    assert all(" ".join(c.header.split()) not in named for c in required)
