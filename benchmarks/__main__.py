"""``python -m benchmarks``: measure every size in its own process and print the tables.

Options::

    --sizes 1000,10000,50000   history sizes (default); one child process per size
    --quick                    smoke run: small sizes (300,1000) and few repeats
    --json                     print the raw results as JSON instead of tables
    --plain                    plain-text tables even when Rich is installed
    --save PATH                also write the raw results as JSON to PATH
    --load PATH                print the tables of results saved with --save (no measuring)
    --profile NAME             cProfile one workload (admit, first_request, resume,
                               resume_escalating, resume_compacted, turn, escalation,
                               sticky, reread, estimator)
                               at each of --sizes, in this process
    --replay-only              only the replay benchmark
    --replay-mb 20,200         the replay benchmark: `context-simple replay` on a generated
                               transcript of each size in MB (default 20; --quick: 2; 0: none)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._profile import WORKLOADS

DEFAULT_SIZES = (1_000, 10_000, 50_000)
QUICK_SIZES = (300, 1_000)
ROOT = Path(__file__).resolve().parent.parent


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sizes: {exc}") from exc
    if not sizes or sizes[0] < 10:
        raise argparse.ArgumentTypeError("--sizes: give sizes of at least 10 messages")
    return sizes


def _megabytes(text: str) -> list[float]:
    try:
        sizes = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--replay-mb: {exc}") from exc
    return [size for size in sizes if size > 0]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
    }


def _run_child(size: int, quick: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks", "--worker", str(size)]
    if quick:
        command.append("--quick")
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"benchmark worker for {size} messages failed ({done.returncode})")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--sizes", type=_sizes, default=None, help="comma-separated sizes")
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, few runs")
    parser.add_argument("--json", action="store_true", help="print raw results as JSON")
    parser.add_argument("--plain", action="store_true", help="plain tables, no Rich")
    parser.add_argument("--save", type=Path, metavar="PATH", help="also write results as JSON")
    parser.add_argument("--load", type=Path, metavar="PATH", help="print saved results")
    parser.add_argument(
        "--profile",
        choices=WORKLOADS,
        help="cProfile one workload at each size (in this process) instead of measuring",
    )
    parser.add_argument(
        "--replay-mb", type=_megabytes, default=None, metavar="MB",
        help="replay benchmark transcript sizes in MB (default 20; --quick: 2; 0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--replay-only", action="store_true", help="only the replay benchmark (no --sizes)"
    )
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker is not None:
        from ._measure import measure_size

        result = asyncio.run(measure_size(args.worker, quick=args.quick))
        json.dump(result, sys.stdout)
        return 0

    if args.load is not None:
        from ._report import render

        render(json.loads(args.load.read_text()), plain=args.plain)
        return 0

    sizes: list[int] = args.sizes or list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    if args.replay_only:
        sizes = []
    if args.profile:
        from ._profile import profile

        for size in sizes:
            print(asyncio.run(profile(args.profile, size)))
        return 0

    start = time.perf_counter()
    results = []
    for size in sizes:
        if not args.json:
            print(f"measuring {size} messages ...", file=sys.stderr, flush=True)
        results.append(_run_child(size, args.quick))
    replays = []
    for megabytes in args.replay_mb if args.replay_mb is not None else [2 if args.quick else 20]:
        if not args.json:
            print(f"replaying a {megabytes:g} MB transcript ...", file=sys.stderr, flush=True)
        from ._replay import measure_replay

        replays.append(measure_replay(megabytes))
    payload = {
        "machine": machine(),
        "sizes": sizes,
        "quick": args.quick,
        "results": results,
        "replay": replays,
        "total_seconds": time.perf_counter() - start,
    }
    if args.save is not None:
        args.save.write_text(json.dumps(payload, indent=2) + "\n")
    if args.json:
        json.dump(payload, sys.stdout, indent=2)
        print()
    else:
        from ._report import render

        render(payload, plain=args.plain)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
