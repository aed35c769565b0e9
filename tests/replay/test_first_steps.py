"""A newcomer's first steps with ``context-simple``: the version, a session id that is not
there, and the one default output figure the help shows."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from amplifier_module_context_simple.replay.command import cli

from .cli_runs import run
from .test_session_dir import make_session


def test_version_is_the_installed_packages() -> None:
    result = run("--version")
    assert result.exit_code == 0, result.stderr
    expected = metadata.version("amplifier-module-context-simple")
    assert result.stdout.strip() == f"context-simple {expected} (amplifier-module-context-simple)"


def test_version_without_package_metadata_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(cli.metadata, "version", missing)
    result = run("--version")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip().startswith("context-simple unknown (not installed as a package)")


def test_an_unknown_session_id_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    make_session(tmp_path / ".amplifier" / "projects" / "p" / "sessions" / "other-id")
    monkeypatch.chdir(tmp_path)
    result = run("replay", "c37652eb")
    assert result.exit_code == 1
    error = result.stderr.strip()
    assert error == (
        "context-simple: error: no such file or directory: c37652eb, and no session id starts "
        f"with it under {tmp_path}/.amplifier/projects/*/sessions/ (1 session(s) there) or "
        f"{tmp_path}/.claude/projects/*/ (0 log(s) there)"
    )
    # A path is not an id: the plain error.
    result = run("replay", "./c37652eb")
    assert result.stderr.strip() == "context-simple: error: no such file or directory: c37652eb"


def test_the_help_shows_the_output_default_the_example_and_a_bare_window_use() -> None:
    help_text = " ".join(run("replay", "--help").stdout.replace("│", " ").split())
    assert "recorded one [16384]." in help_text
    example = json.loads(run("replay", "--messages", "20", "--json").stdout)
    assert example["window"]["max_output_tokens"] == 16_384
    bare = json.loads(
        run("replay", "--messages", "20", "--context-window", "64000", "--json").stdout
    )
    assert bare["window"]["max_output_tokens"] == 16_384
    settings = {s["name"]: s for s in bare["source"]["settings"]}
    assert (settings["max_output_tokens"]["value"], settings["max_output_tokens"]["source"]) == (
        16_384,
        "default",
    )
