"""pools (by name only: --scenarios pools): a provider of two node pools, each the consumer's own
virtual node. The remote's schedulable nodes are split in two halves, labelled
`bench.annex/pool-<run>`: `general` (their cpu and memory) and `gpu`, whose nodes also advertise
GPU (`nvidia.com/gpu` in their status, as a device plugin makes it appear: as many as the
scenario's GPU pods need, twice over, since the offer lends a share). The enforcer is restarted
with the two pools (`--offer-pool`, `--offer-extended-resources nvidia.com/gpu`) and the agent
makes a node of each, `<virtual node>-general` and `<virtual node>-gpu`.

In an offloaded namespace, --pools-pods pods are created at once, half of them requesting one
GPU (nothing else steers them: they may go to any pool's node, and only the gpu one has GPUs),
the other half plain pods kept off the gpu pool as a GPU taint would keep them (a required
affinity on the pool label: a pool's virtual node has no taint of its own). The home scheduler
places them. Per pool: the pods placed on its virtual node, those offloaded (Running at the
remote) and the offloading rate (pods over the seconds from the first create until the pool's
last pod Running remotely), and the pods that ran on a provider node outside their pool (must
be 0).

At its end the pods go, the enforcer is restarted as it was and the nodes are given back their
labels and status (also when the run fails: the harness restores them at cleanup). It runs on
the clusters it is given too (E2E_HOME_KUBECONFIG, E2E_REMOTE_KUBECONFIG), with at least two
schedulable remote nodes; on kubesim the remote has at least --pools-nodes worker nodes.
A scenario reports; it asserts nothing of its outcomes."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from decimal import Decimal
from typing import Any

from annex.api_errors import ApiError
from annex.api_paths import core_path
from annex.kubeapi import JSON_PATCH
from bench.api_calls import created
from bench.clusters import CapacityError, schedulable
from bench.figures import Rows
from bench.harness import TOLERATIONS, Bench
from bench.names import POOLS
from bench.watching import gather_limited, until_async
from shared.forge.node import pool_node_name
from shared.quantity import format_quantity, parse_quantity
from shared.wellknown import POOL_LABEL

GPU = "nvidia.com/gpu"
POOL_OF_POD = "bench.annex/pool"
"""On each pod: the pool its requests steer it to."""


def pool_label(bench: Bench) -> str:
    """The label of the remote nodes that says their pool (one per run: runs never meet)."""
    return f"bench.annex/pool-{bench.names.run}"


def enforcer_flags(bench: Bench) -> tuple[str, ...]:
    key = pool_label(bench)
    return ("--offer-extended-resources", GPU,
            *(flag for pool in POOLS for flag in ("--offer-pool", f"{pool}={key}={pool}")))


def gpu_pods(bench: Bench) -> int:
    return int(bench.args.pools_pods) // 2


def _escaped(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


async def split_nodes(bench: Bench) -> dict[str, str]:
    """The remote's schedulable nodes, half in each pool (node → pool), labelled; the gpu
    pool's advertising GPUs. Each change is registered for the harness to undo at cleanup."""
    nodes = sorted(node["metadata"]["name"]
                   for node in await bench.remote.list(core_path("nodes")) if schedulable(node))
    if len(nodes) < 2:
        raise CapacityError(f"the pools scenario needs two schedulable remote nodes at least "
                            f"(one per pool); the remote has {len(nodes)}")
    half = len(nodes) // 2
    pools = {name: POOLS[0] if index < half else POOLS[1] for index, name in enumerate(nodes)}
    gpus = str(-(-2 * gpu_pods(bench) // (len(nodes) - half)) + 1)
    key = pool_label(bench)
    for name, pool in pools.items():
        path = core_path("nodes", name=name)
        bench.restore.append((bench.remote, f"the pool label of node {name}", functools.partial(
            bench.remote.patch, path, {"metadata": {"labels": {key: None}}})))
        await bench.remote.patch(path, {"metadata": {"labels": {key: pool}}})
        if pool == "gpu":  # capacity and allocatable, as a kubelet reports a device plugin's
            bench.restore.append((bench.remote, f"the GPUs of node {name}", functools.partial(
                bench.remote.patch, f"{path}/status",
                [{"op": "remove", "path": f"/status/{field}/{_escaped(GPU)}"}
                 for field in ("capacity", "allocatable")], JSON_PATCH)))
            await bench.remote.patch(f"{path}/status", [
                {"op": "add", "path": f"/status/{field}/{_escaped(GPU)}", "value": gpus}
                for field in ("capacity", "allocatable")], JSON_PATCH)
    return pools


async def restore(bench: Bench) -> None:
    """The provider's nodes as they were (the steps registered, run last first)."""
    while bench.restore:
        _, _, step = bench.restore.pop()
        try:
            await step()
        except ApiError as error:
            if error.status not in (404, 422):  # gone, or the GPUs already removed
                raise


POD_CPU = Decimal("0.1")
"""Each pod's cpu request."""


def pod(bench: Bench, name: str, pool: str) -> dict[str, Any]:
    requests = {"cpu": format_quantity(POD_CPU), "memory": "64Mi",
                **({GPU: "1"} if pool == "gpu" else {})}
    term = ({"key": POOL_LABEL, "operator": "Exists"} if pool == "gpu"
            else {"key": POOL_LABEL, "operator": "In", "values": [pool]})
    spec: dict[str, Any] = {
        "tolerations": TOLERATIONS,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [term]}]}}},
        "containers": [{"name": "main", "image": "nginx:1.25",
                        "resources": {"requests": requests, "limits": requests}}]}
    if not bench.args.service_account_token:
        spec["automountServiceAccountToken"] = False
    return {"metadata": {"name": name, "labels": {POOL_OF_POD: pool}}, "spec": spec}


async def pool_nodes_ready(bench: Bench) -> None:
    """Until each pool's virtual node is schedulable and offers its pods room (the gpu one its
    GPUs)."""
    seen: dict[str, Any] = {}

    async def ready() -> bool:
        for pool in POOLS:
            seen[pool] = await bench.home.find(core_path(
                "nodes", name=pool_node_name(bench.node, pool))) or {}
        gpu = seen["gpu"]
        return all(node and not node["spec"].get("unschedulable") for node in seen.values()) \
            and int(((gpu.get("status") or {}).get("allocatable") or {}).get(GPU, 0)) \
            >= gpu_pods(bench)
    await until_async(ready, 120, f"the virtual nodes of pools {', '.join(POOLS)}")
    for pool, wanted in (("gpu", gpu_pods(bench)),
                         ("general", int(bench.args.pools_pods) - gpu_pods(bench))):
        cpu = parse_quantity(((seen[pool].get("status") or {}).get("allocatable") or {})
                             .get("cpu", "0"))
        if cpu < wanted * POD_CPU:  # the rest would stay Pending at home: no rate to measure
            raise CapacityError(
                f"the {pool} pool's virtual node offers {format_quantity(cpu)} cpu, and its "
                f"{wanted} pods of {format_quantity(POD_CPU)} need "
                f"{format_quantity(wanted * POD_CPU)}: lower --pools-pods")


async def run(bench: Bench) -> dict[str, Any]:
    enforcer, names = bench.enforcer, bench.names
    assert enforcer is not None
    count, gpu_count = int(bench.args.pools_pods), gpu_pods(bench)
    wanted = {"gpu": gpu_count, "general": count - gpu_count}
    pools = await split_nodes(bench)
    enforcer.stop()
    enforcer.start(flags=enforcer_flags(bench))
    await bench.enforcer_ready()
    await created(bench.home.create(core_path("namespaces"), {"metadata": {"name": names.pools}}))
    twin = await bench.offload(names.pools, "Remote")
    bench.twins.append(twin)
    await pool_nodes_ready(bench)

    pod_names = {f"{pool}-{index}": pool for pool in POOLS for index in range(wanted[pool])}
    # interleaved, as a workload's pods come: neither pool first
    order = sorted(pod_names, key=lambda name: (int(name.rsplit("-", 1)[1]), name))
    started = time.monotonic()
    done: dict[str, float] = {}
    remote: list[dict[str, Any]] = []

    async def create(name: str) -> None:
        await bench.home.create(core_path("pods", names.pools), pod(bench, name, pod_names[name]))

    async def offloaded() -> bool:
        remote[:] = await bench.remote.list(core_path("pods", twin))
        running = Counter(pod_names.get(p["metadata"]["name"]) for p in remote
                          if (p.get("status") or {}).get("phase") == "Running")
        for pool in POOLS:
            if pool not in done and running[pool] >= wanted[pool]:
                done[pool] = time.monotonic() - started
        return len(done) == len(POOLS)
    creating = asyncio.ensure_future(gather_limited(
        (functools.partial(create, name) for name in order), 32))
    timeout = 120 + count / 2
    try:
        await until_async(offloaded, timeout, f"the pools scenario's {count} pods Running "
                                              f"remotely")
    except TimeoutError:
        pass  # reported as it is: fewer offloaded, no rate
    await creating
    home = {p["metadata"]["name"]: p for p in await bench.home.list(core_path("pods", names.pools))}
    results: dict[str, Any] = {"provider_nodes": dict(Counter(pools.values()))}
    for pool in POOLS:
        node = pool_node_name(bench.node, pool)
        mine = [p for p in remote if pod_names.get(p["metadata"]["name"]) == pool]
        ran = [p for p in mine if (p.get("status") or {}).get("phase") == "Running"]
        results[pool] = {
            "pods": wanted[pool],
            "placed": sum(1 for name, p in home.items()
                          if pod_names.get(name) == pool and p["spec"].get("nodeName") == node),
            "offloaded": len(ran),
            "seconds": round(done[pool], 2) if pool in done else None,
            "pods_per_second": round(wanted[pool] / done[pool], 1) if pool in done else None,
            "outside_pool": sum(1 for p in mine if p["spec"].get("nodeName")
                                and pools.get(p["spec"]["nodeName"]) != pool)}
    await leave(bench, twin)
    return results


async def leave(bench: Bench, twin: str) -> None:
    """The pods gone at both ends, the enforcer as it was (one offer of every node), the
    nodes restored."""
    await bench.home.delete(core_path("pods", bench.names.pools), {"gracePeriodSeconds": 0})

    async def gone() -> bool:
        return not await bench.remote.list(core_path("pods", twin))
    await until_async(gone, 120 + int(bench.args.pools_pods) / 5,
                      "the pools scenario's remote pods removed")
    assert bench.enforcer is not None
    bench.enforcer.stop()
    bench.enforcer.start()
    await bench.enforcer_ready()
    await restore(bench)


def remote_pods(args: Any) -> int:
    return int(args.pools_pods)


def rows(result: dict[str, Any]) -> Rows:
    nodes = result["provider_nodes"]
    found: Rows = [("pools", ", ".join(f"{pool} {n} provider nodes" for pool, n in nodes.items())
                    + f"; GPU pods request 1 {GPU}")]
    for pool in POOLS:
        each = result[pool]
        rate = (f"{each['pods_per_second']}/s ({each['seconds']} s)"
                if each["seconds"] is not None else "not all by the deadline")
        found.append((f"  {pool}", f"{each['pods']} pods: placed on its node {each['placed']}, "
                      f"Running remotely {each['offloaded']}, {rate}; outside the pool "
                      f"{each['outside_pool']}"))
    return found
