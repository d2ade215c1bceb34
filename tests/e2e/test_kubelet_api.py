"""End to end: the virtual node's kubelet API, called as the home API server calls a kubelet
(HTTPS to the node's advertised port, a bearer token reviewed at home) — authentication,
authorization as a kubelet's Webhook mode maps paths, only the pods of this node, logs served
from the twin pod through the remote API server.

The agent runs as a local process here, so the test reaches its kubelet port on loopback on
real clusters too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from kubernetes import client

from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY, offloaded
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent

# The agent's serving certificate is self-signed, as a kubelet's is by default; kube-apiserver
# does not verify it unless started with --kubelet-certificate-authority.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


def kubelet_port(home: ClusterHandle, node_name: str) -> int:
    def advertised() -> int:
        node = home.core.read_node(node_name)
        return int(node.status.daemon_endpoints.kubelet_endpoint.port or 0)
    return wait_for(advertised, timeout=30, message="the virtual node advertises its port")


@pytest.fixture
def callers(home: ClusterHandle, namespace: str) -> Iterator[dict[str, str]]:
    """Bearer tokens of home ServiceAccounts: `admin` may use the kubelet API (as
    system:kubelet-api-admin grants it), `nobody` may not."""
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    name = f"annex-e2e-kubelet-{uuid.uuid4().hex[:8]}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": ["nodes/proxy", "nodes/log", "nodes/stats",
                                          "nodes/metrics"],
         "verbs": ["get", "create"]}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "admin", "namespace": namespace}]})
    tokens = {}
    for account in ("admin", "nobody"):
        home.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
        tokens[account] = str(home.core.create_namespaced_service_account_token(
            account, namespace, {"spec": {"expirationSeconds": 3600}}).status.token)
    try:
        yield tokens
    finally:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)


class Kubelet:
    def __init__(self, port: int) -> None:
        self.base = f"https://127.0.0.1:{port}"

    def get(self, path: str, token: str | None = None, **params: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return requests.get(self.base + path, headers=headers, params=params, verify=False,
                            timeout=30)


@pytest.fixture
def kubelet(home: ClusterHandle, peered: RunningAgent) -> Kubelet:
    return Kubelet(kubelet_port(home, peered.node_name))


@pytest.fixture
def offloaded_pod(home: ClusterHandle, remote: ClusterHandle, peered: RunningAgent,
                  namespace: str) -> tuple[str, str]:
    """A pod running remotely: (its name, the twin namespace)."""
    remote_namespace = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}], **REMOTE_STRATEGY}})
    wait_for(lambda: home.core.read_namespaced_pod("web", namespace).status.phase == "Running",
             timeout=60, message="the pod runs remotely and says so at home")
    return "web", remote_namespace


def test_anonymous_and_unauthorized_callers_are_refused(kubelet: Kubelet,
                                                        callers: dict[str, str],
                                                        peered: RunningAgent,
                                                        namespace: str) -> None:
    assert kubelet.get("/pods").status_code == 401
    assert kubelet.get("/pods", token="not-a-token").status_code == 401
    refused = kubelet.get("/pods", token=callers["nobody"])
    assert refused.status_code == 403
    assert refused.text.strip() == (
        f"Forbidden (user=system:serviceaccount:{namespace}:nobody, verb=get, "
        "resource=nodes, subresource=proxy)")
    refused = kubelet.get(f"/containerLogs/{namespace}/web/web", token=callers["nobody"])
    assert refused.status_code == 403
    assert kubelet.get("/healthz", token=callers["admin"]).text == "ok"


def test_only_the_pods_of_this_node_are_served(home: ClusterHandle, kubelet: Kubelet,
                                               callers: dict[str, str],
                                               offloaded_pod: tuple[str, str],
                                               namespace: str) -> None:
    admin = callers["admin"]
    listed = kubelet.get("/pods", token=admin).json()
    assert listed["kind"] == "PodList"
    assert (namespace, "web") in {(p["metadata"]["namespace"], p["metadata"]["name"])
                                  for p in listed["items"]}
    # A home pod the virtual node does not run: unknown here, whatever runs it.
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "local"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}],
                 "nodeSelector": {"annex-e2e/no-such-node": "true"}}})
    for path in (f"/containerLogs/{namespace}/local/web",
                 f"/containerLogs/{namespace}/absent/web",
                 "/containerLogs/kube-system/web/web"):
        answer = kubelet.get(path, token=admin)
        assert answer.status_code == 404, path
        assert "does not exist" in answer.text, answer.text
    answer = kubelet.get(f"/containerLogs/{namespace}/web/sidecar", token=admin)
    assert answer.status_code == 404
    assert answer.text.strip() == 'container "sidecar" not found in pod "web"'


def remote_log(remote: ClusterHandle, remote_namespace: str, **options: Any) -> str:
    return str(remote.core.read_namespaced_pod_log("web", remote_namespace, container="web",
                                                   **options))


def test_logs_come_from_the_twin_pod(remote: ClusterHandle, kubelet: Kubelet,
                                     callers: dict[str, str],
                                     offloaded_pod: tuple[str, str], namespace: str) -> None:
    _, remote_namespace = offloaded_pod
    admin = callers["admin"]
    wait_for(lambda: remote_log(remote, remote_namespace), timeout=30,
             message="the remote container has written something")
    whole = kubelet.get(f"/containerLogs/{namespace}/web/web", token=admin)
    assert whole.status_code == 200, whole.text
    assert whole.text.startswith(remote_log(remote, remote_namespace)[:200])
    last = kubelet.get(f"/containerLogs/{namespace}/web/web", token=admin, tailLines="1")
    assert last.status_code == 200
    assert last.text.count("\n") == 1
    # The remote API server's refusal, relayed with its status: no previous container.
    previous = kubelet.get(f"/containerLogs/{namespace}/web/web", token=admin, previous="true")
    assert previous.status_code == 400, previous.text
    assert "previous terminated container" in previous.text


def test_a_followed_log_streams(remote: ClusterHandle, kubelet: Kubelet,
                                callers: dict[str, str], offloaded_pod: tuple[str, str],
                                namespace: str) -> None:
    _, remote_namespace = offloaded_pod
    wait_for(lambda: remote_log(remote, remote_namespace), timeout=30,
             message="the remote container has written something")
    with requests.get(f"{kubelet.base}/containerLogs/{namespace}/web/web",
                      params={"follow": "true", "tailLines": "1"}, verify=False, stream=True,
                      headers={"Authorization": f"Bearer {callers['admin']}"},
                      timeout=30) as followed:
        assert followed.status_code == 200
        first = next(followed.iter_lines())
        assert first  # the tail's line arrives while the stream stays open
