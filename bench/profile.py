"""Where a running component spends its time: py-spy (on PyPI) sampling the process from outside,
its stacks written as collapsed lines (`--format raw`: `frame;frame;... samples`, loadable in
speedscope or flamegraph.pl), and the functions that took the most samples.

    profiler = Profiler(pid, Path("agent.pyspy.txt"))   # sampling from now on
    ...
    summary = profiler.stop()                            # {"samples", "own", "total"}

Samples are taken without pausing the process (`--nonblocking`) and only of threads that can
run (idle threads are left out). A share of the samples is a share of the time the process ran
or could have, not of its CPU time: a thread waiting for a CPU, or in a loopback write doing the
receiving side's TCP work, is sampled where it stands (docs/benchmarks.md, "The agent's CPU,
measured as CPU", measures with perf instead). Frames are aggregated by function
(`--function`), named `function (module path)`.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

RATE = 100
"""Samples a second."""


class Profiler:
    """py-spy recording one process until `stop()` (or until the process exits)."""

    def __init__(self, pid: int, output: Path) -> None:
        executable = shutil.which("py-spy")
        if executable is None:
            raise SystemExit('error: --profile needs py-spy: pip install -e ".[bench]"')
        self.output = output
        self.log = output.with_suffix(".log")
        with self.log.open("wb") as log:
            self.popen = subprocess.Popen(
                [executable, "record", "--pid", str(pid), "--rate", str(RATE), "--nonblocking",
                 "--function", "--format", "raw", "--output", str(output)],
                stdout=log, stderr=subprocess.STDOUT)

    def stop(self, top: int = 15) -> dict[str, Any]:
        """Stop sampling (py-spy writes its file on SIGINT, as on Ctrl-C) and summarise it."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
        try:
            self.popen.wait(60)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if not self.output.exists():
            return {"error": f"py-spy wrote no profile: see {self.log}"}
        return {"file": str(self.output), **summary(self.output, top)}


PROJECT = ("annex/", "home_agent/", "remote_enforcer/", "shared/", "kubesim/")
"""The packages whose functions the total samples are listed for (libraries and the event loop
are on almost every stack)."""


def summary(raw: Path, top: int = 15) -> dict[str, Any]:
    """From collapsed stacks: the samples, the `top` functions by own samples (the frame
    running) and the project's `top` functions by total samples (on the stack), each as a
    percentage of all samples."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        samples += n
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n

    def shares(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(frame, round(100 * n / samples, 1)) for frame, n in counter.most_common(top)]
    ours = Counter({frame: n for frame, n in total.items()
                    if any(f"({package}" in frame for package in PROJECT)})
    return {"samples": samples, "own": shares(own) if samples else [],
            "total": shares(ours) if samples else []}
