"""Running the ``context-simple`` command in-process, as the CLI tests do."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner, Result

from amplifier_module_context_simple.replay.command.cli import app

runner = CliRunner()


def run(*args: str, input: str | None = None) -> Result:
    """The command's result for ``args`` (``input``: what standard input holds)."""
    return runner.invoke(app, list(args), input=input)


def run_json(*args: str) -> dict[str, Any]:
    """The ``--json`` document of a run that must succeed."""
    result = run(*args, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)
