"""The command's own error: a problem with the input or the options, shown as one line."""

from __future__ import annotations

__all__ = ["CliError", "one_line"]


class CliError(Exception):
    """A problem with the input or the options: shown as one line, exit status 1."""

    exit_code = 1

    def format_message(self) -> str:
        return str(self)


def one_line(text: str) -> str:
    """``text`` with every run of white space (line breaks included) as one space."""
    return " ".join(text.split())
