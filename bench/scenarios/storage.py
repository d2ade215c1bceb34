"""storage (by name only: --scenarios storage): --storage-pods claims of the virtual storage
class (installed at home as the home-agent chart does) and one pod each, scheduled by the home
scheduler onto the virtual node (WaitForFirstConsumer): seconds from the first claim created to
all home claims Bound and to all home pods Running, and the agent's CPU seconds per claim."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

from annex.api_paths import core_path, group_path
from bench.api_calls import created
from bench.figures import Rows, per_pod
from bench.harness import Bench
from bench.processes import cpu_seconds
from bench.watching import gather_limited, until
from shared.api.builtin import STORAGE_CLASSES
from shared.wellknown import VIRTUAL_STORAGE_CLASS, VIRTUAL_STORAGE_PROVISIONER


async def run(bench: Bench) -> dict[str, Any]:
    agent = bench.agent
    assert agent is not None
    count, namespace = bench.args.storage_pods, bench.names.namespace
    await created(bench.home.create(group_path(*STORAGE_CLASSES.resource), {
        "metadata": {"name": VIRTUAL_STORAGE_CLASS},
        "provisioner": VIRTUAL_STORAGE_PROVISIONER, "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True}))
    names = [f"storage-{i}" for i in range(count)]
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [bench.node]}]}]}}}

    def pod(name: str) -> dict[str, Any]:
        body = bench.pod(name, bench.node)
        del body["spec"]["nodeName"]  # the scheduler picks the node (and the volume's)
        body["spec"]["affinity"] = pinned
        body["spec"]["volumes"] = [{"name": "data",
                                    "persistentVolumeClaim": {"claimName": name}}]
        return body

    async def one(name: str) -> None:
        await bench.home.create(core_path("persistentvolumeclaims", namespace), {
            "metadata": {"name": name}, "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": VIRTUAL_STORAGE_CLASS,
                "resources": {"requests": {"storage": "1Gi"}}}})
        await bench.home.create(core_path("pods", namespace), pod(name))

    before, agent_cpu = bench.counts(), cpu_seconds(agent.pid)
    started = time.monotonic()
    await gather_limited((functools.partial(one, name) for name in names), 32)
    bound_at: list[float] = []

    async def poll_bound() -> None:
        while True:
            listed = await bench.home.list(core_path("persistentvolumeclaims", namespace))
            if sum(1 for c in listed if c["metadata"]["name"].startswith("storage-")
                   and (c.get("status") or {}).get("phase") == "Bound") >= count:
                bound_at.append(time.monotonic())
                return
            await asyncio.sleep(0.5)

    poller = asyncio.create_task(poll_bound())
    try:
        await until(lambda: bool(bound_at), bench.phase_timeout(),
                    f"{count} claims Bound at home", interval=0.2)
    finally:
        poller.cancel()
    running = await until(bench.timeline.all_of(bench.timeline.running, "home-pods",
                                                namespace, names), bench.phase_timeout(),
                          f"{count} storage pods Running at home", interval=0.2)
    await until(bench.agent_converged, 120 + count / 10, "the agent converged", interval=0.5)
    cpu = cpu_seconds(agent.pid) - agent_cpu
    return {
        "claims": count, "bound_seconds": round(bound_at[0] - started, 2),
        "running_seconds": round(running - started, 2),
        "agent_cpu_seconds": round(cpu, 2),
        "agent_cpu_ms_per_claim": round(1000 * cpu / count, 1),
        "requests": bench.requests_between(before, bench.counts(), "agent"),
        "agent": agent.figures()}


def remote_pods(args: Any) -> int:
    return int(args.storage_pods)


def rows(result: dict[str, Any]) -> Rows:
    return [("storage", f"{result['claims']} claims Bound in {result['bound_seconds']} s, their "
             f"pods Running in {result['running_seconds']} s; agent CPU "
             f"{result['agent_cpu_ms_per_claim']} ms/claim; requests/claim "
             f"{per_pod(result['requests'], result['claims'])}")]
