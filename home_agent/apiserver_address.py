"""Where offloaded pods reach the home API server (their KUBERNETES_SERVICE_* variables), found
once at start when `--home-apiserver-host` is not given (shared/home_apiserver.py says how)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import aiohttp

from annex.api_errors import ApiError, error_message
from annex.api_paths import core_path, group_path
from annex.kubeapi import ClusterApi
from annex.retries import retrying
from home_agent.config import AgentConfig
from shared.api.builtin import ENDPOINTSLICES
from shared.home_apiserver import (
    KUBERNETES_SERVICE,
    KUBERNETES_SERVICE_NAMESPACE,
    SERVICE_NAME_LABEL,
    home_apiserver_address,
)

log = logging.getLogger(__name__)


class NoHomeApiServerAddress(Exception):
    """Apiserver support is on and no address remote pods can reach is known."""


async def with_home_apiserver(config: AgentConfig, home: ClusterApi) -> AgentConfig:
    """`config` with the home API server's address filled in (unchanged when it is configured
    or apiserver support is off); NoHomeApiServerAddress when none is known."""
    if not config.enable_apiserver_support or config.home_apiserver_host:
        return config
    problems: list[str] = []
    slices = await _read(lambda: home.list(
        group_path(*ENDPOINTSLICES.resource, KUBERNETES_SERVICE_NAMESPACE),
        label_selector=f"{SERVICE_NAME_LABEL}={KUBERNETES_SERVICE}"), problems)
    service = await _read(lambda: home.find(
        core_path("services", KUBERNETES_SERVICE_NAMESPACE, KUBERNETES_SERVICE)), problems)
    server = home.connection.server
    address = home_apiserver_address(slices or [], server, service)
    if address is None:
        why = f" ({'; '.join(dict.fromkeys(problems))})" if problems else ""
        raise NoHomeApiServerAddress(
            f"offloaded pods cannot be pointed at the home API server: the "
            f"{KUBERNETES_SERVICE_NAMESPACE}/{KUBERNETES_SERVICE} EndpointSlice lists no address"
            f"{why} and this agent's server {server} is the cluster-internal Service; set "
            f"--home-apiserver-host (chart value homeApiServer.host) or "
            f"--enable-apiserver-support=false")
    host, port = address
    log.info("offloaded pods reach the home API server at %s:%d", host, port)
    return replace(config, home_apiserver_host=host, home_apiserver_port=port)


async def _read(reading: Callable[[], Awaitable[Any]], problems: list[str]) -> Any:
    """The answer, or None with the reason in `problems`: an unreadable source is one fewer
    candidate, not a failure (the kubeconfig's server may still serve)."""
    try:
        return await retrying(reading)
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
        problems.append(error_message(error))
        return None
