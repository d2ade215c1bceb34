"""The home agent against the raw API limit: offloading N pods and reflecting N ConfigMaps through
the agent and the remote enforcer (real processes), against a bare client doing the minimal API
writes the same work needs, on the same servers, in the same run.

    python scripts/bench_offloading.py [--pods 1000] [--configmaps N] [--latency-pods 200]
        [--idle-seconds 60] [--workers 10] [--bare-lanes 16] [--agent-flag=--remote-qps=500 ...]
        [--enforcer-flag=... ...] [--json bench-offloading.json] [--scenarios a,b,...]
        [--stream-logs 100] [--stream-execs 20] [--stream-pods 10] [--trace] [--profile]

Clusters: two kubesim clusters, each in a child process of its own as two control planes are
(`--serve-kubesim`, not for direct use); or the two clusters E2E_HOME_KUBECONFIG and
E2E_REMOTE_KUBECONFIG name (E2E_REMOTE_POD_CIDR: the remote's pod CIDR, remapped by the agent),
real or not. Everything a run creates is named after it (`bench-<run>`, a Node
`bench-bare-node-<run>` for the bare client's pods, kept alive by a Lease) and removed at its
end, also after a failure or Ctrl-C. The run refuses to start when the remote's ready
schedulable nodes lack room for the pods it would leave there; every wait has a deadline.

Requests are counted by the components themselves (their /metrics:
annex_rest_client_requests_by_resource_total by host, verb and resource) and by the bare
client's own counter, on kubesim and on real clusters alike.

Scenarios (in this order; each leaves its objects for the next):
- latency: pods created one at a time (--latency-rate a second) with the agent running; per pod,
  from watches: bound (created with nodeName) → ShadowPod created → remote pod Running → home pod
  Running. "Added" is what the agent adds: (ShadowPod − bound) + (home Running − remote Running).
  The bare client does the same pods the same way.
- offloading: N pods created while the agent is stopped, then the agent starts; rate = N over
  first ShadowPod → last home pod Running. The bare client (--bare-lanes concurrent requests)
  takes N pods the same way, writing the objects the agent's forge makes for them: create the
  ShadowPod and, as the pods mount their service-account token, first request the token at
  home and create the token Secret at the remote → wait for the remote pod Running → patch the
  home pod's status. Ratio = agent rate / bare rate (target ≥ 0.5). Each phase ends once
  its work has settled (the agent's reflection drained, the enforcer's ShadowPod statuses
  written: on the bare path these trail the pods), so that the next starts on a quiet system;
  requests and CPU are counted until then. Between the phases the bare client's pods go, with
  their ShadowPods, token Secrets, remote pods and Events (bare_removed_seconds; the latency
  scenario's bare pods with them), so that the agent's phase does not start on clusters
  holding the bare client's phase's objects.
- configmaps: N ConfigMaps likewise (agent stopped, created, agent started; first → last remote
  copy); bare: one create per copy.
- restart: the agent is killed (SIGKILL) and started again (--restarts times, the median run
  reported; with --compare-root alternating with another checkout's agent, each one's median):
  seconds until it is synced with an empty work queue (its /metrics), and its writes meanwhile
  (target: none but heartbeats).
- idle: agent writes per minute with nothing changing (target: heartbeats only).
- streams: --stream-logs followed logs and --stream-execs exec sessions (`cat`, sent a line a
  second) opened through the home API server, as kubectl opens them, on --stream-pods offloaded
  pods: the agent's latency (as in latency, agent path only) measured before they open and
  while they are open (target: p50 of the added latency changes by less than 10 %), the agent's
  RSS with them open. The home API server reaches the agent's kubelet API at this machine's
  address on its route (E2E_AGENT_ADDRESS overrides it) and is verified with the home cluster
  CA (kube-root-ca.crt). A stream that ends early fails the run; all are closed at its end.

- storage (by name only: --scenarios storage): --storage-pods claims of the virtual storage class
  (installed at home as the home-agent chart does) and one pod each, scheduled by the home
  scheduler onto the virtual node: seconds from the first claim created to all home claims Bound
  and to all home pods Running, and the agent's CPU seconds per claim.

Agent and enforcer: peak RSS (VmHWM) and CPU seconds per scenario from /proc; the agent's CPU per
pod is all its CPU in the offloading phase (from its start, listings included) over --pods.
--profile samples the agent with py-spy in that phase and in the restart, from its start to its
convergence (scripts/bench_profile.py), and reports the functions it was in when it ran or could
run (a share of that time, not of its CPU time).
--agent-instructions runs the agent under valgrind's callgrind and reports the instructions it
ran in that phase (from its start to convergence) per pod: unlike its CPU seconds, a count that
does not drift with the machine (the same tree, the same N: within about 1 %), so two trees
compare in one run each. The agent runs about 30 times slower under it: keep N to a few
thousand. Its call graph (callgrind_annotate) is left in the run directory. The
agent and the enforcer run with their defaults (unthrottled clients, as the bare client), the
agent with `--workers`; --agent-flag and --enforcer-flag are appended to their command lines
(e.g. --agent-flag=--redis-url=..., --enforcer-flag=--qps=200).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import ipaddress
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bench_trace  # noqa: E402
from bench_profile import Profiler  # noqa: E402

from annex.kube import ClientLimits, load_connection  # noqa: E402
from annex.kubeapi import (  # noqa: E402
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ClusterApi,
    RequestMetrics,
    WatchExpired,
    core_path,
    custom_path,
    group_path,
    retrying,
    ssl_context,
)
from remote_enforcer.admission import WEBHOOK_PATH  # noqa: E402
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING  # noqa: E402
from shared.api.shadowpod import SHADOWPOD  # noqa: E402
from shared.forge.configmap import remote_configmap  # noqa: E402
from shared.forge.metadata import reflection_config  # noqa: E402
from shared.forge.pod import (  # noqa: E402
    PodForgeConfig,
    projected_service_account_tokens,
    service_account_name,
    shadow_pod,
)
from shared.forge.token import issued_token, token_request, token_secret  # noqa: E402
from shared.ownership import ownership_labels  # noqa: E402
from shared.wellknown import (  # noqa: E402
    KUBE_ROOT_CA_CONFIGMAP,
    NODE_LEASE_NAMESPACE,
    ORIGIN_CLUSTER_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    TENANT_NAMESPACE_LABEL,
    VIRTUAL_NODE_TAINT_KEY,
    VIRTUAL_STORAGE_CLASS,
    VIRTUAL_STORAGE_PROVISIONER,
)
from spdy3 import channels, upgrade  # noqa: E402

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
HEARTBEAT_RESOURCES = frozenset({"leases"})
TOLERATIONS = [{"key": key, "operator": "Exists", "effect": "NoExecute"} for key in (
    VIRTUAL_NODE_TAINT_KEY,
    # The agent is stopped while a phase's pods are created (minutes at N = 50,000): its node
    # goes unreachable, and pods tolerating that for the default 300 s would be evicted.
    "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")]
BY_RESOURCE = "annex_rest_client_requests_by_resource_total"
"""The components' request counter the benchmark reads (annex.kubeapi.RequestMetrics)."""
LEASE_SECONDS = 40
"""The bare client's node Lease: renewed every quarter of it, as a kubelet renews its own."""


@dataclass(frozen=True)
class Names:
    """What a run creates, named after the run: runs on the same clusters never meet."""

    run: str

    @property
    def home_id(self) -> str:
        return f"bench-home-{self.run}"

    @property
    def remote_id(self) -> str:
        return f"bench-remote-{self.run}"

    @property
    def provider_id(self) -> str:
        return f"bench-provider-{self.run}"

    @property
    def bare_consumer(self) -> str:
        return f"bench-bare-{self.run}"

    @property
    def namespace(self) -> str:
        return f"bench-{self.run}"

    @property
    def bare_namespace(self) -> str:
        return f"bench-bare-{self.run}"

    @property
    def bare_twin(self) -> str:
        return f"bench-bare-twin-{self.run}"

    @property
    def tenant(self) -> str:
        return f"annex-tenant-{self.home_id}"

    @property
    def virtual_node(self) -> str:
        return f"liqo-{self.remote_id}"

    @property
    def bare_node(self) -> str:
        """A Node the bare client's pods are bound to: a controller-manager's pod garbage
        collector deletes pods bound to a node that does not exist."""
        return f"bench-bare-node-{self.run}"

    @property
    def webhook(self) -> str:
        return f"shadowpods.bench-{self.run}.annex"


# --- the simulated clusters, in a child process -----------------------------------------------

def remote_pod_cidr(workers: int) -> str:
    """A /24 for each of `workers` nodes, up to 16,384 (10.128.0.0/10, remapped onto the
    agent's 100.64.0.0/10)."""
    return f"10.128.0.0/{min(16, 24 - (workers - 1).bit_length())}"


def serve_kubesim(directory: Path, remote_pods: int, only: str,
                  latency: tuple[float, float] = (0.0, 0.0)) -> None:
    """The `only` kubesim cluster (home or remote: each in a process of its own, as two real
    control planes are), its kubeconfig written to DIR/CLUSTER.kubeconfig. Prints one JSON line
    once serving; runs until SIGTERM. `latency`: (write, watch) seconds, see --kubesim-latency."""
    from kubesim.cluster import Cluster
    from kubesim.controllers import ControllerSettings

    # kubesim gives each node a /24 of the pod CIDR (at most 254 pods a node) while the CIDR
    # has one for each, smaller slices beyond: past 256 nodes the remote CIDR grows.
    workers = max(1, math.ceil(remote_pods / 250))
    specs = {"home": (1, "10.10.0.0/16", 110),
             "remote": (workers, remote_pod_cidr(workers), 250)}
    count, cidr, pods = specs[only]

    async def main() -> None:
        cluster = Cluster(only, workers=count, pod_cidr=cidr)
        cluster.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
            workers=count, pod_cidr=cidr, node_prefix=f"{only}-worker",
            worker_cpu="10000", worker_memory="10000Gi", worker_pods=pods)
        await cluster.start(directory)
        cluster.faults.write_latency(latency[0])
        cluster.faults.watch_latency(latency[1])
        print(json.dumps({"kubeconfig": str(directory / f"{only}.kubeconfig"),
                          "remote_pod_cidr": cidr if only == "remote" else None}), flush=True)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()
        await cluster.stop()

    asyncio.run(main())


WEBHOOKS = group_path("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")


def remote_pods_needed(args: argparse.Namespace) -> int:
    """The pods the chosen scenarios leave at the remote (each keeps its pods for the next)."""
    scenarios = args.scenarios.split(",")
    needed = 2 * ((args.latency_pods if "latency" in scenarios else 0)
                  + (args.pods if "offloading" in scenarios else 0))
    if "streams" in scenarios:  # its pods and two latency measurements on the agent's path
        needed += args.stream_pods + 2 * args.latency_pods
    if "storage" in scenarios:
        needed += args.storage_pods
    return needed


class CapacityError(Exception):
    """The remote cluster cannot run the pods this run would create."""


class ComponentExited(Exception):
    """The agent or the enforcer exited while the run needed it."""


def schedulable(node: dict[str, Any]) -> bool:
    """Ready, not cordoned, without a NoSchedule or NoExecute taint (a control plane's)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or [])
    return ready and not spec.get("unschedulable") and not tainted


def micro_time() -> str:
    """Now as a Kubernetes MicroTime (a Lease's renewTime)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- processes ----------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def agent_address(kubeconfig: str) -> str:
    """Where the home API server reaches the agent, which runs on this machine: E2E_AGENT_ADDRESS
    (as for the end-to-end tests), else this machine's address on the route to the home API
    server (loopback for kubesim)."""
    if os.environ.get("E2E_AGENT_ADDRESS"):
        return os.environ["E2E_AGENT_ADDRESS"]
    host = urlsplit(load_connection(kubeconfig).server).hostname or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 443))
        return str(probe.getsockname()[0])


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


def _median_run(runs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The run of median convergence time (the slower of the middle two)."""
    ordered = sorted(runs, key=lambda run: run["converged_seconds"])
    return {key: ordered[len(ordered) // 2][key] for key in ("converged_seconds", "agent")}


class Component:
    """A component as a child process (log in the run directory), with /proc figures."""

    def __init__(self, name: str, args: list[str], log_path: Path,
                 wrapper: list[str] | None = None) -> None:
        self.name, self.args, self.log_path = name, args, log_path
        self.wrapper = wrapper or []
        """A command the process runs under (valgrind for --agent-instructions)."""
        self.popen: subprocess.Popen[bytes] | None = None
        self.spawned = 0.0
        self.stopped = False

    def start(self, checkout: Path = ROOT) -> None:
        """`checkout`: the source tree it runs from (`python -m` imports from there)."""
        self.stopped = False
        with self.log_path.open("ab") as log:
            self.spawned = time.monotonic()
            self.popen = subprocess.Popen([*self.wrapper, sys.executable, *self.args],
                                          cwd=checkout, stdout=log,
                                          stderr=subprocess.STDOUT,
                                          env={**os.environ, "PYTHONUNBUFFERED": "1"})

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def running(self) -> bool:
        """alive(), and ComponentExited when it has exited on its own (nothing waits for a
        process that has gone)."""
        if self.popen is not None and self.popen.poll() is not None and not self.stopped:
            raise ComponentExited(f"the {self.name} exited with code {self.popen.returncode}: "
                                  f"see {self.log_path}")
        return self.alive()

    def figures(self) -> dict[str, float]:
        """Peak and current RSS (MiB) and CPU seconds of the running process (and of them, the
        kernel's)."""
        user, system = user_and_system_seconds(self.pid)
        return {"peak_rss_mib": round(proc_status(self.pid, "VmHWM"), 1),
                "rss_mib": round(proc_status(self.pid, "VmRSS"), 1),
                "cpu_seconds": round(user + system, 2), "cpu_system_seconds": round(system, 2)}

    def stop(self, kill: bool = False) -> None:
        self.stopped = True
        if not self.alive():
            return
        assert self.popen is not None
        self.popen.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.popen.wait(20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return 0, ""


def prometheus_samples(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(port: int, family: str, timeout: float = 30.0) -> list[tuple[dict[str, str], float]]:
    """The samples of one family on a running component's /metrics, by label set (retried
    until the endpoint answers: it may be starting)."""
    deadline = time.monotonic() + timeout
    while True:
        status, text = http_get(f"http://127.0.0.1:{port}/metrics", 2)
        if status == 200:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no /metrics on port {port} after {timeout:.0f}s")
        time.sleep(0.2)
    return [(dict(LABEL.findall(name)), value)
            for name, value in prometheus_samples(text).items() if name.startswith(family + "{")]


# --- watching ------------------------------------------------------------------------------------

class Timeline:
    """When each object was first seen (and first seen Running), from watches."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str, str], float] = {}
        self.running: dict[tuple[str, str, str], float] = {}
        self.waiters: dict[tuple[str, str, str, str], asyncio.Future[dict[str, Any]]] = {}

    def record(self, kind: str, event: dict[str, Any]) -> None:
        if event.get("type") not in ("ADDED", "MODIFIED"):
            return
        now = time.monotonic()
        obj = event["object"]
        key = (kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.seen.setdefault(key, now)
        self._wake((*key, "seen"), obj)
        status = obj.get("status") or {}
        phase = (status.get("podStatus") or {}) if kind.endswith("shadowpods") else status
        if phase.get("phase") == "Running" and key not in self.running:
            self.running[key] = now
            self._wake((*key, "running"), obj)

    def _wake(self, key: tuple[str, str, str, str], obj: dict[str, Any]) -> None:
        waiter = self.waiters.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(obj)

    def wait_running(self, kind: str, namespace: str, name: str) -> Awaitable[dict[str, Any]]:
        future = asyncio.get_running_loop().create_future()
        if (kind, namespace, name) in self.running:
            future.set_result({"status": {"phase": "Running"}})
        else:
            self.waiters[(kind, namespace, name, "running")] = future
        return future

    def all_of(self, table: dict[tuple[str, str, str], float], kind: str, namespace: str,
               names: list[str]) -> Callable[[], bool]:
        """A condition: every named object is in `table` (seen or running)."""
        return lambda: all((kind, namespace, name) in table for name in names)


async def follow(api: ClusterApi, path: str, kind: str, timeline: Timeline) -> None:
    """Record every event of a collection from now on: a watch continued from its last version
    when it ends or breaks, a new list (recorded too) when that version expired."""
    version = str((await api.get(path))["metadata"]["resourceVersion"])
    while True:
        try:
            async for event in api.watch(path, version):
                version = str(event["object"]["metadata"].get("resourceVersion") or version)
                timeline.record(kind, event)
        except WatchExpired:
            listed = await api.get(path)
            for obj in listed.get("items") or []:
                timeline.record(kind, {"type": "MODIFIED", "object": obj})
            version = str(listed["metadata"]["resourceVersion"])
        except (TimeoutError, ApiError, aiohttp.ClientError, RuntimeError):
            await asyncio.sleep(0.2)  # the same version again


async def until(condition: Callable[[], bool], timeout: float, what: str,
                interval: float = 0.05) -> float:
    """Wait for `condition`; returns when it held (time.monotonic())."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(interval)
    return time.monotonic()


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)
    return {"p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "max_ms": at(1.0)}


async def gather_limited(calls: Iterable[Callable[[], Awaitable[Any]]], limit: int) -> None:
    """Run the calls, at most `limit` at once."""
    pending = iter(calls)

    async def lane() -> None:
        for call in pending:
            await call()
    await asyncio.gather(*(lane() for _ in range(limit)))


# --- streams through the home API server --------------------------------------------------------

STREAM_CONTAINER = "main"
STREAM_FIRST_LINE = "ready"


class StreamEnded(Exception):
    """A log stream or an exec session that ended, or failed to open, while the run needed it."""


@dataclass
class Streams:
    """Followed logs and exec sessions of pods, opened through the home API server as `kubectl
    logs -f` and `kubectl exec -i` open them (pods/log with follow; pods/exec over WebSocket,
    v5.channel.k8s.io or v4). Each exec session runs `cat` and is sent a line every
    `echo_interval` seconds, whose echo must come back within `deadline`; each followed log
    must stay open. A stream that ends before `close()` is recorded in `ended`."""

    kubeconfig: str
    deadline: float = 30.0
    echo_interval: float = 1.0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    round_trips: list[float] = field(default_factory=list)
    """Seconds from an exec line sent to its echo read."""
    _session: aiohttp.ClientSession | None = None
    _server: str = ""
    _server_hostname: str | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connection = load_connection(self.kubeconfig)
            headers = ({"Authorization": f"Bearer {connection.token}"}
                       if connection.token else {})
            self._session = aiohttp.ClientSession(
                headers=headers,
                connector=aiohttp.TCPConnector(ssl=ssl_context(connection), limit=0))
            self._server = connection.server.rstrip("/")
            self._server_hostname = connection.tls_server_name
        return self._session

    async def open(self, kind: str, namespace: str, pod: str) -> None:
        """Open a stream (kind: log or exec) and return once data flows on it; StreamEnded
        when it does not within the deadline."""
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stream = self._log if kind == "log" else self._exec
        what = f"{kind} {namespace}/{pod}"
        task = asyncio.get_running_loop().create_task(self._run(stream(namespace, pod, opened),
                                                                opened, what))
        self.tasks.append(task)
        try:
            async with asyncio.timeout(self.deadline):
                await asyncio.shield(opened)
        except TimeoutError:
            task.cancel()
            raise StreamEnded(f"{what}: no data after {self.deadline:.0f}s") from None

    async def _run(self, stream: Awaitable[None], opened: asyncio.Future[None],
                   what: str) -> None:
        try:
            await stream
            problem = "ended"
        except (aiohttp.ClientError, TimeoutError, StreamEnded, ValueError) as error:
            problem = f"{type(error).__name__}: {error}"
        if not opened.done():
            opened.set_exception(StreamEnded(f"{what}: {problem}"))
        else:
            self.ended.append(f"{what}: {problem}")

    async def _log(self, namespace: str, pod: str, opened: asyncio.Future[None]) -> None:
        session = self.session()
        async with session.get(
                self._server + core_path("pods", namespace, pod, "log"),
                params={"container": STREAM_CONTAINER, "follow": "true"},
                server_hostname=self._server_hostname,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.deadline)) as answer:
            if answer.status != 200:
                raise StreamEnded(f"{answer.status} {(await answer.text())[:300]}")
            async with asyncio.timeout(self.deadline):
                first = await answer.content.readline()
            if first.strip() != STREAM_FIRST_LINE.encode():
                raise StreamEnded(f"first line {first!r}")
            opened.set_result(None)
            while await answer.content.readany():  # a followed log ends only when closed
                pass

    async def _exec(self, namespace: str, pod: str, opened: asyncio.Future[None]) -> None:
        query = [("container", STREAM_CONTAINER), ("command", "cat"), ("stdin", "true"),
                 ("stdout", "true"), ("stderr", "true")]
        session = self.session()
        async with session.ws_connect(
                self._server + core_path("pods", namespace, pod, "exec"), params=query,
                protocols=(upgrade.REMOTECOMMAND_V5, upgrade.REMOTECOMMAND_V4),
                server_hostname=self._server_hostname,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5)) as ws:
            sent = 0
            echoed = b""
            while True:
                sent += 1
                line = f"{sent}\n".encode()
                started = time.monotonic()
                await ws.send_bytes(channels.channel_message(channels.CHANNEL_STDIN, line))
                while not echoed.endswith(line):
                    async with asyncio.timeout(self.deadline):
                        message = await ws.receive()
                    if message.type != aiohttp.WSMsgType.BINARY:
                        raise StreamEnded(f"{message.type.name} {message.data!r}")
                    channel, data = channels.parse_channel_message(message.data)
                    if channel != channels.CHANNEL_STDOUT:
                        raise StreamEnded(f"channel {channel}: {data[:300]!r}")
                    echoed += data
                self.round_trips.append(time.monotonic() - started)
                echoed = b""
                if not opened.done():
                    opened.set_result(None)
                await asyncio.sleep(self.echo_interval)

    def still_open(self) -> int:
        return sum(1 for task in self.tasks if not task.done())

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()


# --- the bench -----------------------------------------------------------------------------------

@dataclass
class Bench:
    args: argparse.Namespace
    directory: Path
    kubeconfigs: dict[str, str]
    """Per cluster (home, remote): the one kubeconfig everything uses."""
    remote_pod_cidr: str | None
    server_pids: list[int]
    """The kubesim processes, one per cluster (none on real clusters)."""
    names: Names
    timeline: Timeline = field(default_factory=Timeline)
    results: dict[str, Any] = field(default_factory=dict)
    apis: dict[tuple[str, str], ClusterApi] = field(default_factory=dict)
    agent: Component | None = None
    enforcer: Component | None = None
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    kubelet_port: int = field(default_factory=free_port)
    """Kept across agent restarts: a new port would be a node status write on each start."""
    twin: str = ""
    bare_requests: RequestMetrics = field(default_factory=RequestMetrics)
    """The bare client's requests (the driver's are not counted)."""
    created: dict[str, float] = field(default_factory=dict)
    """Latency pods: when each was created (bound), by name."""
    background: list[asyncio.Task[None]] = field(default_factory=list)

    def api(self, cluster: str, user: str) -> ClusterApi:
        """The user's client for a cluster (unthrottled: the limit is the server's)."""
        if (cluster, user) not in self.apis:
            connection = load_connection(self.kubeconfigs[cluster],
                                         limits=ClientLimits(qps=0, burst=256))
            self.apis[(cluster, user)] = ClusterApi(
                connection, timeout=120,
                metrics=self.bare_requests if user == "bare" else RequestMetrics())
        return self.apis[(cluster, user)]

    @property
    def home(self) -> ClusterApi:
        return self.api("home", "driver")

    @property
    def remote(self) -> ClusterApi:
        return self.api("remote", "driver")

    # --- request counts ---

    def hosts(self) -> dict[str, str]:
        """API server host:port → cluster name, as the request counters name the host."""
        return {urlsplit(load_connection(path).server).netloc: cluster
                for cluster, path in self.kubeconfigs.items()}

    def counts(self) -> dict[str, Counter[str]]:
        """Requests so far by who made them (agent, enforcer, bare), as
        `cluster|verb|resource` → requests, read from the components' own counters (their
        /metrics) and the bare client's. A component that is not running counts nothing: it
        starts again from zero."""
        hosts = self.hosts()
        found: dict[str, Counter[str]] = {}
        for who, component, port in (("agent", self.agent, self.metrics_port),
                                     ("enforcer", self.enforcer, self.health_port)):
            found[who] = Counter()
            if component is None or not component.alive():
                continue
            for labels, value in scrape(port, BY_RESOURCE):
                cluster = hosts.get(labels["host"], labels["host"])
                found[who][f"{cluster}|{labels['verb']}|{labels['resource']}"] += int(value)
        found["bare"] = Counter()
        for (_, host, _, verb, _, resource), n in self.bare_requests.snapshot().items():
            found["bare"][f"{hosts.get(host, host)}|{verb}|{resource}"] += n
        return found

    def kubesim_cpu(self) -> list[float]:
        """CPU seconds of each kubesim process (home, remote)."""
        return [cpu_seconds(pid) for pid in self.server_pids]

    def requests_between(self, before: dict[str, Counter[str]], after: dict[str, Counter[str]],
                         who: str) -> dict[str, Any]:
        """Per cluster: the requests and writes of `who` between two count snapshots."""
        delta = after[who] - before.get(who, Counter())
        found: dict[str, Any] = {}
        for cluster in self.kubeconfigs:
            mine = {k.split("|", 1)[1]: n for k, n in delta.items()
                    if k.startswith(cluster + "|")}
            writes = {k: n for k, n in mine.items() if k.split("|")[0] in WRITE_VERBS}
            found[cluster] = {"requests": sum(mine.values()), "writes": sum(writes.values()),
                              "by_verb": dict(sorted(mine.items()))}
        return found

    # --- setup ---

    async def install_crds(self, api: ClusterApi) -> None:
        for manifest in sorted((ROOT / "crds").glob("*.yaml")):
            crd = yaml.safe_load(manifest.read_text())
            await self.create(api, group_path("apiextensions.k8s.io", "v1",
                                              "customresourcedefinitions"), crd)
            spec = crd["spec"]
            served = group_path(spec["group"], spec["versions"][0]["name"], spec["names"]["plural"])
            await until_async(functools.partial(readable, api, served), 30,
                              f"CRD {crd['metadata']['name']} served")

    async def create(self, api: ClusterApi, path: str, body: dict[str, Any]) -> None:
        try:
            await api.create(path, body)
        except ApiError as error:
            if error.status != 409:
                raise

    async def check_capacity(self) -> None:
        """Refuse to start when the remote cannot run every pod the chosen scenarios leave
        there (each keeps its pods for the next): pods would stay Pending and the run time
        out."""
        needed = remote_pods_needed(self.args)
        if not needed:
            return
        nodes = await self.remote.list(core_path("nodes"))
        usable = {node["metadata"]["name"]: int(str(
            (node.get("status") or {}).get("allocatable", {}).get("pods") or 0))
            for node in nodes if schedulable(node)}
        taken = sum(1 for pod in await self.remote.list(core_path("pods"))
                    if (pod.get("spec") or {}).get("nodeName") in usable
                    and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
        room = sum(usable.values()) - taken
        if room < needed:
            raise CapacityError(
                f"the remote cluster has room for {room} more pods ({len(usable)} ready "
                f"schedulable nodes allocate {sum(usable.values())}, {taken} are taken) and "
                f"this run needs {needed} (2 x (--latency-pods {self.args.latency_pods} + "
                f"--pods {self.args.pods}) for the agent's and the bare client's pods"
                + (f", --stream-pods {self.args.stream_pods} + 2 x --latency-pods for the "
                   "streams scenario" if "streams" in self.args.scenarios.split(",") else "")
                + f"): lower --pods or --latency-pods, or add {needed - room} pods of capacity")

    async def setup(self) -> None:
        names = self.names
        await self.install_crds(self.home)
        await self.install_crds(self.remote)
        for name in (names.namespace, names.bare_namespace):
            await self.create(self.home, core_path("namespaces"), {"metadata": {"name": name}})
        await self.create(self.remote, core_path("namespaces"), {"metadata": {
            "name": names.tenant,
            "labels": {TENANT_NAMESPACE_LABEL: "true", REMOTE_CLUSTER_ID_LABEL: names.home_id}}})
        await self.create(self.remote, core_path("namespaces"), {"metadata": {
            "name": names.bare_twin,
            "labels": ownership_labels(names.bare_consumer, names.provider_id)}})
        await self.create_bare_node()
        # What the agent's ConfigMap reflector writes once a namespace: the home root CA, which
        # the offloaded pods' token volume mounts (no mount, no start).
        home_ca: dict[str, Any] = {}

        async def published() -> bool:  # by the root-CA publisher, once the namespace is made
            home_ca.update(await self.home.find(core_path(
                "configmaps", names.bare_namespace, KUBE_ROOT_CA_CONFIGMAP)) or {})
            return bool(home_ca)
        await until_async(published, 60, "the bare namespace's kube-root-ca.crt")
        await self.create(self.remote, core_path("configmaps", names.bare_twin), remote_configmap(
            home_ca, names.bare_twin, reflection_config(names.bare_consumer, names.provider_id)))
        # The cluster CA, which issues the API server's kubelet client certificate (kubeadm's
        # apiserver-kubelet-client): the agent verifies the API server with it.
        root_ca = await self.home.get(core_path("configmaps", "kube-system", "kube-root-ca.crt"))
        (self.directory / "home-ca.crt").write_text(root_ca["data"]["ca.crt"])
        await self.start_enforcer()
        self.start_agent()
        await self.create(self.home, custom_path(NAMESPACE_OFFLOADING, names.namespace), {
            "apiVersion": NAMESPACE_OFFLOADING.api_version, "kind": NAMESPACE_OFFLOADING.kind,
            "metadata": {"name": "offloading"}, "spec": {"podOffloadingStrategy": "Remote"}})
        path = custom_path(NAMESPACE_OFFLOADING, names.namespace, "offloading")
        status: dict[str, Any] = {}

        async def ready() -> bool:
            status.update((await self.home.get(path)).get("status") or {})
            return status.get("offloadingPhase") == "Ready"
        await until_async(ready, 120, "the namespace offloaded")
        self.twin = str(status["remoteNamespaceName"])
        for cluster, kind, namespaces in (
                ("home", "pods", (names.namespace, names.bare_namespace)),
                ("remote", "pods", (self.twin, names.bare_twin)),
                ("remote", "shadowpods", (self.twin, names.bare_twin)),
                ("remote", "configmaps", (self.twin, names.bare_twin))):
            api = self.home if cluster == "home" else self.remote
            for namespace in namespaces:
                path = (custom_path(SHADOWPOD, namespace) if kind == "shadowpods"
                        else core_path(kind, namespace))
                self.background.append(asyncio.get_running_loop().create_task(
                    follow(api, path, f"{cluster}-{kind}", self.timeline)))

    async def create_bare_node(self) -> None:
        """The Node the bare client's pods are bound to, Ready, with a Lease renewed as a
        kubelet renews its own until the run ends (no kubelet runs its pods: the bare client
        writes their status). Tainted as a virtual node is, so that nothing else lands there."""
        name = self.names.bare_node
        capacity = {"cpu": "10000", "memory": "10000Gi",
                    "pods": str(2 * (self.args.pods + self.args.latency_pods) + 10)}
        node = await self.home.create(core_path("nodes"), {"metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                     "type": "bench-bare-node"}},
            "spec": {"taints": [{"key": VIRTUAL_NODE_TAINT_KEY, "value": "true",
                                 "effect": "NoExecute"}]}})
        now = micro_time()
        await self.home.patch(core_path("nodes", name=name, subresource="status"), {"status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "BenchBareNode",
                            "message": "the benchmark's bare client writes its pods' status",
                            "lastHeartbeatTime": now[:19] + "Z",
                            "lastTransitionTime": now[:19] + "Z"}]}},
            content_type=STRATEGIC_MERGE_PATCH)
        lease = group_path("coordination.k8s.io", "v1", "leases", NODE_LEASE_NAMESPACE)
        await self.home.create(lease, {"metadata": {
            "name": name, "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name,
                 "uid": node["metadata"]["uid"]}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS,
                     "renewTime": now}})

        async def renew() -> None:
            while True:
                await asyncio.sleep(LEASE_SECONDS / 4)
                try:
                    await self.home.patch(f"{lease}/{name}",
                                          {"spec": {"renewTime": micro_time()}})
                except (ApiError, aiohttp.ClientError, TimeoutError) as error:
                    print(f"renewing the Lease of node {name}: {error}", file=sys.stderr)
        self.background.append(asyncio.get_running_loop().create_task(renew()))

    async def start_enforcer(self) -> None:
        import trustme

        authority = trustme.CA()
        issued = authority.issue_cert("127.0.0.1", "localhost")
        cert, key = self.directory / "webhook.crt", self.directory / "webhook.key"
        issued.cert_chain_pems[0].write_to_path(str(cert))
        issued.private_key_pem.write_to_path(str(key))
        webhook_port = free_port()
        self.enforcer = Component("enforcer", [
            "-m", "remote_enforcer", "--kubeconfig", self.kubeconfigs["remote"],
            "--cluster-id", self.names.provider_id, "--webhook-address", "127.0.0.1",
            "--webhook-port", str(webhook_port), "--webhook-cert", str(cert),
            "--webhook-key", str(key), "--health-address", "127.0.0.1",
            "--health-port", str(self.health_port), *self.args.enforcer_flag],
            self.directory / "enforcer.log")
        self.enforcer.start()
        enforcer = self.enforcer
        await until_async(lambda: asyncio.to_thread(
            lambda: enforcer.running() and http_get(
                f"http://127.0.0.1:{self.health_port}/readyz")[0] == 200), 60,
            "the enforcer ready")
        name = self.names.webhook
        webhook = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [{
                "name": name,
                "clientConfig": {"url": f"https://127.0.0.1:{webhook_port}{WEBHOOK_PATH}",
                                 "caBundle": base64.b64encode(
                                     authority.cert_pem.bytes()).decode()},
                "rules": [{"apiGroups": [SHADOWPOD.group], "apiVersions": [SHADOWPOD.version],
                           "operations": ["CREATE", "UPDATE"], "resources": [SHADOWPOD.plural],
                           "scope": "Namespaced"}],
                # This run's twin namespaces only: another run's ShadowPods are not its
                # enforcer's to judge.
                "namespaceSelector": {"matchExpressions": [{
                    "key": ORIGIN_CLUSTER_LABEL, "operator": "In",
                    "values": [self.names.home_id, self.names.bare_consumer]}]},
                "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Fail", "timeoutSeconds": 10}]}
        await self.remote.create(WEBHOOKS, webhook)

    def start_agent(self) -> None:
        # An address and a client CA with which the home API server reaches the agent's kubelet
        # API, as it does for `kubectl logs` and `kubectl exec` (the streams scenario).
        flags = ["--workers", str(self.args.workers),
                 "--agent-ip", agent_address(self.kubeconfigs["home"]),
                 "--kubelet-port", str(self.kubelet_port),
                 "--kubelet-client-ca", str(self.directory / "home-ca.crt")]
        if self.remote_pod_cidr:
            remapped = ipaddress.ip_network(self.remote_pod_cidr).prefixlen
            flags += ["--remote-pod-cidr", self.remote_pod_cidr,
                      "--remapped-pod-cidr", f"100.64.0.0/{remapped}"]
        # --trace: the agent as bench_trace runs it (its requests, events, reconciles, stalls)
        module = ([str(ROOT / "scripts" / "bench_trace.py"),
                   str(self.directory / "trace-agent.jsonl"), "home_agent"] if self.args.trace
                  else ["-m", "home_agent"])
        self.agent = Component("agent", [
            *module,
            "--home-kubeconfig", self.kubeconfigs["home"],
            "--remote-kubeconfig", self.kubeconfigs["remote"],
            "--cluster-id", self.names.home_id, "--remote-cluster-id", self.names.remote_id,
            "--metrics-address", f"127.0.0.1:{self.metrics_port}",
            *flags, *self.args.agent_flag], self.directory / "agent.log",
            wrapper=callgrind_wrapper(self.directory) if self.args.agent_instructions else None)
        self.agent.start()

    async def cleanup(self) -> None:
        """Remove what the run created, also after a failure or an interruption: the agent
        stops first (it would recreate what goes), the enforcer last (it deletes the agent's
        twin namespace once the tenant namespace's NamespaceMap goes). Pods at home are
        deleted at once (no kubelet would confirm their end); what is still there after a
        deadline is named on stderr."""
        names = self.names
        for task in self.background:
            task.cancel()
        if self.agent is not None:
            self.agent.stop()
        offloading = custom_path(NAMESPACE_OFFLOADING, names.namespace, "offloading")
        leases = group_path("coordination.k8s.io", "v1", "leases", NODE_LEASE_NAMESPACE)
        steps: list[tuple[ClusterApi, str, Callable[[], Awaitable[Any]]]] = []
        for namespace in (names.namespace, names.bare_namespace):
            steps.append((self.home, f"pods in {namespace}", functools.partial(
                self.home.delete, core_path("pods", namespace), {"gracePeriodSeconds": 0})))
        steps.append((self.home, f"the finalizers of {offloading}", functools.partial(
            self.home.patch, offloading, {"metadata": {"finalizers": None}})))
        for namespace in (names.namespace, names.bare_namespace):
            steps.append((self.home, f"namespace {namespace}", functools.partial(
                self.home.delete, core_path("namespaces", name=namespace))))
        for node in (names.bare_node, names.virtual_node):
            steps.append((self.home, f"node {node}", functools.partial(
                self.home.delete, core_path("nodes", name=node))))
            steps.append((self.home, f"lease {node}", functools.partial(
                self.home.delete, f"{leases}/{node}")))
        steps.append((self.remote, f"webhook {names.webhook}", functools.partial(
            self.remote.delete, f"{WEBHOOKS}/{names.webhook}")))
        for namespace in (names.tenant, names.bare_twin):
            steps.append((self.remote, f"namespace {namespace}", functools.partial(
                self.remote.delete, core_path("namespaces", name=namespace))))
        for _, what, step in steps:
            try:
                async with asyncio.timeout(30):
                    await step()
            except ApiError as error:
                if error.status != 404:
                    print(f"cleanup: {what}: {error}", file=sys.stderr)
            except (aiohttp.ClientError, TimeoutError) as error:
                print(f"cleanup: {what}: {error!r}", file=sys.stderr)
        gone = [(self.home, core_path("namespaces", name=n))
                for n in (names.namespace, names.bare_namespace)]
        gone += [(self.remote, core_path("namespaces", name=n))
                 for n in (names.tenant, names.bare_twin, self.twin) if n]
        gone += [(self.home, core_path("nodes", name=names.bare_node))]
        deadline = time.monotonic() + 120 + self.args.pods / 20
        left: list[str] = []
        while time.monotonic() < deadline:
            left = []
            for api, path in gone:
                try:
                    if await api.find(path) is not None:
                        left.append(path)
                except (ApiError, aiohttp.ClientError, TimeoutError):
                    left.append(path)
            if not left:
                break
            await asyncio.sleep(1)
        if self.enforcer is not None:
            self.enforcer.stop()
        if left:
            print(f"cleanup: still there after the deadline: {', '.join(left)}",
                  file=sys.stderr)

    def agent_metrics(self) -> dict[str, float]:
        status, text = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics", 2)
        return prometheus_samples(text) if status == 200 else {}

    def agent_converged(self) -> bool:
        assert self.agent is not None
        samples = self.agent_metrics() if self.agent.running() else {}
        queued = [value for name, value in samples.items()
                  if name.startswith("annex_home_agent_controller_queued_keys{")]
        return samples.get("annex_home_agent_synced") == 1 and bool(queued) and not any(queued)

    # --- workloads ---

    def pod(self, name: str, node: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeName": node, "tolerations": TOLERATIONS,
                                "containers": [{"name": "main", "image": "nginx:1.25"}]}
        if not self.args.service_account_token:
            spec["automountServiceAccountToken"] = False
        return {"metadata": {"name": name, "labels": {"app": "bench"}}, "spec": spec}

    @property
    def node(self) -> str:
        return self.names.virtual_node

    async def create_pods(self, namespace: str, names: list[str],
                          node: str) -> list[dict[str, Any]]:
        """The pods as the API server made them (with the token volume it adds)."""
        made: list[dict[str, Any]] = []

        async def one(name: str) -> None:
            made.append(await self.home.create(core_path("pods", namespace),
                                               self.pod(name, node)))
        await gather_limited((functools.partial(one, name) for name in names), 32)
        return made

    async def bare_offload(self, pods: list[dict[str, Any]], lanes: int) -> None:
        """The writes offloading these pods needs, made without annex: the objects come from the
        pure forge functions the agent uses (the same bodies). Per pod: for a pod that mounts its
        service-account token, a TokenRequest at home and the token Secret at the remote, then
        the ShadowPod (the agent's order too); once the remote pod runs (seen by a watch), the
        home pod's status. Pipelined as the agent is: at most `lanes` requests at once."""
        bare_remote, bare_home = self.api("remote", "bare"), self.api("home", "bare")
        lane = asyncio.Semaphore(lanes)
        names = self.names
        config = PodForgeConfig(reflection=reflection_config(names.bare_consumer,
                                                             names.provider_id))

        async def write(call: Callable[[], Awaitable[Any]]) -> Any:
            async with lane:  # retried as any client would (webhook timeouts under load)
                return await retrying(call, attempts=10)

        async def token_secret_of(pod: dict[str, Any]) -> None:
            wanted = projected_service_account_tokens(pod)
            if not wanted:
                return
            account = service_account_name(pod["spec"])
            path = core_path("serviceaccounts", names.bare_namespace, account, "token")
            issued = [issued_token(token.key, await write(
                functools.partial(bare_home.create, path, token_request(pod, token))),
                token.expiration_seconds) for token in wanted]
            secret = token_secret(pod, names.bare_twin, issued, names.bare_consumer,
                                  names.provider_id)
            await write(lambda: created(bare_remote.create(core_path("secrets", names.bare_twin),
                                                           secret)))

        async def one(pod: dict[str, Any]) -> None:
            name = pod["metadata"]["name"]
            running = self.timeline.wait_running("remote-pods", names.bare_twin, name)
            body = shadow_pod(pod, names.bare_twin, config)
            await token_secret_of(pod)  # first: a pod made before it waits for a mount retry
            await write(lambda: created(bare_remote.create(custom_path(SHADOWPOD, names.bare_twin),
                                                           body)))
            try:
                async with asyncio.timeout(self.phase_timeout()):
                    remote_pod = await running
            except TimeoutError:
                raise TimeoutError(f"the remote pod {names.bare_twin}/{name} was not Running "
                                   f"after {self.phase_timeout():.0f}s") from None
            status = {"status": remote_pod.get("status") or {"phase": "Running"}}
            await write(lambda: bare_home.patch(
                core_path("pods", names.bare_namespace, name, "status"), status))
        await asyncio.gather(*(one(pod) for pod in pods))

    def phase_timeout(self) -> float:
        """Seconds a phase's pods have to run: generous for --pods on a slow cluster."""
        return 60.0 + float(self.args.pods) / 5

    def stages(self, namespace: str, twin: str, names: list[str],
               created: dict[str, float]) -> dict[str, Any]:
        """Per-pod stage durations. The agent's own share ("added") is bound → ShadowPod created
        plus ShadowPod status Running (written by the enforcer) → home pod Running; the bare
        client's is bound → ShadowPod plus remote pod Running → home pod Running."""
        t = self.timeline
        stages: dict[str, list[float]] = {name: [] for name in (
            "bound_to_shadowpod", "shadowpod_to_remote_running",
            "remote_running_to_shadowpod_status", "status_to_home_running", "added")}
        for name in names:
            shadow = t.seen.get(("remote-shadowpods", twin, name))
            remote = t.running.get(("remote-pods", twin, name))
            status = t.running.get(("remote-shadowpods", twin, name), remote)
            home = t.running.get(("home-pods", namespace, name))
            if shadow is None or remote is None or status is None or home is None:
                continue
            if namespace == self.names.bare_namespace:
                status = remote  # the bare client reads the pod itself
            stages["bound_to_shadowpod"].append(shadow - created[name])
            stages["shadowpod_to_remote_running"].append(remote - shadow)
            stages["remote_running_to_shadowpod_status"].append(status - remote)
            stages["status_to_home_running"].append(home - status)
            stages["added"].append((shadow - created[name]) + (home - status))
        return {**{stage: percentiles(values) for stage, values in stages.items()},
                "pods": len(stages["added"])}

    async def latency(self) -> None:
        await until(self.agent_converged, 120, "the agent converged", interval=0.5)
        started = time.monotonic()
        self.results["latency"] = {label: await self.measure_latency(label, f"lat-{label}")
                                   for label in ("agent", "bare")}
        if self.args.trace:
            self.results["latency"]["trace"] = self.latency_trace(started, time.monotonic())

    def latency_trace(self, start: float, end: float) -> dict[str, Any]:
        """--trace: where each latency pod's time went, step by step, on the agent's path (its
        trace) and the bare client's (the benchmark's own), and the agent's event-loop stalls
        meanwhile."""
        t, names = self.timeline, self.names
        times: dict[str, dict[str, float]] = {}
        for name, created in self.created.items():
            namespace, twin = ((names.namespace, self.twin) if name.startswith("lat-agent-")
                               else (names.bare_namespace, names.bare_twin))
            found = {"created": created,
                     "shadowpod": t.seen.get(("remote-shadowpods", twin, name)),
                     "remote_running": t.running.get(("remote-pods", twin, name)),
                     "shadowpod_running": t.running.get(("remote-shadowpods", twin, name)),
                     "home_running": t.running.get(("home-pods", namespace, name))}
            times[name] = {k: v for k, v in found.items() if v is not None}
        agent = bench_trace.read(self.directory / "trace-agent.jsonl")
        steps = bench_trace.breakdown(
            agent, bench_trace.read(self.directory / "trace-bench.jsonl"),
            {"namespace": names.namespace, "twin": self.twin,
             "bare_namespace": names.bare_namespace, "bare_twin": names.bare_twin}, times)
        return {**{path: {step: percentiles(values) for step, values in found.items()}
                   for path, found in steps.items()},
                "agent_loop_stalls": bench_trace.stalls(agent, start, end)}

    async def measure_latency(self, label: str, prefix: str) -> dict[str, Any]:
        """--latency-pods pods named PREFIX-i created one at a time on the agent's or the bare
        client's path (label), and their stages."""
        count, interval = self.args.latency_pods, 1.0 / self.args.latency_rate
        namespace, twin, node = ((self.names.namespace, self.twin, self.node) if label == "agent"
                                 else (self.names.bare_namespace, self.names.bare_twin,
                                       self.names.bare_node))
        names = [f"{prefix}-{i}" for i in range(count)]
        created: dict[str, float] = {}
        bare_tasks = []
        for name in names:
            pod = await self.home.create(core_path("pods", namespace), self.pod(name, node))
            created[name] = self.created[name] = time.monotonic()
            if label == "bare":
                bare_tasks.append(asyncio.create_task(self.bare_offload(
                    [pod], self.args.bare_lanes)))
            await asyncio.sleep(interval)
        await until(self.timeline.all_of(self.timeline.running, "home-pods", namespace,
                                         names), 120, f"{prefix} latency pods Running at home")
        await asyncio.gather(*bare_tasks)
        return self.stages(namespace, twin, names, created)

    async def streams(self) -> None:
        """--stream-logs followed logs and --stream-execs exec sessions through the home API
        server on --stream-pods offloaded pods (spread over them in turn), open while the
        agent's latency is measured, against the same measurement just before they open."""
        args, namespace = self.args, self.names.namespace
        names = [f"stream-{i}" for i in range(args.stream_pods)]
        await gather_limited((functools.partial(
            self.home.create, core_path("pods", namespace), self.stream_pod(name))
            for name in names), 32)
        await until(self.timeline.all_of(self.timeline.running, "home-pods", namespace, names),
                    self.phase_timeout(), f"{len(names)} stream pods Running at home")
        assert self.agent is not None
        await until(self.agent_converged, 120, "the agent converged", interval=0.5)
        without = await self.measure_latency("agent", "lat-without-streams")
        before, requests_before = self.agent.figures(), self.counts()
        opened = Streams(self.kubeconfigs["home"])
        try:
            started = time.monotonic()
            await asyncio.gather(
                *(opened.open("log", namespace, names[i % len(names)])
                  for i in range(args.stream_logs)),
                *(opened.open("exec", namespace, names[i % len(names)])
                  for i in range(args.stream_execs)))
            open_seconds = time.monotonic() - started
            with_streams = await self.measure_latency("agent", "lat-with-streams")
            agent = self.agent.figures()
            still_open = opened.still_open()
        finally:
            await opened.close()
        requests = self.requests_between(requests_before, self.counts(), "agent")
        if opened.ended:
            raise StreamEnded(f"{len(opened.ended)} streams ended while open: "
                              + "; ".join(opened.ended[:5]))
        p50 = (without["added"].get("p50_ms"), with_streams["added"].get("p50_ms"))
        self.results["streams"] = {
            "pods": len(names), "logs": args.stream_logs, "execs": args.stream_execs,
            "open_seconds": round(open_seconds, 2), "open_at_end": still_open,
            "exec_echo_round_trip": percentiles(opened.round_trips),
            "exec_echoes": len(opened.round_trips),
            "latency_without": without, "latency_with": with_streams,
            "added_p50_change_percent": round(100 * (p50[1] - p50[0]) / p50[0], 1)
            if None not in p50 and p50[0] else None,
            "agent_before": before, "agent": agent, "requests": requests}

    def stream_pod(self, name: str) -> dict[str, Any]:
        """A pod that prints a first line (a followed log shows it has opened), then waits
        (execs run `cat` in it); busybox's programs, which kubesim's runtime has too."""
        return {"metadata": {"name": name, "labels": {"app": "bench-streams"}},
                "spec": {"nodeName": self.node, "tolerations": TOLERATIONS,
                         "automountServiceAccountToken": False,
                         "containers": [{"name": STREAM_CONTAINER, "image": "busybox:1.36",
                                         "command": ["sh", "-c",
                                                     f"echo {STREAM_FIRST_LINE}; sleep 86400"]}]}}

    async def offloading(self) -> None:
        count = self.args.pods
        assert self.agent is not None and self.enforcer is not None
        results: dict[str, Any] = {}
        for label in ("bare", "agent"):
            namespace = self.names.namespace if label == "agent" else self.names.bare_namespace
            twin = self.twin if label == "agent" else self.names.bare_twin
            names = [f"{label}-{i}" for i in range(count)]
            if label == "agent":
                self.agent.stop()
            pods = await self.create_pods(namespace, names,
                                          self.node if label == "agent"
                                          else self.names.bare_node)
            # What the bare client's path holds at the remote as the phase starts.
            bare_remote = {kind: await count_objects(self.remote, path)
                           for kind, path in self.bare_remote_collections().items()}
            before, enforcer_cpu = self.counts(), cpu_seconds(self.enforcer.pid)
            server_cpu = self.kubesim_cpu()
            script_cpu = time.process_time()
            started = time.monotonic()
            profiler = None
            if label == "agent":
                self.agent.start()
                if self.args.profile:
                    profiler = Profiler(self.agent.pid,
                                        self.directory / "agent-offloading.pyspy.txt")
            else:
                await self.bare_offload(pods, self.args.bare_lanes)
            done = await until(self.timeline.all_of(self.timeline.running, "home-pods",
                                                    namespace, names), self.phase_timeout(),
                               f"{count} {label} pods Running at home", interval=0.2)
            first = min(self.timeline.seen[("remote-shadowpods", twin, n)] for n in names)
            if label == "bare":
                # Its first write, which a watch busy in the same process may show late.
                first = min(first, started)
            if label == "agent":
                # Requests are counted until the agent has nothing left to do, reflection
                # (remote Events, tokens) included, not only until the pods run.
                await until(self.agent_converged, 120 + count / 10, "the agent converged",
                            interval=0.5)
                converged = time.monotonic()
            # ... and until the enforcer has written every ShadowPod's Running status, which on
            # the bare path (it reads the remote pods itself) trails the phase: left running,
            # that backlog would load the server during the next phase.
            settled = await until(self.timeline.all_of(self.timeline.running,
                                                       "remote-shadowpods", twin, names),
                                  120 + count / 10, f"{count} {label} ShadowPod statuses",
                                  interval=0.2)
            after = self.counts()
            result: dict[str, Any] = {
                "pods": count, "seconds": round(done - first, 2),
                "pods_per_second": round(count / (done - first), 1),
                "settled_seconds": round(settled - first, 2),
                "requests": self.requests_between(before, after,
                                                  "agent" if label == "agent" else "bare"),
                "enforcer_requests": self.requests_between(before, after, "enforcer"),
                "enforcer_cpu_seconds": round(cpu_seconds(self.enforcer.pid) - enforcer_cpu, 2),
                "kubesim_cpu_seconds": round(sum(self.kubesim_cpu()) - sum(server_cpu), 2)
                if self.server_pids else "n/a",
                "kubesim_cpu_seconds_by_cluster": dict(zip(
                    ("home", "remote"), (round(after - before, 2) for before, after in zip(
                        server_cpu, self.kubesim_cpu(), strict=True)), strict=False)),
                # the script itself (driver, watches, bare client) shares the machine too
                "script_cpu_seconds": round(time.process_time() - script_cpu, 2),
                "bare_objects_at_remote_at_start": bare_remote}
            if label == "agent":
                result["agent_start_to_first_shadowpod_s"] = round(first - self.agent.spawned, 2)
                result["converged_seconds"] = round(converged - first, 2)
                result["agent"] = self.agent.figures()
                # All its CPU since it started (listing both clusters included) over the pods.
                result["agent_cpu_ms_per_pod"] = round(
                    1000 * result["agent"]["cpu_seconds"] / count, 2)
                if self.args.agent_instructions:
                    result["agent_instructions_per_pod"] = round(
                        callgrind_instructions(self.agent.pid, self.directory) / count)
                if profiler is not None:
                    result["agent_profile"] = profiler.stop()
            results[label] = result
            if label == "bare":
                results["bare_removed_seconds"] = await self.remove_bare_pods()
        results["ratio"] = round(results["agent"]["pods_per_second"]
                                 / results["bare"]["pods_per_second"], 2)
        self.results["offloading"] = results

    async def remove_bare_pods(self) -> float:
        """Remove the bare client's pods (the latency scenario's too) and what was made for
        them at the remote, and wait until they are gone (seconds). Left in place, they made
        the agent's phase, which runs second, carry the bare client's phase's objects as well
        (on kubesim, every pass of Python's collector walks every stored object, and the
        passes grow with the heap)."""
        started = time.monotonic()
        timeout = 120 + self.args.pods / 20
        home_pods = core_path("pods", self.names.bare_namespace)
        remote = self.bare_remote_collections()
        # Pods at home at once (no kubelet would confirm their end); the remote pods go with
        # their ShadowPods (their owner), through the garbage collector and the kubelets.
        await self.home.request("DELETE", home_pods, {"gracePeriodSeconds": 0},
                                timeout=timeout)
        await self.remote.request("DELETE", remote["shadowpods"], timeout=timeout)
        await self.remote.request("DELETE", remote["secrets"], timeout=timeout)
        for api, path in ((self.home, home_pods), (self.remote, remote["shadowpods"]),
                          (self.remote, remote["pods"])):
            async def empty(api: ClusterApi = api, path: str = path) -> bool:
                return await count_objects(api, path) == 0
            await until_async(empty, timeout, f"{path} emptied")
        # Last, once the kubelets have recorded the pods' ends.
        await self.remote.request("DELETE", core_path("events", self.names.bare_twin),
                                  timeout=timeout)
        return round(time.monotonic() - started, 2)

    def bare_remote_collections(self) -> dict[str, str]:
        """The remote collections the bare client's path fills: its pods (the enforcer's),
        ShadowPods and token Secrets."""
        twin = self.names.bare_twin
        return {"pods": core_path("pods", twin), "shadowpods": custom_path(SHADOWPOD, twin),
                "secrets": core_path("secrets", twin)}

    async def configmaps(self) -> None:
        count = self.args.configmaps
        assert self.agent is not None
        results: dict[str, Any] = {}
        body = {"data": {"key": "x" * 64}}
        for label in ("bare", "agent"):
            names = [f"cm-{label}-{i}" for i in range(count)]
            before = self.counts()  # (after the home ConfigMaps are created, for the agent)
            if label == "agent":
                self.agent.stop()
                await gather_limited((functools.partial(
                    self.home.create, core_path("configmaps", self.names.namespace),
                    {"metadata": {"name": n}, **body}) for n in names), 32)
                before = self.counts()
                self.agent.start()
                twin = self.twin
            else:
                twin = self.names.bare_twin
                bare = self.api("remote", "bare")
                started = time.monotonic()  # its first write: the watch may show them late
                await gather_limited((functools.partial(
                    bare.create, core_path("configmaps", twin),
                    {"metadata": {"name": n}, **body}) for n in names), self.args.bare_lanes)
            done = await until(self.timeline.all_of(self.timeline.seen, "remote-configmaps",
                                                    twin, names), 60 + count / 5,
                               f"{count} {label} ConfigMaps at the remote", interval=0.2)
            first = min(self.timeline.seen[("remote-configmaps", twin, n)] for n in names)
            if label == "bare":
                first = min(first, started)
            results[label] = {
                "configmaps": count, "seconds": round(done - first, 2),
                "per_second": round(count / max(done - first, 1e-3), 1),
                "requests": self.requests_between(before, self.counts(), label)}
            if label == "agent":
                await until(self.agent_converged, 120, "the agent converged", interval=0.5)
                results[label]["agent"] = self.agent.figures()
        results["ratio"] = round(results["agent"]["per_second"] / results["bare"]["per_second"],
                                 2)
        self.results["configmaps"] = results

    async def restart(self) -> None:
        """--restarts kills and starts the agent that many times: the figures are the median
        run's (a restart at N = 50,000 varied by tens of percent from one run to the next on
        this machine), each run's beside them; the writes are all the runs'. With
        --compare-root the runs alternate between this tree's agent and another checkout's, and
        each tree's median is reported: an A/B comparison on the same clusters at the same
        hour (as scripts/bench_restart.py's, here with the Events and the reflected kinds)."""
        assert self.agent is not None
        checkouts = [ROOT, *([self.args.compare_root] if self.args.compare_root else [])]
        runs: list[dict[str, Any]] = []
        before = self.counts()
        profile = None
        for attempt in range(self.args.restarts):
            checkout = checkouts[attempt % len(checkouts)]
            self.agent.stop(kill=True)
            self.agent.start(checkout)
            profiler = (Profiler(self.agent.pid, self.directory / "agent-restart.pyspy.txt")
                        if self.args.profile and attempt == 0 else None)
            converged = await until(self.agent_converged, 300, "the restarted agent converged",
                                    interval=0.1)
            if profiler is not None:
                profile = profiler.stop()
            await asyncio.sleep(2)  # writes that trail the convergence are counted too
            runs.append({"converged_seconds": round(converged - self.agent.spawned, 2),
                         "agent": self.agent.figures(), "checkout": str(checkout)})
        if runs[-1]["checkout"] != str(ROOT):  # the scenarios after it run this tree's agent
            self.agent.stop(kill=True)
            self.agent.start()
            await until(self.agent_converged, 300, "the restarted agent converged",
                        interval=0.1)
        requests = self.requests_between(before, self.counts(), "agent")
        self.results["restart"] = {
            **_median_run(run for run in runs if run["checkout"] == str(checkouts[0])),
            "writes": non_heartbeat_writes(requests), "requests": requests, "runs": runs}
        if len(checkouts) > 1:
            self.results["restart"]["by_checkout"] = {
                str(checkout): _median_run(run for run in runs
                                           if run["checkout"] == str(checkout))
                for checkout in checkouts}
        if profile is not None:
            self.results["restart"]["agent_profile"] = profile

    async def idle(self) -> None:
        assert self.agent is not None and self.enforcer is not None
        before = self.counts()
        await asyncio.sleep(self.args.idle_seconds)
        requests = self.requests_between(before, self.counts(), "agent")
        per_minute = 60.0 / self.args.idle_seconds
        self.results["idle"] = {
            "seconds": self.args.idle_seconds,
            "writes_per_minute": scale(non_heartbeat_writes(requests), per_minute),
            "heartbeat_writes_per_minute": scale(heartbeat_writes(requests), per_minute),
            "requests": requests, "agent": self.agent.figures(),
            "enforcer": self.enforcer.figures(),
            # what the simulated clusters cost, holding everything the run made
            "kubesim_rss_mib": dict(zip(("home", "remote"), (
                round(proc_status(pid, "VmRSS"), 1) for pid in self.server_pids),
                strict=False))}

    async def storage(self) -> None:
        """The storage fabric: claims of the virtual class, each mounted by a pod the home
        scheduler places on the virtual node (WaitForFirstConsumer), to all Bound and Running."""
        assert self.agent is not None
        count, namespace = self.args.storage_pods, self.names.namespace
        try:
            await self.home.create(group_path("storage.k8s.io", "v1", "storageclasses"), {
                "metadata": {"name": VIRTUAL_STORAGE_CLASS},
                "provisioner": VIRTUAL_STORAGE_PROVISIONER, "reclaimPolicy": "Delete",
                "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True})
        except ApiError as error:
            if error.status != 409:
                raise
        names = [f"storage-{i}" for i in range(count)]
        pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [self.node]}]}]}}}

        def pod(name: str) -> dict[str, Any]:
            body = self.pod(name, self.node)
            del body["spec"]["nodeName"]  # the scheduler picks the node (and the volume's)
            body["spec"]["affinity"] = pinned
            body["spec"]["volumes"] = [{"name": "data",
                                        "persistentVolumeClaim": {"claimName": name}}]
            return body

        async def one(name: str) -> None:
            await self.home.create(core_path("persistentvolumeclaims", namespace), {
                "metadata": {"name": name}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "storageClassName": VIRTUAL_STORAGE_CLASS,
                    "resources": {"requests": {"storage": "1Gi"}}}})
            await self.home.create(core_path("pods", namespace), pod(name))

        before, agent_cpu = self.counts(), cpu_seconds(self.agent.pid)
        started = time.monotonic()
        await gather_limited((functools.partial(one, name) for name in names), 32)
        bound_at: list[float] = []

        def all_bound() -> bool:
            return bool(bound_at)

        async def poll_bound() -> None:
            while True:
                listed = await self.home.list(core_path("persistentvolumeclaims", namespace))
                if sum(1 for c in listed if c["metadata"]["name"].startswith("storage-")
                       and (c.get("status") or {}).get("phase") == "Bound") >= count:
                    bound_at.append(time.monotonic())
                    return
                await asyncio.sleep(0.5)

        poller = asyncio.create_task(poll_bound())
        try:
            await until(all_bound, self.phase_timeout(), f"{count} claims Bound at home",
                        interval=0.2)
        finally:
            poller.cancel()
        running = await until(self.timeline.all_of(self.timeline.running, "home-pods",
                                                   namespace, names), self.phase_timeout(),
                              f"{count} storage pods Running at home", interval=0.2)
        await until(self.agent_converged, 120 + count / 10, "the agent converged",
                    interval=0.5)
        cpu = cpu_seconds(self.agent.pid) - agent_cpu
        self.results["storage"] = {
            "claims": count, "bound_seconds": round(bound_at[0] - started, 2),
            "running_seconds": round(running - started, 2),
            "agent_cpu_seconds": round(cpu, 2),
            "agent_cpu_ms_per_claim": round(1000 * cpu / count, 1),
            "requests": self.requests_between(before, self.counts(), "agent"),
            "agent": self.agent.figures()}

    async def close(self) -> None:
        for task in self.background:  # (cleanup cancelled them already on given clusters)
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        for api in self.apis.values():
            await api.close()


def _writes(requests: dict[str, Any], heartbeat: bool) -> dict[str, int] | str:
    if any(not isinstance(v, dict) for v in requests.values()):
        return "n/a"
    return {cluster: sum(n for key, n in found["by_verb"].items()
                         if key.split("|")[0] in WRITE_VERBS
                         and (key.split("|")[1].split("/")[0] in HEARTBEAT_RESOURCES) == heartbeat)
            for cluster, found in requests.items()}


def non_heartbeat_writes(requests: dict[str, Any]) -> dict[str, int] | str:
    return _writes(requests, heartbeat=False)


def heartbeat_writes(requests: dict[str, Any]) -> dict[str, int] | str:
    return _writes(requests, heartbeat=True)


def scale(values: dict[str, int] | str, factor: float) -> dict[str, float] | str:
    return values if isinstance(values, str) else {
        k: round(v * factor, 1) for k, v in values.items()}


async def created(call: Awaitable[Any]) -> None:
    """A create whose 409 means an earlier attempt went through."""
    try:
        await call
    except ApiError as error:
        if error.status != 409:
            raise


async def readable(api: ClusterApi, path: str) -> bool:
    try:
        await api.get(path)
        return True
    except ApiError:
        return False


async def count_objects(api: ClusterApi, path: str) -> int:
    """How many objects a collection holds, from a list of one (its remainingItemCount)."""
    listed = await api.request("GET", path, query={"limit": 1}) or {}
    return len(listed.get("items") or []) + int(
        (listed.get("metadata") or {}).get("remainingItemCount") or 0)


async def until_async(condition: Callable[[], Awaitable[bool]], timeout: float,
                      what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.2)


# --- report --------------------------------------------------------------------------------------

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


def profile_rows(profile: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A phase's py-spy summary (`bench_profile.Profiler.stop`) as report rows."""
    if not profile:
        return []
    if "error" in profile:
        return [("  agent profile", profile["error"])]
    return [("  agent profile", f"{profile['samples']} samples: {profile['file']}"),
            *((f"  {what} {percent:5.1f} %", frame)
              for what in ("own", "total") for frame, percent in profile[what])]


def per_pod(requests: dict[str, Any], count: int) -> str:
    if any(not isinstance(v, dict) for v in requests.values()):
        return "n/a"
    return " ".join(f"{cluster} {v['requests'] / count:.2f} ({v['writes'] / count:.2f} writes)"
                    for cluster, v in sorted(requests.items()))


def writes_per_object(requests: dict[str, Any], count: int) -> str:
    """Writes per object by cluster, verb and resource (what each object costs)."""
    if any(not isinstance(v, dict) for v in requests.values()):
        return "n/a"
    return "; ".join(f"{cluster} " + ", ".join(
        f"{key} {n / count:.2f}" for key, n in sorted(v["by_verb"].items())
        if key.split("|")[0] in WRITE_VERBS and n >= count / 20)
        for cluster, v in sorted(requests.items()))


def table(results: dict[str, Any]) -> str:
    rows: list[tuple[str, str]] = []
    if "latency" in results:
        for label in ("agent", "bare"):
            found = results["latency"][label]
            for stage in ("bound_to_shadowpod", "shadowpod_to_remote_running",
                          "remote_running_to_shadowpod_status", "status_to_home_running",
                          "added"):
                p = found[stage]
                rows.append((f"latency {label} {stage}",
                             f"p50 {p.get('p50_ms')} ms, p90 {p.get('p90_ms')} ms, "
                             f"p99 {p.get('p99_ms')} ms"))
        agent_p50, bare_p50 = (results["latency"][label]["added"].get("p50_ms")
                               for label in ("agent", "bare"))
        if agent_p50 is not None and bare_p50 is not None:
            rows.append(("latency added by the agent over the bare client",
                         f"p50 {agent_p50 - bare_p50:.1f} ms (target ≤ 30 ms)"))
        trace = results["latency"].get("trace")
        for label in ("agent", "bare") if trace else ():
            for step, p in trace[label].items():
                rows.append((f"  {label} {step}", f"p50 {p.get('p50_ms')} ms, p90 "
                             f"{p.get('p90_ms')} ms"))
        if trace:
            stalled = trace["agent_loop_stalls"]
            rows.append(("  agent event loop stalls (> 2 ms)",
                         f"{stalled['count']}, {stalled['seconds']} s in all, longest "
                         f"{stalled['longest_ms']} ms"))
    if "offloading" in results:
        found = results["offloading"]
        for label in ("bare", "agent"):
            r = found[label]
            converged = (f"; everything reflected after {r['converged_seconds']} s"
                         if "converged_seconds" in r else "")
            rows.append((f"offloading {label}", f"{r['pods']} pods in {r['seconds']} s = "
                         f"{r['pods_per_second']} pods/s{converged}; every ShadowPod's "
                         f"status written after {r['settled_seconds']} s"))
            rows.append((f"  {label} requests/pod", per_pod(r["requests"], r["pods"])))
            rows.append((f"  {label} writes/pod", writes_per_object(r["requests"], r["pods"])))
            rows.append((f"  enforcer requests/pod ({label})",
                         per_pod(r["enforcer_requests"], r["pods"])
                         + f", enforcer CPU {r['enforcer_cpu_seconds']} s, kubesim CPU "
                         f"{r['kubesim_cpu_seconds']} s {r.get('kubesim_cpu_seconds_by_cluster')}"
                         f", this script's CPU "
                         f"{r.get('script_cpu_seconds', 'n/a')} s"))
        rows.append(("offloading ratio agent/bare", f"{found['ratio']} (target ≥ 0.5)"))
        agent = found["agent"]["agent"]
        rows.append(("agent after offloading", f"RSS {agent['rss_mib']} MiB (peak "
                     f"{agent['peak_rss_mib']}), CPU {agent['cpu_seconds']} s (system "
                     f"{agent.get('cpu_system_seconds')} s) = "
                     f"{found['agent'].get('agent_cpu_ms_per_pod')} ms/pod"))
        if "agent_instructions_per_pod" in found["agent"]:
            rows.append(("  agent instructions", f"{found['agent']['agent_instructions_per_pod']:,}"
                         " a pod (callgrind, from its start to convergence)"))
        rows.extend(profile_rows(found["agent"].get("agent_profile")))
    if "configmaps" in results:
        found = results["configmaps"]
        for label in ("bare", "agent"):
            r = found[label]
            rows.append((f"configmaps {label}", f"{r['configmaps']} in {r['seconds']} s = "
                         f"{r['per_second']}/s; requests/object "
                         f"{per_pod(r['requests'], r['configmaps'])}"))
        rows.append(("configmaps ratio agent/bare", str(found["ratio"])))
    if "storage" in results:
        r = results["storage"]
        rows.append(("storage", f"{r['claims']} claims Bound in {r['bound_seconds']} s, their "
                     f"pods Running in {r['running_seconds']} s; agent CPU "
                     f"{r['agent_cpu_ms_per_claim']} ms/claim; requests/claim "
                     f"{per_pod(r['requests'], r['claims'])}"))
    if "restart" in results:
        r = results["restart"]
        rows.append(("restart convergence", f"{r['converged_seconds']} s (target ≤ 30 s), "
                     f"non-heartbeat writes {r['writes']} (target 0)"))
        rows.append(("agent after restart", f"RSS {r['agent']['rss_mib']} MiB (peak "
                     f"{r['agent']['peak_rss_mib']}), CPU {r['agent']['cpu_seconds']} s"))
        if len(r.get("runs", ())) > 1:
            rows.append(("  each restart", ", ".join(
                f"{run['converged_seconds']} s (CPU {run['agent']['cpu_seconds']} s)"
                for run in r["runs"])))
        for checkout, median in r.get("by_checkout", {}).items():
            rows.append((f"  median of {checkout}", f"{median['converged_seconds']} s (CPU "
                         f"{median['agent']['cpu_seconds']} s)"))
        rows.extend(profile_rows(r.get("agent_profile")))
    if "idle" in results:
        r = results["idle"]
        rows.append(("idle writes/minute", f"{r['writes_per_minute']} (target 0), heartbeats "
                     f"{r['heartbeat_writes_per_minute']}"))
        rows.append(("agent idle", f"RSS {r['agent']['rss_mib']} MiB (target ≤ 250 MB with N "
                     f"pods and N objects), peak {r['agent']['peak_rss_mib']} MiB"))
        rows.append(("enforcer idle", f"RSS {r['enforcer']['rss_mib']} MiB, peak "
                     f"{r['enforcer']['peak_rss_mib']} MiB, CPU {r['enforcer']['cpu_seconds']} s"))
        if r.get("kubesim_rss_mib"):
            rows.append(("kubesim RSS", ", ".join(f"{side} {mib} MiB"
                                                  for side, mib in r["kubesim_rss_mib"].items())))
    if "streams" in results:
        r = results["streams"]
        rows.append(("streams open", f"{r['logs']} followed logs and {r['execs']} exec sessions "
                     f"on {r['pods']} pods, opened in {r['open_seconds']} s, "
                     f"{r['open_at_end']} open at the end"))
        for label in ("without", "with"):
            p = r[f"latency_{label}"]["added"]
            rows.append((f"latency agent added, {label} streams",
                         f"p50 {p.get('p50_ms')} ms, p90 {p.get('p90_ms')} ms, "
                         f"p99 {p.get('p99_ms')} ms"))
        rows.append(("  p50 change with the streams",
                     f"{r['added_p50_change_percent']} % (target < 10 %)"))
        e = r["exec_echo_round_trip"]
        rows.append(("exec echo round trip", f"p50 {e.get('p50_ms')} ms, p99 {e.get('p99_ms')} "
                     f"ms over {r['exec_echoes']} lines"))
        rows.append(("agent with the streams open", f"RSS {r['agent']['rss_mib']} MiB (before: "
                     f"{r['agent_before']['rss_mib']}), peak {r['agent']['peak_rss_mib']} MiB"))
    width = max(len(name) for name, _ in rows) if rows else 0
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


# --- main ----------------------------------------------------------------------------------------

SCENARIOS = ("latency", "offloading", "configmaps", "restart", "idle", "streams")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--configmaps", type=int, default=None, help="default: --pods")
    parser.add_argument("--latency-pods", type=int, default=200)
    parser.add_argument("--latency-rate", type=float, default=20.0,
                        help="pods created a second in the latency scenario")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--restarts", type=int, default=1,
                        help="times the restart scenario kills and starts the agent (its "
                             "figures: the median run's)")
    parser.add_argument("--compare-root", type=lambda v: Path(v).absolute(), default=None,
                        metavar="OTHER_CHECKOUT",
                        help="the restarts alternate between this tree's agent and the one of "
                             "another checkout (a `git worktree` of another commit), each "
                             "one's median reported: an A/B comparison at the same hour")
    parser.add_argument("--storage-pods", type=int, default=100,
                        help="claims (and one pod each) of the storage scenario")
    parser.add_argument("--stream-logs", type=int, default=100,
                        help="followed logs (kubectl logs -f) open in the streams scenario")
    parser.add_argument("--stream-execs", type=int, default=20,
                        help="exec sessions (kubectl exec -i ... cat) open in the streams "
                             "scenario, each echoing a line a second")
    parser.add_argument("--stream-pods", type=int, default=10,
                        help="offloaded pods the streams scenario's streams are spread over")
    parser.add_argument("--service-account-token", type=lambda v: v.lower() == "true",
                        default=True, metavar="true|false",
                        help="pods mount their service-account token (then the agent and the "
                             "bare client write a token Secret per pod)")
    parser.add_argument("--workers", type=int, default=10, help="the agent's --workers")
    parser.add_argument("--bare-lanes", type=int, default=16,
                        help="the bare client's concurrent requests (the limit it reaches)")
    parser.add_argument("--agent-flag", action="append", default=[],
                        help="an extra agent flag (repeat), e.g. --agent-flag=--redis-url=...")
    parser.add_argument("--enforcer-flag", action="append", default=[])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--kubesim-latency", default="0,0", metavar="WRITE_MS,WATCH_MS",
                        help="kubesim's writes wait WRITE_MS (a real server's etcd commit) and "
                             "its watch events WATCH_MS, e.g. 5,1 (kubesim/faults.py)")
    parser.add_argument("--trace", action="store_true",
                        help="run the agent traced (scripts/bench_trace.py), trace the "
                             "benchmark's own client too: the latency scenario then reports "
                             "where each path's time goes, step by step")
    parser.add_argument("--profile", action="store_true",
                        help="sample the agent with py-spy during the offloading phase and "
                             "the restart (its stacks in the run directory) and report the "
                             "functions it was in when it ran or could run")
    parser.add_argument("--agent-instructions", action="store_true",
                        help="run the agent under valgrind's callgrind and report the "
                             "instructions it ran a pod in the offloading phase (a figure that "
                             "does not drift with the machine; about 30 times slower)")
    parser.add_argument("--json", default="bench-offloading.json", help="results file")
    parser.add_argument("--serve-kubesim", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--cluster", choices=("home", "remote"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.restarts < 1:
        parser.error("--restarts must be at least 1")
    if args.configmaps is None:
        args.configmaps = args.pods
    write_ms, _, watch_ms = args.kubesim_latency.partition(",")
    args.kubesim_latency = (float(write_ms or 0) / 1000, float(watch_ms or 0) / 1000)
    return args


def _interrupted(*_: Any) -> None:
    raise KeyboardInterrupt


async def run(args: argparse.Namespace, directory: Path, served: dict[str, Any],
              names: Names) -> Bench:
    bench = Bench(args, directory, served["kubeconfigs"], served.get("remote_pod_cidr"),
                  served.get("pids", []), names)
    task = asyncio.current_task()
    assert task is not None
    # SIGTERM unwinds as Ctrl-C does (asyncio.run cancels on SIGINT): the cleanup below runs.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    if args.trace:  # the bare client's requests and the watches' events, as the agent's
        bench_trace.install((directory / "trace-bench.jsonl").open("a", buffering=1))
    try:
        await bench.check_capacity()
        try:
            await bench.setup()
            for scenario in args.scenarios.split(","):
                started = time.monotonic()
                await getattr(bench, scenario)()
                print(f"[{scenario} done in {time.monotonic() - started:.0f}s]", file=sys.stderr)
        finally:
            if bench.server_pids:  # its own kubesim goes with everything in it
                for component in (bench.agent, bench.enforcer):
                    if component is not None:
                        component.stop()
            else:
                print("[cleaning up]", file=sys.stderr)
                await bench.cleanup()
    finally:
        await bench.close()
    return bench


def start_kubesim(directory: Path, cluster: str,
                  args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """A kubesim cluster in a child process, and what it printed once serving."""
    log = directory / f"kubesim-{cluster}.log"
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve-kubesim", str(directory), "--cluster", cluster,
         "--pods", str(args.pods), "--latency-pods", str(args.latency_pods),
         "--stream-pods", str(args.stream_pods),
         "--kubesim-latency", ",".join(str(s * 1000) for s in args.kubesim_latency)],
        stdout=subprocess.PIPE, stderr=log.open("wb"))
    assert server.stdout is not None
    line = server.stdout.readline()  # ends with the process at the latest
    if not line:
        server.wait(30)
        raise SystemExit(f"error: kubesim {cluster} did not start (exit code "
                         f"{server.returncode}): see {log}")
    return server, json.loads(line)


def main() -> None:
    args = parse_args()
    if args.serve_kubesim:
        serve_kubesim(Path(args.serve_kubesim), remote_pods_needed(args), args.cluster,
                      args.kubesim_latency)
        return
    signal.signal(signal.SIGTERM, _interrupted)  # until the run's loop handles it
    # Ctrl-C interrupts a run (and its cleanup runs) also where SIGINT came ignored: a script's
    # background job inherits SIG_IGN, and asyncio.run then leaves SIGINT alone.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    directory = Path(tempfile.mkdtemp(prefix="bench-offloading-"))
    names = Names(uuid.uuid4().hex[:6])
    home, remote = os.environ.get("E2E_HOME_KUBECONFIG"), os.environ.get("E2E_REMOTE_KUBECONFIG")
    servers: list[subprocess.Popen[bytes]] = []
    try:
        if home and remote:
            served: dict[str, Any] = {"kubeconfigs": {"home": home, "remote": remote},
                                      "remote_pod_cidr": os.environ.get("E2E_REMOTE_POD_CIDR")}
        else:
            served = {"kubeconfigs": {}, "pids": []}
            for cluster in ("home", "remote"):
                server, answer = start_kubesim(directory, cluster, args)
                servers.append(server)
                served["kubeconfigs"][cluster] = answer["kubeconfig"]
                served["pids"].append(server.pid)
                served["remote_pod_cidr"] = answer["remote_pod_cidr"] or served.get(
                    "remote_pod_cidr")
        machine_before = machine()
        bench = asyncio.run(run(args, directory, served, names))
    except CapacityError as error:
        raise SystemExit(f"error: {error}") from None
    except (TimeoutError, ComponentExited, StreamEnded) as error:
        raise SystemExit(f"error: {error} (run {names.run}; logs: {directory})") from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise SystemExit(f"interrupted (run {names.run}; logs: {directory})") from None
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
        for server in servers:
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:  # a cluster of many GiB takes long to let go:
                server.kill()  # what it held is not wanted, the run's results are
    report = {"command": " ".join(sys.argv), "clusters": "kubesim" if servers else "real",
              "machine": {**machine_before, "load_average_after": [
                  round(x, 2) for x in os.getloadavg()]},
              "run_id": names.run, "logs": str(directory), **bench.results}
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"machine: {report['machine']}")
    print(table(bench.results))
    print(f"results: {args.json}; logs: {directory}")


if __name__ == "__main__":
    main()
