"""The default report is one screen, ``--full`` the whole of it, ``--help`` never cuts an
option's name, and the README quotes the built-in example's figures as the tool prints them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from amplifier_module_context_simple.replay.command.cli import app

runner = CliRunner()
README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
SCREEN = 40
"""A terminal's first screen, in lines."""


def _text(width: int, *args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(width)})
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_the_default_report_of_the_example_fits_one_screen_at_80_columns() -> None:
    lines = _text(80, "replay").splitlines()
    assert len(lines) <= SCREEN, "\n".join(lines)
    assert max(len(line) for line in lines) <= 80
    text = _flat("\n".join(lines))
    parts = ["What it cost", "What compaction saved", "What the agent lost", "Refused"]
    assert [text.index(p) for p in parts] == sorted(text.index(p) for p in parts)
    # The settings, the budget arithmetic, the tables and the notes wait for --full.
    for later in ("setting value from", "Budget ", "Trigger", "What each compaction dropped",
                  "Levels:"):  # fmt: skip
        assert later not in text, later
    assert "--full" in text


def test_full_prints_what_the_first_screen_leaves_out() -> None:
    text = _flat(_text(80, "replay", "--full"))
    for part in ("setting value from", "Budget ", "Trigger", "What each compaction dropped",
                 "Levels:"):  # fmt: skip
        assert part in text, part


def test_the_first_screen_and_the_full_report_give_the_same_figures() -> None:
    document = runner.invoke(app, ["replay", "--json"]).stdout
    summary = __import__("json").loads(document)["summary"]
    first, full = _flat(_text(120, "replay")), _flat(_text(200, "replay", "--full"))
    simulated = summary["simulated_cache"]
    for figure in (
        f"{simulated['priced_input_tokens']:,.0f} base-price tokens",
        f"{summary['tokens_saved']:,}",
        f"{summary['peak_request_tokens']:,}",
        f"{summary['max_utilisation']:.1%}",
    ):
        assert figure in first and figure in full, figure


LOGS = Path(__file__).resolve().parents[3] / "shared" / "logs"


@pytest.mark.parametrize("name", ["claudecode-compact.jsonl", "claudecode-crud.jsonl"])
def test_a_recorded_share_reads_the_same_in_the_summary_and_the_cache_section(name: str) -> None:
    # claudecode-compact's share is 86.35% less a hair: once rounded to four places and then
    # to one, the summary read 86.4% where the cache section read 86.3%.
    log = LOGS / name
    if not log.exists():
        pytest.skip("the shared logs are not beside the project")
    text = _flat(_text(200, "replay", "--full", str(log)))
    summary = re.search(r"Recorded input served from cache (\S+%)", text)
    section = re.search(r"served from cache \((\S+%)\)", text)
    assert summary is not None and section is not None
    assert summary.group(1) == section.group(1)


def _commands() -> list[list[str]]:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.main.TyperGroup)
    return [[], *([name] for name in group.commands)]


def _option_names(command: list[str]) -> list[str]:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.main.TyperGroup)
    target = group if not command else group.commands[command[0]]
    return [n for p in target.params for n in (*p.opts, *p.secondary_opts) if n.startswith("--")]


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "root")
def test_help_never_cuts_an_option_name(command: list[str], width: int) -> None:
    text = _text(width, *command, "--help")
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    words = set(re.findall(r"--[a-z][a-z-]*", text))
    names = _option_names(command)
    assert names
    for name in names:
        assert name in words, (name, width)


def test_the_readme_quotes_the_example_figures_the_tool_prints() -> None:
    quoted = re.search(
        r"The built-in example:\s+([\d,]+) and ([\d,]+) base-price tokens with the notice in "
        r"place; with\s+`--notice-placement tail` ([\d,]+) and ([\d,]+)\.",
        README,
    )
    assert quoted is not None, "the README quotes the example's priced input"
    printed: list[str] = []
    for extra in ([], ["--notice-placement", "tail"]):
        text = _flat(_text(200, "replay", *extra))
        found = re.search(
            r"Replayed input, priced ([\d,]+) base-price tokens.*?; ([\d,]+) if cached only", text
        )
        assert found is not None, text
        printed += [found.group(1), found.group(2)]
    assert list(quoted.groups()) == printed
