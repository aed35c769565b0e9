"""The command fits the terminal: help defaults, 80 columns, piped width, `| head`, --plot."""

from __future__ import annotations

import inspect
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner, Result

from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.replay.command import cli as cli_module
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.engine.config_options import config_option_specs
from amplifier_module_context_simple.replay.engine.engine import ReplayOutcome, replay
from amplifier_module_context_simple.replay.engine.report import ReplayReport
from amplifier_module_context_simple.replay.engine.view import describe_view
from amplifier_module_context_simple.replay.output.output import render_report, render_view
from amplifier_module_context_simple.replay.provider.simulation import Window
from amplifier_module_context_simple.replay.recordings.example_session import generate_session

runner = CliRunner()
SMALL = ["--messages", "160", "--context-window", "40000"]
WINDOW = Window(context_window=40_000, max_output_tokens=4_000)


def run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return runner.invoke(app, list(args), env=env)


def flat(text: str) -> str:
    """Panel borders out and every run of white space one space: wrapped text reads on."""
    return " ".join(text.replace("│", " ").split())


# --- help ----------------------------------------------------------------------------------


def _defaults_in_help() -> list[str]:
    """Every ``[...]`` the options' help texts end with, as the user should read it."""
    shown = [m for s in config_option_specs() for m in re.findall(r"\[[^\]]+\]", s.help)]
    return [*shown, "[16384]", "[7]", "[400]"]


@pytest.mark.parametrize("command", ["replay", "inspect"])
def test_help_at_80_columns_shows_every_default(command: str) -> None:
    result = run(command, "--help", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    text = flat(result.stdout)
    expected = _defaults_in_help()
    assert "[estimate]" in expected and "[from --model]" in expected and "[normal]" in expected
    for default in expected:
        assert default in text, default
    assert "estimate or actual [estimate]." in text


# --- 80 columns ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outcome() -> ReplayOutcome:
    import asyncio

    messages = generate_session(160, seed=5)
    return asyncio.run(replay(messages, config=ContextConfig(), window=WINDOW))


def _render(report: ReplayReport, width: int) -> str:
    out = io.StringIO()
    render_report(Console(file=out, width=width, highlight=False), report, show_requests=True)
    return out.getvalue()


def _whole_numbers(line: str) -> set[str]:
    return set(re.findall(r"\d[\d,]*%?", line))


def _assert_requests_whole(text: str, report: ReplayReport, width: int) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in text
    rows = {}
    for line in lines:
        first = line.split()[:1]
        if first and re.fullmatch(r"\d+\*?", first[0]):
            rows.setdefault(first[0].rstrip("*"), []).append(line)
    for r in report.requests:
        # The request's own row: the last table that lists it is the requests table.
        cells = _whole_numbers(rows[str(r.request)][-1])
        assert f"{r.view_tokens:,}" in cells and f"{r.utilisation:.0%}" in cells, r.request


def test_report_at_80_columns_cuts_no_number_or_header(outcome: ReplayOutcome) -> None:
    report = outcome.report
    assert report.compactions, "the replay compacts, so the compactions table is shown"
    text = _render(report, 80)
    _assert_requests_whole(text, report, 80)
    words = set(text.split())
    for header in ("request", "level", "view", "tok", "used", "ok", "removed", "before", "after"):
        assert header in words, header
    s = report.summary()
    numbers = _whole_numbers(text)
    for figure in (s["tokens_saved"], s["final_tokens_saved"], s["peak_view_tokens"]):
        assert f"{figure:,}" in numbers
    for c in report.compactions:
        assert f"{c.before_tokens:,} → {c.after_tokens:,}" in text
    assert "not shown at this width" in text, "the narrow table says which columns it left out"
    assert "not shown at this width" not in _render(report, 200).split("Requests")[-1]


@settings(max_examples=15, deadline=None)
@given(st.integers(56, 220))
def test_no_width_cuts_a_request_figure(outcome: ReplayOutcome, width: int) -> None:
    _assert_requests_whole(_render(outcome.report, width), outcome.report, width)


def test_inspect_at_80_columns_keeps_every_size_whole(outcome: ReplayOutcome) -> None:
    import asyncio

    compacted = next(c.request for c in outcome.report.compactions)
    messages = generate_session(160, seed=5)
    at = asyncio.run(replay(messages, config=ContextConfig(), window=WINDOW, stop_at=compacted + 1))
    assert at.view is not None
    rows, left_out = describe_view(at.view, at.history, family=None)
    out = io.StringIO()
    render_view(Console(file=out, width=80), at, rows, left_out, compacted + 1)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    body = [line.split() for line in text.splitlines()]
    by_index = {cells[0]: cells for cells in body if cells and cells[0].isdigit()}
    for row in rows:
        cells = by_index[str(row.index)]
        assert f"{row.tokens:,}" in cells and row.role in cells
    shortened = [row for row in rows if any("truncated" in m for m in row.markers)]
    for row in shortened:  # the markers column stays at 80: it says what the view did
        assert "truncated" in by_index[str(row.index)]


# --- piped output ------------------------------------------------------------------------------


def test_piped_output_follows_columns_else_80() -> None:
    wide = run("replay", *SMALL, "--requests", env={"COLUMNS": "132"})
    assert wide.exit_code == 0, wide.stderr
    widths = [len(line) for line in wide.stdout.splitlines()]
    assert 80 < max(widths) <= 132
    plain = run("replay", *SMALL, "--requests", env={"COLUMNS": None})
    assert plain.exit_code == 0, plain.stderr
    assert max(len(line) for line in plain.stdout.splitlines()) <= 80


@pytest.mark.parametrize("args", [["replay", "--requests"], ["replay", "--json"]])
def test_a_reader_that_stops_early_is_a_success(args: list[str]) -> None:
    # A real pipe, as in `context-simple replay | head -1`: read one line, close the pipe.
    child = subprocess.Popen(
        [sys.executable, "-m", "amplifier_module_context_simple", *args, *SMALL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    child.stdout.close()
    errors = child.stderr.read().decode()
    assert child.wait() == 0, errors
    assert first.strip()
    assert errors == ""


# --- --plot's path ------------------------------------------------------------------------------


def _refuse_to_replay(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    monkeypatch.setattr(cli_module, "prepare", lambda options: calls.append(options))
    return calls


@pytest.mark.parametrize(
    ("place", "needle"),
    [
        ("missing/chart.png", "does not exist"),
        ("a-file/chart.png", "is not a directory"),
        ("folder", "is a directory"),
    ],
)
def test_plot_path_is_checked_before_the_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, place: str, needle: str
) -> None:
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "folder.png").mkdir()
    target = tmp_path / ("folder.png" if place == "folder" else place)
    calls = _refuse_to_replay(monkeypatch)
    result = run("replay", "--plot", str(target))
    assert result.exit_code == 1
    error = result.stderr.strip()
    assert error.startswith("context-simple: error: --plot") and needle in error, error
    assert "\n" not in error and calls == [] and result.stdout == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_plot_into_a_read_only_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    calls = _refuse_to_replay(monkeypatch)
    result = run("replay", "--plot", str(folder / "chart.svg"))
    assert result.exit_code == 1 and "not writable" in result.stderr and calls == []


@pytest.mark.parametrize("command", [c.name for c in app.registered_commands])
def test_a_commands_help_paragraphs_are_single_lines(command: str | None) -> None:
    # The help keeps every line break of a docstring paragraph, so a paragraph wrapped in the
    # source breaks mid-sentence on screen (the commands panel shows the first one).
    callback = next(c.callback for c in app.registered_commands if c.name == command)
    assert callback is not None and callback.__doc__
    for paragraph in inspect.cleandoc(callback.__doc__).split("\n\n"):
        assert "\n" not in paragraph.strip(), f"{command}: {paragraph!r}"
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    first = inspect.cleandoc(callback.__doc__).split("\n\n")[0]
    assert " ".join(first.split()) in " ".join(result.stdout.split())
