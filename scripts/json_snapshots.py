"""Write the replay's ``--json`` output of every shared input into one folder, for a byte check.

    uv run python scripts/json_snapshots.py OUTDIR

Run it before a change and after it, into two folders, and compare them with ``diff -r``: a
refactoring that should not change behaviour leaves no difference.

The inputs are the built-in example (no argument), the recorded Amplifier session
``../shared/sessions/opus-session-recall``, every file of ``../shared/corpus`` but its
documentation, scorer and reference counts, and every entry of ``../shared/logs`` but its
README (``../shared`` is found beside the checkout, as the tests find it). Each input gets
``NAME.json`` (standard output) and ``NAME.status`` (the exit code, then standard error), so an
input the command refuses (the corpus's ``*.meta.json``) is still covered: its message and exit
code must not change either.

Inputs are given relative to the checkout and the command runs there, so two checkouts side by
side under the same parent print the same paths. Two inputs run at a time (the machine this was
written on has two cores); the whole set takes well under a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
SHARED = CHECKOUT.parent / "shared"

# What ../shared/corpus holds beside its transcripts that no replay is meant to read.
CORPUS_SKIPPED = frozenset({"README.md", "SOURCES.md", "score.py", "reference_counts.json"})
LOGS_SKIPPED = frozenset({"README.md"})


def inputs() -> list[tuple[str, str | None]]:
    """Every input as (snapshot name, argument relative to the checkout; None: the example)."""
    chosen: list[tuple[str, str | None]] = [("example", None)]
    session = SHARED / "sessions" / "opus-session-recall"
    chosen.append(("sessions--opus-session-recall", os.path.relpath(session, CHECKOUT)))
    for folder, skipped in (("corpus", CORPUS_SKIPPED), ("logs", LOGS_SKIPPED)):
        for entry in sorted((SHARED / folder).iterdir()):
            if entry.name not in skipped:
                chosen.append((f"{folder}--{entry.name}", os.path.relpath(entry, CHECKOUT)))
    return chosen


def snapshot(name: str, argument: str | None, outdir: Path) -> None:
    """Replay one input and write its output and status under ``outdir``."""
    command = [sys.executable, "-m", "amplifier_module_context_simple", "replay"]
    if argument is not None:
        command.append(argument)
    command.append("--json")
    done = subprocess.run(command, cwd=CHECKOUT, capture_output=True, check=False)
    (outdir / f"{name}.json").write_bytes(done.stdout)
    (outdir / f"{name}.status").write_bytes(f"exit {done.returncode}\n".encode() + done.stderr)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if not SHARED.is_dir():
        print(f"json_snapshots: {SHARED} is not there", file=sys.stderr)
        return 1
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    chosen = inputs()
    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(snapshot, name, arg, outdir) for name, arg in chosen]:
            future.result()
    print(f"{len(chosen)} inputs written to {outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
