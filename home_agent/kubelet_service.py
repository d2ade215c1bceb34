"""The offloaded pods' hostIP, found once at start from the Service in front of the agent's
replicas (`--kubelet-service`): its ClusterIP stays the same whichever replica leads, so a
takeover rewrites no pod's status (the node's address, where the API server reaches the
leader's kubelet API, is one object written)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from annex.api_errors import error_message
from annex.api_paths import core_path
from annex.kubeapi import ClusterApi
from annex.retries import retrying
from home_agent.config import AgentConfig

log = logging.getLogger(__name__)

WAIT_SECONDS = 60.0
"""How long a Service made with the agent may take to get its ClusterIP."""


class NoKubeletService(Exception):
    """`--kubelet-service` names no Service with a ClusterIP."""


async def with_kubelet_service(config: AgentConfig, home: ClusterApi,
                               wait: float = WAIT_SECONDS) -> AgentConfig:
    """`config` with `pods_host_ip` filled in (unchanged without `--kubelet-service`);
    NoKubeletService when the Service has no ClusterIP within `wait` seconds."""
    if not config.kubelet_service:
        return config
    namespace, _, name = config.kubelet_service.partition("/")
    if not namespace or not name:
        raise NoKubeletService(f"--kubelet-service {config.kubelet_service!r} is not "
                               "NAMESPACE/NAME")
    loop = asyncio.get_running_loop()
    deadline, delay, problem = loop.time() + wait, 0.5, ""
    while True:
        try:
            service = await retrying(lambda: home.find(core_path("services", namespace, name)))
        except Exception as error:  # noqa: BLE001 - said below if it lasts
            service, problem = None, error_message(error)
        else:
            problem = "it does not exist" if service is None else ""
        address = str(((service or {}).get("spec") or {}).get("clusterIP") or "")
        if address and address != "None":
            log.info("offloaded pods' hostIP: %s (Service %s/%s)", address, namespace, name)
            return replace(config, pods_host_ip=address)
        if service is not None:
            problem = "it has no ClusterIP (a headless Service)"
        if loop.time() + delay > deadline:
            raise NoKubeletService(
                f"the kubelet Service {namespace}/{name} (--kubelet-service) gives the offloaded "
                f"pods no hostIP: {problem}")
        log.warning("waiting for the kubelet Service %s/%s: %s", namespace, name, problem)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 10.0)
