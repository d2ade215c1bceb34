"""python -m bench --agent-instructions: a process run under callgrind reports, when
asked, the instructions it has run so far, and more once it has done more work (the benchmark
asks at the agent's start of the phase and at convergence). Needs Debian's valgrind, which
.ci/run installs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.processes import callgrind_instructions, callgrind_wrapper

WORKER = """
import sys
for line in sys.stdin:
    sum(range(int(line)))
    print("done", flush=True)
"""

pytestmark = pytest.mark.skipif(shutil.which("callgrind_control") is None,
                                reason="valgrind is not installed")


def test_a_process_under_callgrind_reports_the_instructions_it_has_run(tmp_path: Path) -> None:
    process = subprocess.Popen([*callgrind_wrapper(tmp_path), sys.executable, "-c", WORKER],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               stderr=subprocess.DEVNULL)
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None and stdout is not None

    def work(items: int) -> int:
        stdin.write(f"{items}\n")
        stdin.flush()
        assert stdout.readline() == "done\n"
        # Asked while the process waits for its next line, as the agent waits for events.
        return callgrind_instructions(process.pid, tmp_path)

    try:
        started = work(1)
        worked = work(2_000_000)
    finally:
        stdin.close()
        process.wait(timeout=120)
    assert started > 1_000_000  # the interpreter's start, counted
    # A sum over two million integers: tens of instructions each, far fewer than a thousand.
    assert 20_000_000 < worked - started < 2_000_000_000
    assert len(list(tmp_path.glob(f"callgrind.{process.pid}.*"))) == 2  # one dump each time
