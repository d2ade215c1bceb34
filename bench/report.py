"""What a run prints: the machine it ran on, and each scenario's rows in one table."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from bench.figures import Rows
from bench.scenarios import SCENARIOS


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory = next((int(line.split()[1]) // 1024 // 1024 for line in
                   Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), 0)
    return {"nproc": os.cpu_count(), "cpu": cpu, "memory_gib": memory,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version()}


def table(results: dict[str, Any]) -> str:
    """The rows of every scenario that ran, in the scenarios' order, aligned."""
    rows: Rows = [row for name, scenario in SCENARIOS.items() if name in results
                  for row in scenario.rows(results[name])]
    width = max(len(name) for name, _ in rows) if rows else 0
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
