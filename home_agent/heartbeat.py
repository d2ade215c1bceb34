"""The virtual nodes' liveness: each node's Lease heartbeat and the remote API server health checks,
each its own asyncio task (never framework timers: those would annotate the Node)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from annex.api_errors import error_message, is_not_found
from annex.api_paths import group_path
from annex.kubeapi import ClusterApi
from annex.leader import micro_time
from annex.metrics_histogram import Histogram
from annex.mirror import Mirror
from shared.api.builtin import LEASES, NODES
from shared.forge.node_status import Health
from shared.wellknown import NODE_LEASE_NAMESPACE

log = logging.getLogger(__name__)


def _lease_path(name: str = "") -> str:
    return group_path(*LEASES.resource, NODE_LEASE_NAMESPACE, name)


@dataclass(frozen=True)
class NodeLease:
    """What the nodes' Leases are renewed with: the home client, the Nodes' mirror (each Lease's
    owner), the agent's nodes' names as they are now (one, or one per pool), the Leases'
    duration and how often they are renewed."""

    home: ClusterApi
    nodes: Mirror
    node_names: Callable[[], Iterable[str]]
    duration_seconds: int
    renew_interval: float


async def renew_leases(lease: NodeLease) -> None:
    """Each of the agent's nodes' Lease, every node's tried (one failing is raised after)."""
    failed: Exception | None = None
    for name in sorted(lease.node_names()):
        try:
            await renew_lease(lease, name)
        except Exception as error:  # noqa: BLE001 - the others are renewed all the same
            failed = error
    if failed is not None:
        raise failed


async def renew_lease(lease: NodeLease, name: str) -> None:
    """Create or renew the node's Lease in kube-node-lease, owned by the Node like a kubelet's."""
    node = lease.nodes.get(("", name))
    if node is None:
        return  # the node reconcile creates the node first; the Lease follows
    spec = {"holderIdentity": name, "leaseDurationSeconds": lease.duration_seconds,
            "renewTime": micro_time(datetime.now(UTC))}
    try:
        await lease.home.patch(_lease_path(name), {"spec": spec})
    except Exception as error:
        if not is_not_found(error):
            raise
        owner = {**NODES.type_meta(), "name": name,
                 "uid": node["metadata"]["uid"]}
        await lease.home.create(_lease_path(), {
            **LEASES.type_meta(),
            "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE,
                         "ownerReferences": [owner]},
            "spec": spec,
        })


async def lease_loop(lease: NodeLease) -> None:
    while True:
        try:
            await renew_leases(lease)
        except Exception as error:  # noqa: BLE001 - the next beat retries
            log.warning("lease renewal failed: %s", error_message(error))
        await asyncio.sleep(lease.renew_interval)


@dataclass(frozen=True)
class HealthChecks:
    """What the remote's health is checked with: the remote client, where each check's
    duration is counted, where the health found is reported, and the checks' settings."""

    remote: ClusterApi
    durations: Histogram
    report: Callable[[Health], None]
    interval: float
    timeout: float
    failure_threshold: int


async def health_loop(checks: HealthChecks) -> None:
    """GET /livez on the remote every interval; `failure_threshold` consecutive failures make
    the node Ready=False, one success makes it Ready=True again."""
    failures = 0
    while True:
        started = time.monotonic()
        try:
            async with asyncio.timeout(checks.timeout + 1):
                await checks.remote.healthy(checks.timeout)
        except Exception as error:  # noqa: BLE001 - any failure is a failed check
            checks.durations.observe(time.monotonic() - started)
            failures += 1
            message = error_message(error) or type(error).__name__
            log.info("remote health check failed (%d in a row): %s", failures, message)
            if failures >= checks.failure_threshold:
                checks.report(Health(ready=False, message=(
                    f"{checks.failure_threshold} or more consecutive /livez checks failed, "
                    f"last: {message}")[:500]))
        else:
            checks.durations.observe(time.monotonic() - started)
            failures = 0
            checks.report(Health(ready=True, message=""))
        await asyncio.sleep(checks.interval)
