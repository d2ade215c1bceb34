"""python -m bench.growth: runs of the offloading benchmark at several N as one table, in N's
order, and one plot of the figures that grow with N."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.growth import table

REPO = Path(__file__).resolve().parents[2]


def _report(pods: int, rss: float, cpu_ms: float, restart: float) -> dict[str, Any]:
    return {"offloading": {"ratio": 0.8, "agent": {"pods": pods, "agent_cpu_ms_per_pod": cpu_ms,
                                                    "agent": {"rss_mib": rss}}},
            "restart": {"converged_seconds": restart},
            "idle": {"agent": {"rss_mib": rss - 10},
                     "kubesim_rss_mib": {"home": 400.0, "remote": 500.0}}}


def test_the_runs_make_one_table_in_the_order_of_n_and_a_plot(tmp_path: Path) -> None:
    files = []
    for pods, rss, cpu, restart in ((10_000, 200.0, 4.5, 12.0), (1_000, 110.0, 5.0, 3.0)):
        files.append(tmp_path / f"n{pods}.json")
        files[-1].write_text(json.dumps(_report(pods, rss, cpu, restart)))
    plot = tmp_path / "growth.svg"
    done = subprocess.run(
        [sys.executable, "-m", "bench.growth", *map(str, files), "--plot", str(plot)],
        capture_output=True, text=True, check=True, cwd=REPO)
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1")]
    assert rows == ["| 1,000 | 110 | 100 | 5 | 3 | 0.8 | 400 / 500 |",
                    "| 10,000 | 200 | 190 | 4.5 | 12 | 0.8 | 400 / 500 |"]
    drawn = plot.read_text()
    assert drawn.startswith("<?xml") and "agent CPU a pod" in drawn


def test_a_figure_a_run_lacks_is_a_dash_not_an_error() -> None:
    partial = _report(2_000, 120.0, 5.0, 4.0)
    del partial["restart"], partial["idle"]
    row = table([partial]).splitlines()[-1]
    assert row == "| 2,000 | 120 | — | 5 | — | 0.8 |  |"
