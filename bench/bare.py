"""The bare client: the minimal API writes offloading pods needs, made without annex, on the
same servers in the same run (the limit the agent is measured against). Its pods are bound to a
Node of its own, kept Ready by a Lease as a kubelet keeps its own; no kubelet runs them: the
bare client writes their status."""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from annex.api_errors import ApiError
from annex.api_paths import core_path, custom_path, group_path
from annex.kubeapi import STRATEGIC_MERGE_PATCH, ClusterApi
from annex.leader import micro_time
from annex.retries import retrying
from annex.transport_errors import TransportError
from bench.api_calls import count_objects, created
from bench.names import Names
from bench.watching import Timeline, until_async
from shared.api.builtin import LEASES
from shared.api.shadowpod import SHADOWPOD
from shared.forge.metadata import reflection_config
from shared.forge.pod import PodForgeConfig, service_account_name, shadow_pod
from shared.forge.pod_tokens import projected_service_account_tokens
from shared.forge.token import issued_token, token_request, token_secret
from shared.wellknown import NODE_LEASE_NAMESPACE, VIRTUAL_NODE_TAINT_KEY

LEASE_SECONDS = 40
"""The bare client's node Lease: renewed every quarter of it, as a kubelet renews its own."""


async def create_node(home: ClusterApi, name: str, pods: int) -> asyncio.Task[None]:
    """The Node the bare client's pods are bound to, Ready, room for `pods`, with a Lease; the
    task renewing it as a kubelet renews its own, until cancelled. Tainted as a virtual node
    is, so that nothing else lands there."""
    capacity = {"cpu": "10000", "memory": "10000Gi", "pods": str(pods)}
    node = await home.create(core_path("nodes"), {"metadata": {
        "name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                 "type": "bench-bare-node"}},
        "spec": {"taints": [{"key": VIRTUAL_NODE_TAINT_KEY, "value": "true",
                             "effect": "NoExecute"}]}})
    now = micro_time(datetime.now(UTC))
    await home.patch(core_path("nodes", name=name, subresource="status"), {"status": {
        "capacity": capacity, "allocatable": capacity,
        "conditions": [{"type": "Ready", "status": "True", "reason": "BenchBareNode",
                        "message": "the benchmark's bare client writes its pods' status",
                        "lastHeartbeatTime": now[:19] + "Z",
                        "lastTransitionTime": now[:19] + "Z"}]}},
        content_type=STRATEGIC_MERGE_PATCH)
    lease = group_path(*LEASES.resource, NODE_LEASE_NAMESPACE)
    await home.create(lease, {"metadata": {
        "name": name, "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": name,
             "uid": node["metadata"]["uid"]}]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS,
                 "renewTime": now}})

    async def renew() -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 4)
            try:
                await home.patch(f"{lease}/{name}",
                                 {"spec": {"renewTime": micro_time(datetime.now(UTC))}})
            except (ApiError, TransportError, TimeoutError) as error:
                print(f"renewing the Lease of node {name}: {error}", file=sys.stderr)
    return asyncio.get_running_loop().create_task(renew())


async def offload(home: ClusterApi, remote: ClusterApi, names: Names, timeline: Timeline,
                  pods: list[dict[str, Any]], lanes: int, timeout: float) -> None:
    """The writes offloading these pods needs, made without annex: the objects come from the
    pure forge functions the agent uses (the same bodies). Per pod: for a pod that mounts its
    service-account token, a TokenRequest at home and the token Secret at the remote, then
    the ShadowPod (the agent's order too); once the remote pod runs (seen by a watch, within
    `timeout`), the home pod's status. Pipelined as the agent is: at most `lanes` requests at
    once. `home` and `remote`: the bare client's own clients (its requests are counted)."""
    lane = asyncio.Semaphore(lanes)
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
            functools.partial(home.create, path, token_request(pod, token))),
            token.expiration_seconds) for token in wanted]
        secret = token_secret(pod, names.bare_twin, issued, names.bare_consumer,
                              names.provider_id)
        await write(lambda: created(remote.create(core_path("secrets", names.bare_twin),
                                                  secret)))

    async def one(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        running = timeline.wait_running("remote-pods", names.bare_twin, name)
        body = shadow_pod(pod, names.bare_twin, config)
        await token_secret_of(pod)  # first: a pod made before it waits for a mount retry
        await write(lambda: created(remote.create(custom_path(SHADOWPOD, names.bare_twin),
                                                  body)))
        try:
            async with asyncio.timeout(timeout):
                remote_pod = await running
        except TimeoutError:
            raise TimeoutError(f"the remote pod {names.bare_twin}/{name} was not Running "
                               f"after {timeout:.0f}s") from None
        status = {"status": remote_pod.get("status") or {"phase": "Running"}}
        await write(lambda: home.patch(
            core_path("pods", names.bare_namespace, name, "status"), status))
    await asyncio.gather(*(one(pod) for pod in pods))


def remote_collections(names: Names) -> dict[str, str]:
    """The remote collections the bare client's path fills: its pods (the enforcer's),
    ShadowPods and token Secrets."""
    twin = names.bare_twin
    return {"pods": core_path("pods", twin), "shadowpods": custom_path(SHADOWPOD, twin),
            "secrets": core_path("secrets", twin)}


async def remove(home: ClusterApi, remote: ClusterApi, names: Names, timeout: float) -> float:
    """Remove the bare client's pods and what was made for them at the remote, and wait until
    they are gone (seconds)."""
    started = time.monotonic()
    home_pods = core_path("pods", names.bare_namespace)
    collections = remote_collections(names)
    # Pods at home at once (no kubelet would confirm their end); the remote pods go with
    # their ShadowPods (their owner), through the garbage collector and the kubelets.
    await home.request("DELETE", home_pods, {"gracePeriodSeconds": 0}, timeout=timeout)
    await remote.request("DELETE", collections["shadowpods"], timeout=timeout)
    await remote.request("DELETE", collections["secrets"], timeout=timeout)
    for api, path in ((home, home_pods), (remote, collections["shadowpods"]),
                      (remote, collections["pods"])):
        async def empty(api: ClusterApi = api, path: str = path) -> bool:
            return await count_objects(api, path) == 0
        await until_async(empty, timeout, f"{path} emptied")
    # Last, once the kubelets have recorded the pods' ends.
    await remote.request("DELETE", core_path("events", names.bare_twin), timeout=timeout)
    return round(time.monotonic() - started, 2)
