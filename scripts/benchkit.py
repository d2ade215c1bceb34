"""What the benchmark scripts share: two simulated clusters in this process with a count of the
HTTP requests each serves, the home agent as a process (its JSON log read back as timed
milestones, its /metrics scraped), and a process's CPU seconds and RSS from /proc.

Import it from a script in scripts/ (`from benchkit import ...`); it puts the repository on
sys.path for the tests' helpers it reuses.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from aiohttp import web
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kubesim.cluster import Cluster, ClusterThread  # noqa: E402
from tests.home_agent.agentproc import (  # noqa: E402
    ensure_namespace,
    install_crds,
    tenant_labels,
)

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


# --- processes ----------------------------------------------------------------------------------

def process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    user, system = int(fields[11]), int(fields[12])  # utime, stime (fields 14 and 15)
    return (user + system) / os.sysconf("SC_CLK_TCK")


def rss_megabytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- request counting ---------------------------------------------------------------------------

def resource_of(path: str) -> str:
    """The plural (and subresource) an API path names: /api/v1/namespaces/a/pods/b/status →
    pods/status."""
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return path
    parts = parts[2:] if parts[0] == "api" else parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) >= 3 and parts[2] not in ("status", "finalize"):
        parts = parts[2:]
    return "/".join(parts[::2][:1] + parts[2:3])


class RequestCounter:
    """An aiohttp middleware for a kubesim cluster counting requests by (verb, resource), where
    verb is the HTTP method, or WATCH for watches; `written` counts the writes the server
    accepted (not a create answered 409, nor any other refusal)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.written: Counter[tuple[str, str]] = Counter()

    async def __call__(self, request: web.Request, handler: Any) -> web.StreamResponse:
        verb = request.method
        if verb == "GET" and request.query.get("watch") in ("1", "true"):
            verb = "WATCH"
        key = (verb, resource_of(request.path))
        self.counts[key] += 1
        response: web.StreamResponse = await handler(request)
        if verb in WRITE_METHODS and response.status < 400:
            self.written[key] += 1
        return response

    def snapshot(self) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
        """(requests, accepted writes) so far."""
        return Counter(self.counts), Counter(self.written)


@dataclass
class SimCluster:
    name: str
    kubeconfig: Path
    api_client: client.ApiClient
    core: client.CoreV1Api
    custom: client.CustomObjectsApi
    requests: RequestCounter


@contextmanager
def simulated_clusters(*names: str) -> Iterator[dict[str, SimCluster]]:
    """kubesim clusters served from a thread of this process, annex's CRDs installed, each with
    a RequestCounter."""
    directory = Path(tempfile.mkdtemp(prefix="bench-kubesim-"))
    sims = [Cluster(name) for name in names]
    counters = {sim.name: RequestCounter() for sim in sims}
    for sim in sims:
        sim.middlewares.append(counters[sim.name])
    thread = ClusterThread(sims, directory)
    thread.start()
    try:
        handles = {}
        for sim in sims:
            kubeconfig = directory / f"{sim.name}.kubeconfig"
            api = config.new_client_from_config(config_file=str(kubeconfig))
            handles[sim.name] = SimCluster(sim.name, kubeconfig, api, client.CoreV1Api(api),
                                           client.CustomObjectsApi(api), counters[sim.name])
            install_crds(SimpleNamespace(api_client=api))
        yield handles
    finally:
        thread.stop()


def drained(response: Any) -> None:
    """Read a `_preload_content=False` answer to its end, which gives its connection back to
    the client's pool: left unread, each call keeps one open (10,000 creates ran the process,
    which serves both ends in-process, out of its 20,000 file descriptors)."""
    response.drain_conn()
    response.release_conn()


def items(response: Any) -> list[dict[str, Any]]:
    """A list's items as plain dicts, from a call made with `_preload_content=False` (no model
    deserialisation: thousands of objects)."""
    return list(json.loads(response.data)["items"])


# --- the home agent -----------------------------------------------------------------------------

@dataclass
class AgentProcess:
    """The home agent as a process, logging JSON at INFO, with /metrics on a free port."""

    home: SimCluster
    remote: SimCluster
    home_id: str
    remote_id: str
    log_path: Path
    flags: Sequence[str] = ()
    metrics_port: int = field(default_factory=free_port)
    started: float = 0.0
    """time.time() just before the process was spawned."""
    root: Path = ROOT
    """The source tree the agent runs from: another checkout compares two versions in one run
    against the same servers."""
    popen: subprocess.Popen[bytes] | None = None

    @property
    def node_name(self) -> str:
        return f"liqo-{self.remote_id}"

    @property
    def tenant_namespace(self) -> str:
        return f"annex-tenant-{self.home_id}"

    def prepare(self) -> AgentProcess:
        """What the provider does before a consumer's agent starts: its tenant namespace."""
        ensure_namespace(self.remote, self.tenant_namespace, tenant_labels(self.home_id))
        return self

    def start(self) -> AgentProcess:
        args = [
            sys.executable, "-m", "home_agent",
            "--home-kubeconfig", str(self.home.kubeconfig),
            "--remote-kubeconfig", str(self.remote.kubeconfig),
            "--cluster-id", self.home_id, "--remote-cluster-id", self.remote_id,
            "--metrics-address", f"127.0.0.1:{self.metrics_port}",
            "--log-format", "json", "--log-level", "INFO",
            "--kubelet-port", "0",  # runs side by side: each agent its own kubelet API port
            *self.flags]
        with open(self.log_path, "wb") as log:  # the child keeps its own descriptor
            self.started = time.time()
            self.popen = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                          cwd=self.root, env={**os.environ,
                                                              "PYTHONUNBUFFERED": "1"})
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        assert self.popen is not None
        self.popen.kill()
        self.popen.wait()

    def metrics(self) -> dict[str, float]:
        """The Prometheus samples, `name{labels}` → value ({} while the server is not up)."""
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return {}
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def milestones(self) -> list[tuple[float, str]]:
        """(seconds after `started`, message) for every log line so far."""
        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            when = datetime.fromisoformat(entry["time"]).timestamp()
            found.append((when - self.started, str(entry.get("message", ""))))
        return found

    def first(self, text: str) -> float | None:
        """Seconds after start of the first log line containing `text`."""
        return next((when for when, message in self.milestones() if text in message), None)
