"""The local demo (`annex-demo`) runs headless as a real process, tells the whole story (peering,
an offloaded app, a cut during which remote pods keep running and a deleted one comes back, the
recovery) and leaves nothing running: not at its end, not when interrupted with Ctrl-C halfway."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.kubesim_only(reason="the demo starts two simulated clusters of its own "
                                              "and cuts their connection with kubesim's fault "
                                              "injection: it has no mode on real clusters")
REPO = Path(__file__).resolve().parents[2]
STEPS = ("Start two simulated clusters", "Install the remote-enforcer chart",
         "Discover the provider", "Accept the advertisement", "Offload namespace demo",
         "Cut the connection", "Restore the connection", "Done",
         "Clean up")


def _sigint_as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Demo:
    """`python -m annex_demo --fast ...` with its output read line by line as it comes."""

    popen: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @classmethod
    def start(cls, *flags: str) -> Demo:
        # Ctrl-C at a terminal reaches a foreground process, whose SIGINT is not ignored; a
        # test run started in the background by a shell without job control ignores SIGINT, and
        # Python children inherit that (the demo then never sees the signal).
        popen = subprocess.Popen([sys.executable, "-m", "annex_demo", "--fast", *flags],
                                 cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, text=True,
                                 preexec_fn=_sigint_as_at_a_terminal)
        demo = cls(popen)
        threading.Thread(target=demo._read, daemon=True).start()
        return demo

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def read_until(self, text: str | None, timeout: float = 150) -> None:
        """Collect output until a line contains `text` (None: until the process ends)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.popen.kill()
                pytest.fail(f"no {text or 'end'} within {timeout}s:\n{self.output}")
            if line is None:
                if text is None:
                    return
                pytest.fail(f"the demo ended before {text!r}:\n{self.output}")
            self.lines.append(line)
            if text is not None and text in line:
                return

    def finish(self) -> int:
        self.read_until(None)
        return self.popen.wait(30)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def _index(output: str, text: str, after: int = 0) -> int:
    position = output.find(text, after)
    assert position >= 0, f"{text!r} missing after position {after}:\n{output}"
    return position


def assert_nothing_left(output: str) -> None:
    """The processes it named are gone, no process uses its work directory, the clusters'
    ports no longer answer and the work directory is removed."""
    workdir = re.search(r"work directory \(kubeconfigs, logs\): (\S+)", output)
    assert workdir, output
    pids = [int(pid) for pid in re.findall(r": pid (\d+),", output)]
    ports = [int(port) for port in re.findall(r"^\s+(?:home|remote)\s+https://127\.0\.0\.1:(\d+)",
                                              output, re.MULTILINE)]
    assert len(pids) >= 1 and len(ports) == 2, output
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not list(processes_mentioning(workdir.group(1)))
    for port in ports:
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
            pass
    assert not Path(workdir.group(1)).exists()


def processes_mentioning(text: str) -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    yield int(entry.name)
            except OSError:
                continue


def test_the_demo_tells_the_whole_story_and_leaves_nothing_running() -> None:
    demo = Demo.start()
    assert demo.finish() == 0, demo.output
    output = demo.output
    position = 0
    for number, title in enumerate(STEPS, start=1):
        position = _index(output, f"Step {number}: {title}", position)
    # peered: the virtual node joins the home cluster with the offer's capacity
    assert re.search(r"liqo-remote\s+│ True\s+│ RemoteClusterReady", output), output
    # offloaded: three pods on the virtual node at home, on remote workers remotely
    offloaded = _index(output, "Step 5")
    assert re.search(r"converged: 3 replicas offloaded .*3/3 replicas running remotely",
                     output[offloaded:])
    assert "3 Running on liqo-remote" in output[offloaded:]
    home_table = _index(output, "Pods at home (demo)", offloaded)
    remote_table = _index(output, "Pods on remote (demo-home)", home_table)
    for header in ("NAME", "PHASE", "IP", "NODE"):
        assert header in output[home_table:remote_table]
    assert len(re.findall(r"web-\S+\s+│ Running │ 10\.70\.\d+\.\d+\s+│ liqo-remote",
                          output[home_table:remote_table])) == 3
    assert len(re.findall(r"web-\S+\s+│ Running │ 10\.0\.\d+\.\d+\s+│ remote-worker-\d",
                          output[remote_table:_index(output, "Step 6")])) == 3
    # the cut: NotReady, the remote pods keep running; then Ready again and converged
    cut = _index(output, "virtual node liqo-remote NotReady", offloaded)
    assert re.search(r"liqo-remote\s+│ False\s+│ RemoteClusterUnreachable", output[cut:])
    kept = _index(output, "remote pods keep running while the clusters cannot talk", cut)
    assert "3/3 Running remotely" in output[kept:_index(output, "\n", kept)]
    assert re.search(r"remote pod web-\S+ deleted during the cut: the enforcer recreates it from "
                     r"its ShadowPod .*new pod Running on remote-worker-\d", output[kept:])
    ready = _index(output, "virtual node liqo-remote Ready again", kept)
    converged = _index(output, "converged: 4 replicas offloaded", ready)
    _index(output, "4/4 replicas running remotely", converged)
    _index(output, "the ConfigMap edit made during the cut reached remote", ready)
    assert_nothing_left(output)


def test_ctrl_c_halfway_stops_everything() -> None:
    demo = Demo.start()
    # Once the agent runs (step 4), both components and both clusters are up; the rest of the
    # story takes about 4 s with --fast.
    demo.read_until("home agent: pid")
    demo.popen.send_signal(signal.SIGINT)
    assert demo.finish() == 130, demo.output
    assert "Step 8: Done" not in demo.output
    assert "stopped home agent" in demo.output and "stopped remote enforcer" in demo.output
    assert_nothing_left(demo.output)
