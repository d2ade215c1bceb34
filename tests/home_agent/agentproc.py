"""Running components as real processes for component and end-to-end tests, and the cluster
setup they need (CRDs, tenant namespace), through the public API only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "crds"


def install_crds(handle: Any) -> None:
    """Create annex's CRDs on a cluster (kept if they exist) and wait until they serve; and
    the consumer ClusterRole the remote-enforcer chart ships with them."""
    from kubernetes import client

    from tests.helpers import wait_for
    from tests.remote_enforcer.conftest import install_consumer_cluster_role

    install_consumer_cluster_role(handle)

    api = client.ApiextensionsV1Api(handle.api_client)
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        try:
            api.create_custom_resource_definition(crd)
        except ApiException as error:
            if error.status != 409:
                raise
    crds = [yaml.safe_load(path.read_text()) for path in sorted(CRD_DIR.glob("*.yaml"))]
    for crd in crds:
        name = crd["metadata"]["name"]
        wait_for(lambda name=name: any(
            c.type == "Established" and c.status == "True"
            for c in (api.read_custom_resource_definition(name).status.conditions or [])),
            timeout=30, message=f"CRD {name} established")
    wait_until_quota_counts(handle, [
        f"count/{crd['spec']['names']['plural']}.{crd['spec']['group']}"
        for crd in crds if crd["spec"]["scope"] == "Namespaced"])


QUOTA_PROBE = "annex-tests-quota-probe"
QUOTA_DISCOVERY = 120.0  # seconds: kube-controller-manager discovers new kinds every 30 s


def wait_until_quota_counts(handle: Any, resources: list[str]) -> None:
    """Wait until the cluster's quota controller counts these object counts. A ResourceQuota
    listing a kind it has not discovered yet refuses every creation of that kind ("status
    unknown for quota") until the quota's next resync (5 minutes by default), while one made
    after the discovery is counted at once: the twin namespaces' quotas the enforcer makes
    next are. A probe ResourceQuota in `default`, its `hard` changed at each try so that the
    controller counts it again, tells; it is deleted afterwards."""
    from tests.helpers import wait_for

    attempts = iter(range(1_000_000, 2_000_000))

    def probe() -> dict[str, Any]:
        return {"metadata": {"name": QUOTA_PROBE},
                "spec": {"hard": dict.fromkeys(resources, str(next(attempts)))}}

    def counted() -> bool:
        try:
            quota = handle.core.read_namespaced_resource_quota(QUOTA_PROBE, "default")
        except ApiException as error:
            if error.status != 404:
                raise
            handle.core.create_namespaced_resource_quota("default", probe())
            return False
        if set(resources) <= set((quota.status and quota.status.used) or {}):
            return True
        handle.core.patch_namespaced_resource_quota(QUOTA_PROBE, "default", probe())
        return False

    try:
        wait_for(counted, timeout=QUOTA_DISCOVERY, interval=0.5,
                 message=f"the quota controller counts {', '.join(resources)}")
    finally:
        try:
            handle.core.delete_namespaced_resource_quota(QUOTA_PROBE, "default")
        except ApiException as error:
            if error.status != 404:
                raise


def ensure_namespace(handle: Any, name: str, labels: dict[str, str] | None = None) -> None:
    try:
        handle.core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
    except ApiException as error:
        if error.status != 409:
            raise


def tenant_labels(home_cluster_id: str) -> dict[str, str]:
    """How the provider marks a consumer's tenant namespace (the enforcer reads them)."""
    from shared.wellknown import REMOTE_CLUSTER_ID_LABEL, TENANT_NAMESPACE_LABEL

    return {TENANT_NAMESPACE_LABEL: "true", REMOTE_CLUSTER_ID_LABEL: home_cluster_id}


def unique_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Process:
    """A component as a subprocess; its output goes to a log file shown when a test fails."""

    def __init__(self, args: Sequence[str], log_path: Path, cwd: Path = REPO) -> None:
        """`cwd`: the source tree whose modules `python -m` runs (another commit's, in the
        upgrade test)."""
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.popen = subprocess.Popen([sys.executable, *args], stdout=self._log,
                                      stderr=subprocess.STDOUT, cwd=cwd, env=env)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log.close()
        return self.popen.returncode


_KUBELET_PORTS: dict[tuple[str, str], int] = {}


def kubelet_port(home_id: str, remote_id: str) -> int:
    """A free port for one peering's kubelet API, the same when its agent restarts (as a
    chart's fixed port: a restart rewrites nothing on the node); agents run side by side."""
    key = (home_id, remote_id)
    if key not in _KUBELET_PORTS:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            _KUBELET_PORTS[key] = probe.getsockname()[1]
    return _KUBELET_PORTS[key]


def agent_args(home_kubeconfig: Path, remote_kubeconfig: Path, home_id: str, remote_id: str,
               *extra: str) -> list[str]:
    """Fast timings so that tests converge in seconds."""
    return [
        "-m", "home_agent",
        "--home-kubeconfig", str(home_kubeconfig),
        "--remote-kubeconfig", str(remote_kubeconfig),
        "--cluster-id", home_id,
        "--remote-cluster-id", remote_id,
        "--lease-renew-interval", "1",
        "--health-check-interval", "0.5",
        "--health-check-timeout", "1",
        "--failure-threshold", "3",
        "--log-level", "DEBUG",
        "--kubelet-port", str(kubelet_port(home_id, remote_id)),
        *extra,
    ]
