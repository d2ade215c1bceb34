"""fragmented (by name only: --scenarios fragmented): the "black hole", measured. Every node the
provider offers is left FREE_CPU cpu free by a provider pod of its own requesting the rest (a
filler, bound to it): the virtual node's allocatable sums them, a "large" pod (SIZES: 3 cpu) fits
that sum and no single node, a "small" one (500m) fits any node. In a namespace offloaded
LocalAndRemote, with the agent's pod webhook registered as the home-agent chart registers it
(failurePolicy Ignore), a Deployment of --fragmented-replicas pods and --fragmented-bare bare
pods (no controller) of each size prefer the virtual node (a preferred node affinity) and may
run on a home node.

1. While the agent is away (stopped, as during its upgrade: the webhook cannot judge them)
   they are created and bound to the virtual node; then the agent starts. Each of these pods
   ends in one outcome: offloaded (Running remotely), returned (deleted by the agent with a
   ReturnedToScheduler Event: its replacement, kept off the virtual node by the webhook, runs
   at home), held (Pending at home, reason OffloadingBackOff), home (the scheduler bound it to
   a home node: the virtual node was full), silent (bound to the virtual node, neither Running
   nor held: Pending remotely or not offloaded without a word; must be 0), other (anything
   else). `settled_seconds`: from the agent's start until every pod is Running or held.
2. With the agent serving, each Deployment is scaled up by --fragmented-replicas: its new
   pods' outcomes too, kept_off being a pod the webhook kept off the virtual node at its
   creation, Running at home.
At the remote: ShadowPods ever made for large pods and remote pods not Running (both must be
0).

It runs on the clusters it is given too (E2E_HOME_KUBECONFIG, E2E_REMOTE_KUBECONFIG): it
fragments with pods (it needs no kubesim hook); the home API server must reach the agent's
webhook (E2E_AGENT_ADDRESS), and the home nodes must have room for the large pods (it refuses to
start otherwise). On kubesim the remote has at least --fragmented-nodes worker nodes.
A scenario reports; it asserts nothing of its outcomes."""

from __future__ import annotations

import time
from collections import Counter
from decimal import Decimal
from typing import Any

from annex.api_paths import core_path, custom_path, group_path
from bench import components
from bench.api_calls import created
from bench.clusters import CapacityError, schedulable
from bench.figures import Rows
from bench.harness import MUTATING_WEBHOOKS, Bench
from bench.watching import until_async
from shared.api.shadowpod import SHADOWPOD
from shared.forge.node import max_pod_resources_of
from shared.offer import node_allocatable, node_is_schedulable, pod_reservation
from shared.quantity import format_quantity, parse_quantity
from shared.wellknown import (
    OFFLOADING_BACKOFF_REASON,
    RETURNED_TO_SCHEDULER_REASON,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
    VIRTUAL_NODE_TAINT_KEY,
)

FREE_CPU = Decimal(2)
"""What each provider node is left."""
SIZES = {"small": Decimal("0.5"), "large": Decimal(3)}
"""The pods' cpu requests: a small one fits a node, a large one only their sum."""
SIZE_LABEL = "bench.annex/size"
OUTCOMES = ("offloaded", "returned", "held", "kept_off", "home", "silent", "other")


async def fragment(bench: Bench) -> dict[str, str]:
    """A filler pod on each node the provider offers, requesting what the node has free but
    FREE_CPU: node → the filler's cpu (nodes with no more than FREE_CPU free get none)."""
    remote = bench.remote
    await created(remote.create(core_path("namespaces"),
                                {"metadata": {"name": bench.names.fillers}}))
    nodes = [node for node in await remote.list(core_path("nodes")) if node_is_schedulable(node)]
    taken: dict[str, Decimal] = {}
    for pod in await remote.list(core_path("pods")):
        if (reservation := pod_reservation(pod)) is not None:
            node_name, requests = reservation
            taken[node_name] = taken.get(node_name, Decimal(0)) + requests.get("cpu", Decimal(0))
    fillers = {}
    for node in nodes:
        name = node["metadata"]["name"]
        filler = (node_allocatable(node).get("cpu", Decimal(0)) - taken.get(name, Decimal(0))
                  - FREE_CPU)
        if filler <= 0:
            continue
        fillers[name] = format_quantity(filler)
        await remote.create(core_path("pods", bench.names.fillers), {
            "metadata": {"name": f"filler-{len(fillers)}"},
            "spec": {"nodeName": name, "tolerations": [{"operator": "Exists"}],
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": fillers[name]}}}]}})
    return fillers


async def check_home_room(bench: Bench) -> None:
    """Refuse to start when the home nodes (but the virtual ones) cannot run the large pods the
    webhook keeps off the virtual node (twice the replicas): they would stay Pending there."""
    nodes = [node for node in await bench.home.list(core_path("nodes")) if schedulable(node)]
    taken: dict[str, Decimal] = {}
    for pod in await bench.home.list(core_path("pods")):
        if (reservation := pod_reservation(pod)) is not None:
            name, requests = reservation
            taken[name] = taken.get(name, Decimal(0)) + requests.get("cpu", Decimal(0))
    room = sum(int((node_allocatable(node).get("cpu", Decimal(0))
                    - taken.get(node["metadata"]["name"], Decimal(0))) // SIZES["large"])
               for node in nodes)
    wanted = 2 * int(bench.args.fragmented_replicas)
    if room < wanted:
        raise CapacityError(
            f"the home nodes have room for {room} pods of {SIZES['large']} cpu and the "
            f"fragmented scenario needs {wanted} (twice --fragmented-replicas) there: lower "
            f"--fragmented-replicas")


def pod_spec(bench: Bench, size: str) -> dict[str, Any]:
    """Preferring the virtual node, tolerating it, kept off the bare client's node (which runs
    nothing)."""
    spec: dict[str, Any] = {
        "tolerations": [{"key": VIRTUAL_NODE_TAINT_KEY, "operator": "Exists"}],
        "affinity": {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
                "matchExpressions": [{"key": TYPE_LABEL, "operator": "In",
                                      "values": [TYPE_VIRTUAL_NODE]}]}}],
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn",
                                      "values": [bench.names.bare_node]}]}]}}},
        "containers": [{"name": "main", "image": "nginx:1.25", "resources": {
            "requests": {"cpu": format_quantity(SIZES[size])}}}]}
    if not bench.args.service_account_token:
        spec["automountServiceAccountToken"] = False
    return spec


async def create_workload(bench: Bench) -> None:
    namespace, replicas = bench.names.fragmented, bench.args.fragmented_replicas
    for size in SIZES:
        labels = {SIZE_LABEL: size}
        await bench.home.create(group_path("apps", "v1", "deployments", namespace), {
            "metadata": {"name": size},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": pod_spec(bench, size)}}})
        for index in range(bench.args.fragmented_bare):
            await bench.home.create(core_path("pods", namespace), {
                "metadata": {"name": f"{size}-bare-{index}", "labels": labels},
                "spec": pod_spec(bench, size)})


def expected_pods(bench: Bench, replicas: int) -> int:
    return len(SIZES) * (replicas + int(bench.args.fragmented_bare))


def live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]


def held(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("reason") == OFFLOADING_BACKOFF_REASON


def running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def kept_off(pod: dict[str, Any], node: str) -> bool:
    """The webhook's mark: the virtual node excluded by name from its required affinity."""
    terms = ((((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    return bool(terms) and all(
        any(r.get("key") == "kubernetes.io/hostname" and r.get("operator") == "NotIn"
            and node in (r.get("values") or []) for r in term.get("matchExpressions") or [])
        for term in terms)


def outcome(pod: dict[str, Any] | None, returned: bool, node: str) -> str:
    """What became of a pod: `pod` as it is now (None: gone), `returned` whether the agent
    recorded giving it back."""
    if pod is None:
        return "returned" if returned else "other"
    if pod["spec"].get("nodeName") == node:
        return "offloaded" if running(pod) else "held" if held(pod) else "silent"
    if not running(pod):
        return "other"
    return "kept_off" if kept_off(pod, node) else "home"


async def settle(bench: Bench, replicas: int, started: float, timeout: float) -> float | None:
    """Seconds from `started` until the namespace holds the pods it should, none terminating,
    each Running or held; None when that did not come within `timeout` (what is unsettled is
    then reported as it is)."""
    path, wanted = core_path("pods", bench.names.fragmented), expected_pods(bench, replicas)

    async def settled() -> bool:
        pods = await bench.home.list(path)
        return (len(pods) == len(live(pods)) == wanted
                and all(running(pod) or held(pod) for pod in pods))
    try:
        await until_async(settled, timeout, "the fragmented scenario's pods Running or held")
    except TimeoutError:
        return None
    return round(time.monotonic() - started, 2)


async def returned_uids(bench: Bench) -> set[str]:
    return {str((event.get("involvedObject") or {}).get("uid"))
            for event in await bench.home.list(core_path("events", bench.names.fragmented))
            if event.get("reason") == RETURNED_TO_SCHEDULER_REASON}


def tally(pods: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]], returned: set[str],
          node: str) -> dict[str, dict[str, int]]:
    """Per size, the outcomes of `pods` (uid → the pod as first seen) given the pods `now`."""
    counts: dict[str, Counter[str]] = {size: Counter() for size in SIZES}
    for uid, pod in pods.items():
        size = pod["metadata"]["labels"][SIZE_LABEL]
        counts[size][outcome(now.get(uid), uid in returned, node)] += 1
    return {size: {name: found[name] for name in OUTCOMES} for size, found in counts.items()}


async def pods_by_uid(bench: Bench) -> dict[str, dict[str, Any]]:
    return {pod["metadata"]["uid"]: pod
            for pod in live(await bench.home.list(core_path("pods", bench.names.fragmented)))}


async def run(bench: Bench) -> dict[str, Any]:
    agent, names, node = bench.agent, bench.names, bench.node
    assert agent is not None
    replicas = bench.args.fragmented_replicas
    await check_home_room(bench)
    fillers = await fragment(bench)
    await created(bench.home.create(core_path("namespaces"),
                                    {"metadata": {"name": names.fragmented}}))
    twin = await bench.offload(names.fragmented, "LocalAndRemote")
    bench.twins.append(twin)
    address = components.agent_address(bench.kubeconfigs["home"])
    await created(bench.home.create(MUTATING_WEBHOOKS, components.pod_webhook(
        names.pod_webhook, f"https://{address}:{bench.ports['webhook']}", bench.pod_webhook_ca,
        names.fragmented)))
    needed = sum((size * (replicas + bench.args.fragmented_bare) for size in SIZES.values()),
                 Decimal(0))
    seen: dict[str, Any] = {}

    async def fragmented() -> bool:  # as the virtual node says it: what one pod can get
        seen.update(await bench.home.get(core_path("nodes", name=node)))
        most = max_pod_resources_of(seen).get("cpu")
        return most is not None and parse_quantity(most) <= FREE_CPU and parse_quantity(
            seen["status"]["allocatable"]["cpu"]) >= needed
    try:
        await until_async(fragmented, 120, "the virtual node")
    except TimeoutError:
        raise TimeoutError(
            f"timed out waiting for {node} to say one pod gets at most {FREE_CPU} cpu and to "
            f"offer {needed} (raise --fragmented-nodes); it says "
            f"{max_pod_resources_of(seen).get('cpu')} and "
            f"{(seen.get('status') or {}).get('allocatable', {}).get('cpu')}") from None
    largest = max_pod_resources_of(seen)["cpu"]
    allocatable = seen["status"]["allocatable"]["cpu"]

    agent.stop()  # away: the webhook cannot judge what is made now (failurePolicy Ignore)
    await create_workload(bench)
    wanted = expected_pods(bench, replicas)

    async def bound() -> bool:
        pods = await bench.home.list(core_path("pods", names.fragmented))
        return len(pods) == wanted and all(pod["spec"].get("nodeName") for pod in pods)
    await until_async(bound, 60, f"{wanted} pods bound while the agent is away")
    away = await pods_by_uid(bench)
    agent.start()
    timeout = 120 + wanted
    settled = await settle(bench, replicas, agent.spawned, timeout)
    now = await pods_by_uid(bench)
    returned = await returned_uids(bench)
    made = {uid: pod for uid, pod in now.items() if uid not in away}

    for size in SIZES:
        await bench.home.patch(group_path("apps", "v1", "deployments", names.fragmented, size),
                               {"spec": {"replicas": 2 * replicas}})
    scaled_at = time.monotonic()
    scaled_settled = await settle(bench, 2 * replicas, scaled_at, timeout)
    later = await pods_by_uid(bench)
    scaled = {uid: pod for uid, pod in later.items() if uid not in away and uid not in made}
    returned |= await returned_uids(bench)

    large = {pod["metadata"]["name"] for pod in [*away.values(), *later.values(), *now.values()]
             if pod["metadata"]["labels"][SIZE_LABEL] == "large"}
    shadows = await bench.remote.list(custom_path(SHADOWPOD, twin))
    remote_pods = await bench.remote.list(core_path("pods", twin))
    results: dict[str, Any] = {
        "nodes_fragmented": len(fillers), "free_cpu_per_node": format_quantity(FREE_CPU),
        "virtual_node_cpu": allocatable, "one_pod_cpu": largest,
        "sizes_cpu": {size: format_quantity(cpu) for size, cpu in SIZES.items()},
        "while_agent_away": tally(away, later, returned, node),
        "replacements": tally(made, later, returned, node),
        "agent_serving": tally(scaled, later, returned, node),
        "settled_seconds": settled, "scaled_settled_seconds": scaled_settled,
        "large_shadowpods": sum(1 for s in shadows if s["metadata"]["name"] in large),
        "remote_pods_not_running": sum(1 for pod in remote_pods if not running(pod))}
    results["silent"] = sum(counts["silent"] for phase in (
        "while_agent_away", "replacements", "agent_serving")
        for counts in results[phase].values()) + results["remote_pods_not_running"]
    await bench.home.delete(f"{MUTATING_WEBHOOKS}/{names.pod_webhook}")
    return results


def remote_pods(args: Any) -> int:
    """The fillers (one a node) and the small pods offloaded."""
    return int(args.fragmented_nodes) + 2 * int(args.fragmented_replicas) + int(
        args.fragmented_bare)


def _seconds(seconds: float | None) -> str:
    return "not all by the deadline" if seconds is None else f"{seconds} s"


def _outcomes(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items() if n) or "none"


def rows(result: dict[str, Any]) -> Rows:
    found: Rows = [("fragmented", f"{result['nodes_fragmented']} provider nodes left "
                    f"{result['free_cpu_per_node']} cpu free each: the virtual node offers "
                    f"{result['virtual_node_cpu']} cpu, one pod gets {result['one_pod_cpu']}; "
                    f"pods of {', '.join(f'{s} {c} cpu' for s, c in result['sizes_cpu'].items())}")]
    for phase, what in (("while_agent_away", "made while the agent was away"),
                        ("replacements", "their controllers' replacements"),
                        ("agent_serving", "scaled up with the agent serving")):
        for size, counts in result[phase].items():
            found.append((f"  {size} {what}", _outcomes(counts)))
    found.append(("  Running or held", f"{_seconds(result['settled_seconds'])} after the "
                  f"agent's start, {_seconds(result['scaled_settled_seconds'])} after the "
                  f"scale-up"))
    found.append(("  Pending remotely, silent", f"{result['silent']} (large pods' ShadowPods "
                  f"{result['large_shadowpods']}, remote pods not Running "
                  f"{result['remote_pods_not_running']})"))
    return found
