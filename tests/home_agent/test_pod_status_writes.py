"""Home pod status writes while the agent's home watch lags behind its own writes, as a real
API server's watch echoes a write some milliseconds after answering it: a remote status that
arrives meanwhile is written at once over the answered version, never refused as a conflict.
The test plays the remote enforcer (it writes the ShadowPod status)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ClusterHandle
from tests.helpers import free_port, wait_for
from tests.home_agent.play import bound_pod, extend, read_pod, report_shadow_status, shadow_pod
from tests.home_agent.test_pod_offloading import REMAP_FLAGS, running_status
from tests.home_agent.test_remote_health import kubeconfig_for_identity


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


def _pod_ip(home: ClusterHandle, namespace: str, name: str) -> Any:
    return (read_pod(home, namespace, name).get("status") or {}).get("podIP")


@pytest.mark.kubesim_only(reason="delays only the agent's home watch events "
                                 "(faults.watch_latency), which a real API server cannot be told "
                                 "to do")
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
    body = _metrics(port)
    status_writes = re.findall(r'annex_rest_client_requests_by_resource_total\{code="(\d+)",'
                               r'group="",host="[^"]+",resource="pods/status",verb="update"\}',
                               body)
    assert status_writes and set(status_writes) == {"200"}, body
