"""How the agent's figures grow with N: the results of `python -m bench` runs at several sizes
(their `--json` files) as one table and one plot.

    python -m bench --pods 1000 --json n1000.json
    python -m bench --pods 10000 --json n10000.json
    python -m bench --pods 50000 --json n50000.json
    python -m bench.growth n1000.json n10000.json n50000.json --plot docs/growth.svg

It prints a Markdown table (for docs/benchmarks.md) and, with `--plot`, draws agent RSS, CPU per
pod and restart convergence against N with matplotlib (`pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Figure = Callable[[dict[str, Any]], float | None]


def _at(*path: str) -> Figure:
    def read(report: dict[str, Any]) -> float | None:
        found: Any = report
        for step in path:
            if not isinstance(found, dict) or step not in found:
                return None
            found = found[step]
        return float(found) if isinstance(found, (int, float)) else None
    return read


COLUMNS: list[tuple[str, str, Figure]] = [
    ("agent RSS after offloading", "MiB", _at("offloading", "agent", "agent", "rss_mib")),
    ("agent RSS idle", "MiB", _at("idle", "agent", "rss_mib")),
    ("agent CPU a pod", "ms", _at("offloading", "agent", "agent_cpu_ms_per_pod")),
    ("restart convergence", "s", _at("restart", "converged_seconds")),
    ("offloading ratio", "", _at("offloading", "ratio")),
    ("kubesim RSS, home / remote", "MiB", lambda _: None),  # filled from the servers below
]
PLOTTED = ("agent RSS after offloading", "agent CPU a pod", "restart convergence")


def size_of(report: dict[str, Any]) -> int:
    pods = _at("offloading", "agent", "pods")(report)
    if pods is None:
        raise SystemExit("error: a report without the offloading scenario has no N")
    return int(pods)


def _kubesim_rss(report: dict[str, Any]) -> str:
    servers = (report.get("idle") or {}).get("kubesim_rss_mib") or {}
    return " / ".join(f"{servers[side]:.0f}" for side in ("home", "remote") if side in servers)


def table(reports: list[dict[str, Any]]) -> str:
    header = ["N", *(f"{name} ({unit})" if unit else name for name, unit, _ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for report in sorted(reports, key=size_of):
        cells = [f"{size_of(report):,}"]
        for name, _, read in COLUMNS:
            value = read(report)
            cells.append(_kubesim_rss(report) if name.startswith("kubesim")
                         else "—" if value is None else f"{value:g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(reports: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")  # no display: a file
    import matplotlib.pyplot as plt

    ordered = sorted(reports, key=size_of)
    sizes = [size_of(report) for report in ordered]
    figure, axes = plt.subplots(1, len(PLOTTED), figsize=(4 * len(PLOTTED), 3.2))
    for ax, name in zip(axes, PLOTTED, strict=True):
        _, unit, read = next(column for column in COLUMNS if column[0] == name)
        points = [(n, value) for n, report in zip(sizes, ordered, strict=True)
                  if (value := read(report)) is not None]
        ax.plot([n for n, _ in points], [v for _, v in points], marker="o")
        ax.set_xscale("log")
        ax.set_xlabel("offloaded pods (N)")
        ax.set_title(f"{name} ({unit})", fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, metadata={"Date": None})  # no timestamp: the same runs, the same file
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.growth",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="python -m bench --json files")
    parser.add_argument("--plot", type=Path, help="write the plot there (SVG, PNG: by suffix)")
    args = parser.parse_args()
    reports = [json.loads(path.read_text()) for path in args.reports]
    print(table(reports))
    if args.plot is not None:
        plot(reports, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
