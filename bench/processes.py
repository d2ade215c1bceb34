"""Processes from outside: a free port for one, its CPU seconds and memory from /proc, and the
instructions it ran under valgrind's callgrind (`--agent-instructions`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_status(pid: int, key: str) -> float:
    """A /proc/PID/status field in MiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    return sum(user_and_system_seconds(pid))


def user_and_system_seconds(pid: int) -> tuple[float, float]:
    """A process's CPU seconds in user space and in the kernel (its system calls: sockets)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def callgrind_wrapper(directory: Path) -> list[str]:
    """valgrind's callgrind around a process, its counts to DIRECTORY/callgrind.PID[.DUMP]."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--agent-instructions needs valgrind (Debian's valgrind package)")
    return ["valgrind", "--tool=callgrind", "--vgdb=yes",
            f"--callgrind-out-file={directory / 'callgrind.%p'}"]


def callgrind_instructions(pid: int, directory: Path) -> int:
    """The instructions a process under `callgrind_wrapper` has run so far: its counts dumped
    now (`callgrind_control --dump`, to DIRECTORY/callgrind.PID.N) and their total read."""
    before = set(directory.glob(f"callgrind.{pid}.*"))
    subprocess.run(["callgrind_control", "--dump", str(pid)], check=True, timeout=120,
                   stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for dump in set(directory.glob(f"callgrind.{pid}.*")) - before:
            for line in dump.read_text(errors="replace").splitlines():
                if line.startswith("totals:"):
                    return int(line.split()[1])
        time.sleep(0.2)
    raise TimeoutError(f"no callgrind dump of process {pid} in {directory}")
