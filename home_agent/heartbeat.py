"""The virtual node's liveness: the Lease heartbeat and the remote API server health checks,
each its own asyncio task (never framework timers: those would annotate the Node)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime

from annex.api_errors import error_message, is_not_found
from annex.api_paths import group_path
from annex.leader import micro_time
from home_agent.agent import Agent
from shared.api.builtin import LEASES, NODES
from shared.forge.node import Health
from shared.wellknown import NODE_LEASE_NAMESPACE

log = logging.getLogger(__name__)


def _lease_path(name: str = "") -> str:
    return group_path(*LEASES.resource, NODE_LEASE_NAMESPACE, name)


async def renew_lease(agent: Agent) -> None:
    """Create or renew the node's Lease in kube-node-lease, owned by the Node like a kubelet's."""
    name = agent.node_name()
    node = agent.mirrors.nodes.get(("", name))
    if node is None:
        return  # the node reconcile creates the node first; the Lease follows
    spec = {"holderIdentity": name, "leaseDurationSeconds": agent.config.lease_duration_seconds,
            "renewTime": micro_time(datetime.now(UTC))}
    try:
        await agent.home.patch(_lease_path(name), {"spec": spec})
    except Exception as error:
        if not is_not_found(error):
            raise
        owner = {**NODES.type_meta(), "name": name,
                 "uid": node["metadata"]["uid"]}
        await agent.home.create(_lease_path(), {
            **LEASES.type_meta(),
            "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE,
                         "ownerReferences": [owner]},
            "spec": spec,
        })


async def lease_loop(agent: Agent) -> None:
    while True:
        try:
            await renew_lease(agent)
        except Exception as error:  # noqa: BLE001 - the next beat retries
            log.warning("lease renewal failed: %s", error_message(error))
        await asyncio.sleep(agent.config.lease_renew_interval)


async def health_loop(agent: Agent) -> None:
    """GET /livez on the remote every interval; `failure_threshold` consecutive failures make
    the node Ready=False, one success makes it Ready=True again."""
    failures = 0
    config = agent.config
    while True:
        started = time.monotonic()
        try:
            async with asyncio.timeout(config.health_check_timeout + 1):
                await agent.remote.healthy(config.health_check_timeout)
        except Exception as error:  # noqa: BLE001 - any failure is a failed check
            agent.health_checks.observe(time.monotonic() - started)
            failures += 1
            message = error_message(error) or type(error).__name__
            log.info("remote health check failed (%d in a row): %s", failures, message)
            if failures >= config.failure_threshold:
                agent.set_health(Health(ready=False, message=(
                    f"{config.failure_threshold} or more consecutive /livez checks failed, "
                    f"last: {message}")[:500]))
        else:
            agent.health_checks.observe(time.monotonic() - started)
            failures = 0
            agent.set_health(Health(ready=True, message=""))
        await asyncio.sleep(config.health_check_interval)
