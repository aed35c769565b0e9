"""``context-simple sweep``: one row per setting, each the same as a single replay with it."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from amplifier_module_context_simple import ContextConfig
from amplifier_module_context_simple.replay.command import inputs as inputs_module
from amplifier_module_context_simple.replay.command.cli import app
from amplifier_module_context_simple.replay.engine.sweep import (
    MAX_ROWS,
    SHARE_OF_BUDGET,
    SHARE_OF_WINDOW,
    SweepRow,
    parse_values,
    settings,
    sweep,
)
from amplifier_module_context_simple.replay.output.findings_output import render_sweep
from amplifier_module_context_simple.replay.provider.simulation import Window
from amplifier_module_context_simple.replay.recordings.transcripts import LoadedTranscript

from ..conftest import CORPUS_DIR
from .test_drops import session

SESSION = CORPUS_DIR.parent / "sessions" / "opus-session-recall"
WINDOW = ["--context-window", "14000", "--max-output-tokens", "2000"]
runner = CliRunner()


@pytest.fixture
def transcript(tmp_path: Path) -> str:
    path = tmp_path / "transcript.jsonl"
    messages = session([600, 50, 900, 400, 1200, 80, 700, 300] * 2)
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return str(path)


def _json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_every_row_is_the_single_replay_with_that_setting(transcript: str) -> None:
    swept = ["--compact-threshold", "0.5,0.9", "--target-usage", "0.3,0.45"]
    document = _json("sweep", transcript, *WINDOW, *swept)
    rows = document["rows"]
    assert [r["setting"] for r in rows] == [
        {"compact_threshold": 0.5, "target_usage": 0.3},
        {"compact_threshold": 0.5, "target_usage": 0.45},
        {"compact_threshold": 0.9, "target_usage": 0.3},
        {"compact_threshold": 0.9, "target_usage": 0.45},
    ]
    for row in rows:
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in row["setting"].items()]
        single = _json("replay", transcript, *WINDOW, *flags)
        requests = single["requests"]
        assert row["compactions"] == single["summary"]["compactions"]
        assert row["prefix_breaks"] == sum(not r["prefix_stable"] for r in requests)
        peak = max(r["view_tokens"] + r["overhead_tokens"] for r in requests)
        assert row["peak_tokens"] == peak
        assert row["peak_share"] == round(peak / 14_000, 4)
        assert row["share_of"] == SHARE_OF_WINDOW
        assert row["refused_views"] == single["summary"]["refused_views"]
        assert row["budget"] == single["summary"]["budget"]
    assert len({(r["compactions"], r["prefix_breaks"]) for r in rows}) > 1, "settings differ"


def test_without_a_window_the_share_is_of_the_budget(transcript: str) -> None:
    (row,) = _json("sweep", transcript, "--max-tokens", "9000")["rows"]
    single = _json("replay", transcript, "--max-tokens", "9000")
    assert row["share_of"] == SHARE_OF_BUDGET and row["budget"] == 9_000
    assert row["peak_share"] == round(single["summary"]["peak_view_tokens"] / 9_000, 4)
    text = runner.invoke(app, ["sweep", transcript, "--max-tokens", "9000"]).stdout
    assert "peak of" in text and " budget " in text.splitlines()[3]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--compact-threshold", "0.5,abc"], "--compact-threshold: 'abc' is not a number"),
        (["--compact-threshold", "1.5"], "--compact-threshold"),
        (["--max-tokens", "1000,0"], "--max-tokens must be positive"),
        (["--max-tokens", "2.5"], "--max-tokens: '2.5' is not an integer"),
        ([], "give a list to sweep"),
        (
            ["--compact-threshold", ",".join(f"0.{i}" for i in range(1, 10)),
             "--target-usage", ",".join(f"0.0{i}" for i in range(1, 9))],
            f"the sweep would replay 72 settings (9 --compact-threshold x 8 --target-usage); "
            f"the most is {MAX_ROWS}",
        ),
    ],
)  # fmt: skip
def test_bad_lists_are_one_line_errors(transcript: str, args: list[str], needle: str) -> None:
    result = runner.invoke(app, ["sweep", transcript, *args])
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1


@given(
    st.lists(st.sampled_from([0.6, 0.7, 0.8, 0.9]), min_size=1, max_size=4),
    st.lists(st.sampled_from([0.2, 0.3, 0.4]), max_size=3),
    st.lists(st.integers(1_000, 5_000), max_size=5),
)
def test_settings_are_the_cross_product_in_order(
    thresholds: list[float], targets: list[float], caps: list[int]
) -> None:
    lists = {
        key: parse_values(key, ",".join(map(str, values)))
        for key, values in (("compact_threshold", thresholds), ("target_usage", targets),
                            ("max_tokens", caps)) if values
    }  # fmt: skip
    count = 1
    for values in lists.values():
        count *= len(values)
        assert len(values) == len(set(values))  # repeats replay once
    if count > MAX_ROWS:
        with pytest.raises(ValueError, match="the most is"):
            settings(lists)
        return
    rows = settings(lists)
    assert len(rows) == count == len({tuple(r.items()) for r in rows})
    assert rows[0] == {k: v[0] for k, v in lists.items()}
    assert rows[-1] == {k: v[-1] for k, v in lists.items()}


def test_the_sweep_table_fits_80_columns() -> None:
    rows = [
        SweepRow(
            setting={"compact_threshold": t, "target_usage": 0.45, "max_tokens": 1_000_000},
            requests=9,
            compactions=1_234,
            prefix_breaks=567,
            peak_tokens=79_312,
            peak_share=0.0793,
            share_of=SHARE_OF_WINDOW,
            budget=979_904,
            refused_views=12,
            invalid_views=0,
        )
        for t in (0.6, 0.8, 0.92)
    ]
    console = Console(width=80, record=True, highlight=False)
    render_sweep(console, rows)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    lines = text.splitlines()
    assert lines[2].split() == ["compact", "target", "max", "prefix", "peak", "of"]
    assert lines[3].split() == [
        "threshold", "usage", "tokens", "compactions", "breaks", "window", "refused",
    ]  # fmt: skip
    for cell in ("1,000,000", "1,234", "567", "7.9%", "0.92", "0.45", "12"):
        assert cell in text, cell


@pytest.mark.skipif(not SESSION.is_dir(), reason="the shared session is not here")
def test_sweep_on_the_recorded_session() -> None:
    window = ["--context-window", "1000000", "--max-output-tokens", "32000"]
    rows = _json("sweep", str(SESSION), *window, "--compact-threshold", "0.6,0.8,0.92")["rows"]
    assert [r["setting"]["compact_threshold"] for r in rows] == [0.6, 0.8, 0.92]
    assert all(r["requests"] == 9 and r["refused_views"] == 0 for r in rows)


def test_the_sweep_function_gives_the_rows_the_command_prints(transcript: str) -> None:
    messages = [json.loads(line) for line in Path(transcript).read_text().splitlines()]
    window = Window(context_window=14_000, max_output_tokens=2_000)
    rows = asyncio.run(
        sweep(
            messages, config=ContextConfig(), window=window,
            rows=settings({"compact_threshold": [0.5, 0.9]}),
        )
    )  # fmt: skip
    printed = _json("sweep", transcript, *WINDOW, "--compact-threshold", "0.5,0.9")["rows"]
    assert [asdict(r) for r in rows] == printed


def test_a_message_the_manager_rejects_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = LoadedTranscript([{"role": "user", "content": 42}], "openai-chat", [])
    monkeypatch.setattr(inputs_module, "load_transcript", lambda *a, **k: bad)
    result = runner.invoke(app, ["sweep", "whatever.jsonl", "--compact-threshold", "0.5,0.9"])
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "message 1 was rejected by the context manager" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_sweep_prices_each_setting_and_ranks_the_rows_by_cost() -> None:
    rows = _json("sweep", "--target-usage", "0.35,0.5", "--notice-reserve", "300,800")["rows"]
    assert [(r["setting"]["target_usage"], r["setting"]["compaction_notice_token_reserve"])
            for r in rows] == [(0.35, 300), (0.35, 800), (0.5, 300), (0.5, 800)]  # fmt: skip
    for r in rows:
        assert r["priced_input_tokens"] > 0
        assert r["priced_at_markers"] >= r["priced_input_tokens"] - 1
        assert 0 < r["kept_min"] <= r["kept_mean"] <= 1
    # A deeper target compacts further: it costs less and keeps less.
    deep = [r for r in rows if r["setting"]["target_usage"] == 0.35]
    shallow = [r for r in rows if r["setting"]["target_usage"] == 0.5]
    assert max(r["priced_input_tokens"] for r in deep) < min(
        r["priced_input_tokens"] for r in shallow
    )
    assert max(r["kept_mean"] for r in deep) < min(r["kept_mean"] for r in shallow)
    table = runner.invoke(app, ["sweep", "--target-usage", "0.5,0.35"], env={"COLUMNS": "120"})
    assert table.exit_code == 0, table.stderr
    lines = [ln for ln in table.stdout.splitlines() if ln.strip().startswith(("0.5 ", "0.35 "))]
    assert [line.split()[0] for line in lines] == ["0.35", "0.5"], "cheapest first"
