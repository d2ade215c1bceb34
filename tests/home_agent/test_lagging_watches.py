"""The pod offloader's writes while the agent's watches lag behind them, as a real API server's
watch echoes a write some milliseconds after answering it: a reconcile meanwhile writes over the
answered version, never from the version the answer replaced.

- home: a remote status that arrives meanwhile is written at once over the answered version,
  never refused as a conflict (the test plays the remote enforcer: it writes the ShadowPod
  status);
- remote: a pod changed before its ShadowPod's creation is echoed gets the ShadowPod patched,
  not created again (409 AlreadyExists)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.helpers import free_port, wait_for
from tests.home_agent.play import (
    bound_pod,
    extend,
    read_pod,
    report_shadow_status,
    shadow_pod,
    shadow_pod_exists,
)
from tests.home_agent.test_pod_offloading import REMAP_FLAGS, running_status
from tests.home_agent.test_remote_health import kubeconfig_for_identity

LAGGING = pytest.mark.kubesim_only(reason="delays only the agent's watch events "
                                          "(faults.watch_latency), which a real API server "
                                          "cannot be told to do")


def _codes(port: int, group: str, resource: str, verb: str) -> list[str]:
    """The answer codes of the agent's `verb` requests on `resource`, as its metrics count."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        body = reply.read().decode()
    return re.findall(r'annex_rest_client_requests_by_resource_total\{code="(\d+)",'
                      rf'group="{re.escape(group)}",host="[^"]+",'
                      rf'resource="{re.escape(resource)}",verb="{verb}"\}}', body)


def _pod_ip(home: ClusterHandle, namespace: str, name: str) -> Any:
    return (read_pod(home, namespace, name).get("status") or {}).get("podIP")


@LAGGING
def test_a_status_arriving_before_the_echo_of_the_last_write_is_written_without_conflict(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any,
        tmp_path: Path) -> None:
    identity = "annex-agent-lagging-watch"
    port = free_port()
    agent = start_agent(*REMAP_FLAGS, "--metrics-address", f"127.0.0.1:{port}",
                        home_kubeconfig=kubeconfig_for_identity(home, identity, tmp_path))
    twin = extend(home, remote, agent, namespace)
    bound_pod(home, namespace, "web", agent.node_name)
    wait_for(lambda: shadow_pod(remote, twin, "web"), timeout=30, message="ShadowPod")

    # The agent's home watches now deliver long after the writes they echo.
    home.sim.faults.watch_latency(600.0, user=identity)
    try:
        report_shadow_status(remote, twin, "web", running_status("10.200.0.5"))
        wait_for(lambda: _pod_ip(home, namespace, "web") == "10.250.0.5", timeout=30,
                 message="the first remote status reaches home")
        report_shadow_status(remote, twin, "web", running_status("10.200.0.6"))
        wait_for(lambda: _pod_ip(home, namespace, "web") == "10.250.0.6", timeout=30,
                 message="the next one too, its write's echo still held back")
    finally:
        home.sim.faults.restore()
    status_writes = _codes(port, "", "pods/status", "update")
    assert status_writes and set(status_writes) == {"200"}, status_writes


@LAGGING
def test_a_pod_changed_before_its_shadowpods_echo_gets_it_patched_not_created_twice(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any,
        tmp_path: Path) -> None:
    """What a new leader's first burst meets: the pod changes while its ShadowPod is being
    created, and its reconcile comes before the creation's echo."""
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
    assert _codes(port, "offloading.liqo.io", "shadowpods", "create") == ["201"]
