"""A ShadowPod the agent created while its remote watch lags behind its own writes, as a real
API server's watch echoes a write some milliseconds after answering it: a reconcile of the pod
meanwhile (the home pod changed) reads the creation's answer, and patches the ShadowPod instead
of creating it again (409 AlreadyExists)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.helpers import free_port, wait_for
from tests.home_agent.play import bound_pod, extend, shadow_pod, shadow_pod_exists
from tests.home_agent.test_remote_health import kubeconfig_for_identity


def _shadowpod_creates(port: int) -> list[str]:
    """The codes of the agent's ShadowPod creates, one per answer code seen."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        body = reply.read().decode()
    return re.findall(r'annex_rest_client_requests_by_resource_total\{code="(\d+)",'
                      r'group="offloading.liqo.io",host="[^"]+",resource="shadowpods",'
                      r'verb="create"\}', body)


@pytest.mark.kubesim_only(reason="delays only the agent's remote watch events "
                                 "(faults.watch_latency), which a real API server cannot be told "
                                 "to do")
def test_a_pod_reconciled_before_its_shadowpods_echo_is_not_created_twice(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any,
        tmp_path: Path) -> None:
    identity = "annex-agent-lagging-remote-watch"
    port = free_port()
    agent = start_agent("--metrics-address", f"127.0.0.1:{port}",
                        remote_kubeconfig=kubeconfig_for_identity(remote, identity, tmp_path))
    twin = extend(home, remote, agent, namespace)
    # The agent's remote watches now deliver long after the writes they echo.
    remote.sim.faults.watch_latency(600.0, user=identity)
    try:
        # No token to reflect first: the token Secret's event would wait for the watch too.
        bound_pod(home, namespace, "web", agent.node_name,
                  spec={"automountServiceAccountToken": False})
        wait_for(lambda: shadow_pod_exists(remote, twin, "web"), timeout=30,
                 message="the ShadowPod created")
        home.core.patch_namespaced_pod("web", namespace,
                                       {"metadata": {"labels": {"tier": "front"}}})
        wait_for(lambda: shadow_pod(remote, twin, "web")["metadata"]["labels"].get("tier")
                 == "front", timeout=30,
                 message="the label patched onto the ShadowPod its watch has not shown yet")
    finally:
        remote.sim.faults.restore()
    assert _shadowpod_creates(port) == ["201"]
