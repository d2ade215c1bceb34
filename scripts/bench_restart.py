"""What an agent restart with N offloaded pods spends its time on, and what it writes.

Two kubesim clusters in this process (every HTTP request counted), the test playing the remote
enforcer (the twin namespace accepted, every ShadowPod reported Running). A first agent, not
throttled, offloads N pods and copies their status home; once nothing is written any more it
is killed with SIGKILL and a new agent (default flags plus any given) is started, `--restarts`
times. For each restart: the seconds after spawning at which the process logged its start, the
home cluster was listed, the remote tenant namespace and the ShadowPods were listed, and it
converged (its /metrics: synced, an empty work queue, all N pods and ShadowPods mirrored); the
agent's CPU seconds and RSS then; the requests each cluster served until --settle seconds later,
the writes among them (Lease renewals apart: heartbeats, not convergence).

    python scripts/bench_restart.py [--pods 1000] [--configmaps 100] [--restarts 2]
        [--compare-root OTHER_CHECKOUT] [--redis] [--json out.json]
        [-- extra flags for restarted agents]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchkit import (
    ROOT,
    AgentProcess,
    SimCluster,
    drained,
    items,
    process_cpu_seconds,
    rss_megabytes,
    simulated_clusters,
)

from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.shadowpod import SHADOWPOD
from tests.helpers import wait_for
from tests.home_agent.play import extend, report_shadow_status
from tests.home_agent.test_pod_offloading import running_status
from tests.redis_server import redis_server

THREADS = 16
NAMESPACE = "bench"
SETUP_FLAGS = ("--workers", "32")
MILESTONES = {
    "started": "home agent",  # runner: "home agent A → B started (node …)"
    "home listed": "home cluster listed",
    "tenant listed": "remote tenant namespace listed",
    "ShadowPods listed": "ShadowPods listed",
}


@dataclass
class Restart:
    root: str
    flags: list[str]
    seconds: dict[str, float | None] = field(default_factory=dict)
    converged: float = 0.0
    reconciles: dict[str, float] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    rss_mb: float = 0.0
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    writes: dict[str, dict[str, int]] = field(default_factory=dict)


AGENT_QUEUED = 'annex_home_agent_controller_queued_keys{controller="agent"}'


def pod_body(name: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench"}},
            "spec": {"nodeName": node_name,
                     "containers": [{"name": "main", "image": "nginx:1"}],
                     "tolerations": [{"key": "virtual-node.liqo.io/not-allowed",
                                      "operator": "Exists", "effect": "NoExecute"}]}}


def pod_ip(index: int) -> str:
    return f"10.0.{index // 250}.{index % 250 + 1}"


def without_leases(counts: Counter[tuple[str, str]]) -> Counter[tuple[str, str]]:
    return Counter({key: n for key, n in counts.items() if key[1] != "leases"})


def total_writes(clusters: dict[str, SimCluster]) -> int:
    return sum(sum(without_leases(c.requests.written).values()) for c in clusters.values())


def wait_quiet(clusters: dict[str, SimCluster], quiet: float, timeout: float) -> None:
    """Until no cluster has served a write (Leases apart) for `quiet` seconds."""
    last, since = total_writes(clusters), time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise TimeoutError("the agent kept writing")
        time.sleep(0.2)
        now = total_writes(clusters)
        if now != last:
            last, since = now, time.monotonic()


def set_up(clusters: dict[str, SimCluster], agent: AgentProcess, pods: int,
           configmaps: int) -> str:
    """N pods offloaded and Running at home, M ConfigMaps reflected; returns the twin."""
    home, remote = clusters["home"], clusters["remote"]
    home.core.create_namespace({"metadata": {"name": NAMESPACE}})
    twin = extend(home, remote, agent, NAMESPACE)  # type: ignore[arg-type]
    started = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: drained(home.core.create_namespaced_config_map(NAMESPACE, {
            "metadata": {"name": f"cm{i}"}, "data": {"key": f"value {i}"}},
            _preload_content=False)), range(configmaps)))
        list(pool.map(lambda i: drained(home.core.create_namespaced_pod(
            NAMESPACE, pod_body(f"p{i}", agent.node_name), _preload_content=False)),
            range(pods)))
        wait_for(lambda: agent.metrics().get("annex_home_agent_shadow_pods") == pods,
                 timeout=60 + pods / 10, interval=0.5, message="every ShadowPod created")
        list(pool.map(lambda i: report_shadow_status(
            remote, twin, f"p{i}", running_status(pod_ip(i))), range(pods)))  # type: ignore
    def running() -> int:
        listed = items(home.core.list_namespaced_pod(NAMESPACE, _preload_content=False))
        return sum(1 for pod in listed if pod["status"].get("phase") == "Running")

    def reflected() -> int:
        return len(items(remote.core.list_namespaced_config_map(twin, _preload_content=False)))

    wait_for(lambda: running() == pods, timeout=60 + pods / 10, interval=2,
             message="every home pod Running")
    wait_for(lambda: reflected() >= configmaps, timeout=60 + configmaps / 10, interval=1,
             message="every ConfigMap reflected")
    wait_quiet(clusters, quiet=8, timeout=300)
    print(f"set-up: {pods} pods offloaded and Running, {configmaps} ConfigMaps reflected "
          f"in {time.monotonic() - started:.0f}s", file=sys.stderr)
    return twin


def measure_restart(clusters: dict[str, SimCluster], agent: AgentProcess, pods: int,
                    timeout: float, settle: float) -> Restart:
    before = {name: c.requests.snapshot() for name, c in clusters.items()}
    agent.start()
    result = Restart(root=str(agent.root), flags=list(agent.flags))
    deadline = time.monotonic() + timeout
    while True:
        samples = agent.metrics()
        converged = (samples.get("annex_home_agent_synced") == 1
                     and samples.get(AGENT_QUEUED) == 0
                     and samples.get("annex_home_agent_pods") == pods
                     and samples.get("annex_home_agent_shadow_pods") == pods)
        if converged:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no convergence: {samples}")
        time.sleep(0.05)
    result.converged = time.time() - agent.started
    result.cpu_seconds = process_cpu_seconds(agent.pid)
    result.rss_mb = rss_megabytes(agent.pid)
    time.sleep(settle)  # requests and writes counted until then: reflection's queues included
    result.reconciles = {k.split("{", 1)[1].rstrip("}"): v for k, v in samples.items()
                         if k.startswith("annex_home_agent_reconciles")}
    result.seconds = {label: agent.first(text) for label, text in MILESTONES.items()}
    for name, cluster in clusters.items():
        requests, written = cluster.requests.snapshot()
        served, accepted = requests - before[name][0], written - before[name][1]
        result.requests[name] = {f"{verb} {resource}": n for (verb, resource), n
                                 in sorted(served.items())}
        result.writes[name] = {f"{verb} {resource}": n for (verb, resource), n
                               in sorted(without_leases(accepted).items())}
    return result


class NoWrites:
    """A cluster client for an agent that must not need one: every call is counted, refused."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        async def refuse(*_: Any, **__: Any) -> Any:
            self.calls[name] += 1
            raise RuntimeError(f"{name}: no API calls in this measurement")
        return refuse


def reconcile_pass_cost(clusters: dict[str, SimCluster], agent: AgentProcess,
                        twin: str) -> dict[str, float]:
    """The CPU a restarted agent spends on its first pass over N unchanged pod keys once both
    sides are listed: what a cache of the last-synced state (in Redis or anywhere) could save
    at most. In this process, the mirrors filled from live listings of both clusters, every pod
    reconciled once on one loop; the agent's configuration parsed from its own flags."""
    from home_agent.agent import Agent
    from home_agent.config import parse_config
    from home_agent.pod import PodOffloader

    home, remote = clusters["home"], clusters["remote"]
    config = parse_config(["--remote-kubeconfig", str(remote.kubeconfig),
                           "--cluster-id", agent.home_id,
                           "--remote-cluster-id", agent.remote_id, *agent.flags])
    home_api, remote_api = NoWrites(), NoWrites()
    state = Agent(config, home_api, remote_api)  # type: ignore[arg-type]
    d = SHADOWPOD
    listings = [
        (state.mirrors.pods, home.core.list_namespaced_pod(NAMESPACE, _preload_content=False)),
        (state.mirrors.shadow_pods, remote.custom.list_namespaced_custom_object(
            d.group, d.version, twin, d.plural, _preload_content=False)),
        (state.mirrors.namespace_maps, remote.custom.list_namespaced_custom_object(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, agent.tenant_namespace,
            NAMESPACE_MAP.plural, _preload_content=False)),
        (state.mirrors.nodes, home.core.list_node(_preload_content=False)),
    ]
    for mirror, response in listings:
        for obj in items(response):
            mirror.apply(None, obj)
    offloader = PodOffloader(state)
    keys = state.mirrors.pods.keys()

    async def reconcile_all() -> float:
        started = time.process_time()
        for namespace, name in keys:
            await offloader.reconcile(namespace, name)
        return time.process_time() - started

    try:
        seconds = min(asyncio.run(reconcile_all()) for _ in range(3))
    except Exception as error:  # noqa: BLE001 - reported; the restart figures stand alone
        print(f"reconcile pass not measured: {error!r}", file=sys.stderr)
        seconds = float("nan")
    return {"keys": len(keys), "cpu_seconds": seconds,
            "ms_per_key": 1000 * seconds / max(1, len(keys)),
            "api_calls": sum(home_api.calls.values()) + sum(remote_api.calls.values())}


def report(pods: int, configmaps: int, restarts: list[Restart]) -> None:
    print(f"agent restart with {pods} offloaded pods and {configmaps} reflected ConfigMaps "
          f"(seconds after spawning the process)")
    header = ["agent", *MILESTONES, "converged", "CPU s", "RSS MB", "requests", "writes"]
    print(" | ".join(header))
    for run in restarts:
        requests = sum(sum(r.values()) for r in run.requests.values())
        written = sum(sum(w.values()) for w in run.writes.values())
        cells = [" ".join([run.root, *run.flags]),
                 *(f"{run.seconds[m]:.1f}" if run.seconds[m] is not None else "-"
                   for m in MILESTONES),
                 f"{run.converged:.1f}", f"{run.cpu_seconds:.1f}", f"{run.rss_mb:.0f}",
                 str(requests), str(written)]
        print(" | ".join(cells))
        for name in run.requests:
            print(f"  {name}: {run.requests[name]}")
            if run.writes[name]:
                print(f"  {name} WRITES: {run.writes[name]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--configmaps", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds after convergence still counted for requests and writes")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds a restarted agent has to converge")
    parser.add_argument("--compare-root", type=Path, default=None,
                        help="another source tree (e.g. an experiment's checkout): restarts "
                             "alternate between this tree's agent and that one's")
    parser.add_argument("--redis", action="store_true",
                        help="start a redis-server; the first agent and every second restarted "
                             "one run with --redis-url (the cache of converged pods)")
    parser.add_argument("--json", type=Path, default=None)
    args, agent_flags = parser.parse_known_args()
    agent_flags = [f for f in agent_flags if f != "--"]
    logs = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    with simulated_clusters("home", "remote") as clusters, ExitStack() as stack:
        redis_flags = (["--redis-url", stack.enter_context(redis_server())] if args.redis
                       else [])

        def agent(index: int, flags: tuple[str, ...] | list[str],
                  root: Path = ROOT) -> AgentProcess:
            return AgentProcess(clusters["home"], clusters["remote"], "bench-home",
                                "bench-remote", logs / f"agent-{index}.log", flags, root=root)

        roots = [ROOT] if args.compare_root is None else [ROOT, args.compare_root.resolve()]

        first = agent(0, [*SETUP_FLAGS, *redis_flags]).prepare().start()
        try:
            twin = set_up(clusters, first, args.pods, args.configmaps)
        finally:
            first.kill()
        results = []
        for index in range(1, args.restarts + 1):
            flags = [*agent_flags, *(redis_flags if index % 2 == 0 else [])]
            restarted = agent(index, flags, roots[(index - 1) % len(roots)])
            try:
                results.append(measure_restart(clusters, restarted, args.pods, args.timeout,
                                               args.settle))
            finally:
                restarted.kill()
        cost = reconcile_pass_cost(clusters, agent(0, agent_flags), twin)
    report(args.pods, args.configmaps, results)
    print(f"first reconcile pass over {cost['keys']} unchanged pods, in process, after both "
          f"listings: {cost['cpu_seconds']:.2f} CPU s ({cost['ms_per_key']:.2f} ms a key, "
          f"{cost['api_calls']} API calls)")
    print(f"agent logs in {logs}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"pods": args.pods, "configmaps": args.configmaps,
                                         "reconcile_pass": cost,
                                         "restarts": [asdict(r) for r in results]}, indent=1))


if __name__ == "__main__":
    main()
