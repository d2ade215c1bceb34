"""End to end: an enforcer declaring two pools (`--offer-pool`, a schedulable remote node
labelled into one of them, as an administrator labels nodes) is two virtual nodes at home, one
per pool, each with its pool's capacity and labels; a pod asking for one pool with a
nodeSelector lands on that pool's node, its ShadowPod names the pool, and the remote pod runs
within the pool's nodes. Each pool's Node has a kubelet API of its own, at the port its
daemonEndpoints give: authorized for that node, listing and measuring that node's pods only,
serving a pod's log and exec through the home API server when it is that pod's node, and the
404 of a pod it does not run otherwise. The same on kubesim and on real clusters."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from shared.node_selector import node_selector_matches
from shared.quantity import parse_quantity
from shared.wellknown import POOL_LABEL
from tests.conftest import ClusterHandle
from tests.e2e.conftest import e2e_enforcer
from tests.e2e.devices import schedulable_node
from tests.e2e.test_kubelet_api import (
    Kubelet,
    callers,
    echo_pod,
    kubelet_port,
    metrics_apis,
    reachable,
)
from tests.e2e.test_offloading import REMOTE_STRATEGY, home_ready, offloaded
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent
from tests.home_agent.play import node_or_none, shadow_pod
from tests.remote_enforcer.conftest import Enforcer

__all__ = ["callers", "metrics_apis", "reachable"]  # fixtures

# The agent's serving certificates are self-signed, as a kubelet's are by default.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

SELECTOR = "pools.annex.e2e/pool"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture(scope="module")
def labelled(remote: ClusterHandle) -> Iterator[str]:
    """A schedulable remote node in pool "here" while the module runs; no node is in pool
    "nowhere"."""
    node = schedulable_node(remote)
    remote.core.patch_node(node, {"metadata": {"labels": {SELECTOR: "here"}}})
    yield node
    remote.core.patch_node(node, {"metadata": {"labels": {SELECTOR: None}}})


@pytest.fixture(scope="module")
def enforcer(remote: ClusterHandle, crds: None, labelled: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforcer]:
    with e2e_enforcer(remote, tmp_path_factory.mktemp("enforcer"), (
            "--offer-pool", f"here={SELECTOR}=here",
            "--offer-pool", f"nowhere={SELECTOR}=nowhere")) as process:
        yield process


def _lending(home: ClusterHandle, name: str) -> Any:
    """The node once it shows what its pool lends."""
    node = node_or_none(home, name)
    return node if node is not None and (node.status.capacity or {}).get("pods") else None


def test_each_pool_is_a_virtual_node_with_its_capacity_and_labels(
        home: ClusterHandle, peered: RunningAgent) -> None:
    here = wait_for(lambda: _lending(home, f"{peered.node_name}-here"), timeout=60,
                    message="the here pool's node")
    nowhere = wait_for(lambda: _lending(home, f"{peered.node_name}-nowhere"), timeout=60,
                       message="the nowhere pool's node")
    assert parse_quantity(here.status.capacity["cpu"]) > 0
    assert parse_quantity(nowhere.status.capacity.get("cpu", "0")) == 0  # no node in it
    for node, pool in ((here, "here"), (nowhere, "nowhere")):
        assert node.metadata.labels[POOL_LABEL] == pool
        assert node.metadata.labels[SELECTOR] == pool
        assert node.metadata.labels["topology.kubernetes.io/region"] == "eu-west"
        assert any(t.key == "virtual-node.liqo.io/not-allowed" for t in node.spec.taints)
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    wait_for(lambda: node_or_none(home, peered.node_name) is None, timeout=60,
             message="no node for the provider as a whole")


def test_a_pod_asking_for_a_pool_runs_on_its_node_and_within_its_remote_nodes(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, labelled: str,
        peered: RunningAgent) -> None:
    wait_for(lambda: _lending(home, f"{peered.node_name}-here"), timeout=60,
             message="the here pool's node")
    twin = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "pinned"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}],
                 "nodeSelector": {SELECTOR: "here"}, **REMOTE_STRATEGY}})
    wait_for(lambda: home_ready(home, namespace, "pinned"), timeout=90,
             message="the pod Running and Ready at home")
    bound = home.core.read_namespaced_pod("pinned", namespace)
    assert bound.spec.node_name == f"{peered.node_name}-here"
    assert shadow_pod(remote, twin, "pinned")["spec"]["pool"] == "here"
    remote_pod = remote.core.read_namespaced_pod("pinned", twin)
    assert remote_pod.spec.node_name == labelled
    terms = remote.api_client.sanitize_for_serialization(
        remote_pod.spec.affinity.node_affinity)[REQUIRED]
    assert node_selector_matches(terms, {SELECTOR: "here"})
    assert not node_selector_matches(terms, {SELECTOR: "nowhere"})


@pytest.fixture
def pool_web(home: ClusterHandle, namespace: str, reachable: RunningAgent) -> tuple[str, str]:
    """The pod "web" of `namespace` running remotely in pool "here": (its node, the other
    pool's node)."""
    here, nowhere = f"{reachable.node_name}-here", f"{reachable.node_name}-nowhere"
    wait_for(lambda: _lending(home, here), timeout=60, message="the here pool's node")
    offloaded(home, namespace)
    pod = echo_pod()
    pod["spec"]["nodeSelector"] = {SELECTOR: "here"}
    home.core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: home.core.read_namespaced_pod("web", namespace).status.phase == "Running",
             timeout=90, message="the pod runs remotely and says so at home")
    assert home.core.read_namespaced_pod("web", namespace).spec.node_name == here
    return here, nowhere


def test_a_pool_nodes_pod_logs_and_exec_come_through_the_home_api_server(
        home: ClusterHandle, namespace: str, pool_web: tuple[str, str]) -> None:
    """The home API server dials the kubelet API of the pod's own node, at its own port."""
    from kubernetes.stream import stream

    wait_for(lambda: home.core.read_namespaced_pod_log("web", namespace, container="web")
             == "one\ntwo\nthree\n", timeout=30, message="its log through the home API server")
    session = stream(home.core.connect_get_namespaced_pod_exec, "web", namespace,
                     container="web", command=["sh", "-c", "cat; exit 3"], stdin=True,
                     stdout=True, stderr=True, tty=False, _preload_content=False)
    session.write_stdin("hello\n")
    session.close_channel(0)  # end of stdin (v5.channel.k8s.io)
    session.run_forever(timeout=30)
    assert (session.read_stdout(), session.returncode) == ("hello\n", 3)


def _node_proxy(home: ClusterHandle, node: str, path: str, method: str = "GET",
                query: tuple[tuple[str, str], ...] = ()) -> tuple[int, str]:
    """`path` of `node`'s kubelet API through the home API server (nodes/proxy): (status,
    body)."""
    api = home.api_client
    method, url, headers, body, _ = api.param_serialize(
        method, f"/api/v1/nodes/{node}/proxy/{path}", query_params=list(query),
        auth_settings=["BearerToken"])
    answer = api.call_api(method, url, header_params=headers, body=body)
    answer.read()
    return int(answer.status), bytes(answer.data).decode()


def test_each_pool_nodes_kubelet_serves_its_own_pods_only_through_the_node_proxy(
        home: ClusterHandle, namespace: str, pool_web: tuple[str, str]) -> None:
    """nodes/proxy to the pod's node reaches its log and its exec; to the other pool's node it
    is the 404 of a pod that node does not run, for a log and an exec alike."""
    here, nowhere = pool_web
    logs = f"containerLogs/{namespace}/web/web"
    assert wait_for(lambda: (a := _node_proxy(home, here, logs))[0] == 200 and a, timeout=30,
                    message="the log through the pod's node")[1] == "one\ntwo\nthree\n"
    status, body = _node_proxy(home, nowhere, logs)
    assert status == 404, body
    assert "does not exist" in body
    exec_query = (("command", "true"), ("output", "1"))
    status, body = _node_proxy(home, nowhere, f"exec/{namespace}/web/web", method="POST",
                               query=exec_query)
    assert status == 404, body
    # Its own node runs it: an exec there only lacks the stream upgrade a client asks for.
    status, body = _node_proxy(home, here, f"exec/{namespace}/web/web", method="POST",
                               query=exec_query)
    assert (status, body.strip()) == (400, "Upgrade request required")


@pytest.fixture
def here_only(home: ClusterHandle, namespace: str, pool_web: tuple[str, str]
              ) -> Iterator[str]:
    """The bearer token of a home ServiceAccount that may use the kubelet API of the here
    pool's node only (RBAC resourceNames)."""
    here, _ = pool_web
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    name = f"annex-e2e-pool-kubelet-{uuid.uuid4().hex[:8]}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": ["nodes/proxy", "nodes/stats", "nodes/metrics"],
         "resourceNames": [here], "verbs": ["get"]}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "here-only", "namespace": namespace}]})
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "here-only"}})
    try:
        yield str(home.core.create_namespaced_service_account_token(
            "here-only", namespace, {"spec": {"expirationSeconds": 3600}}).status.token)
    finally:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)


def _listed(kubelet: Kubelet, token: str) -> set[tuple[str, str]]:
    answer = kubelet.get("/pods", token=token)
    assert answer.status_code == 200, answer.text
    return {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in answer.json()["items"]}


def test_each_pool_nodes_kubelet_api_authorizes_lists_and_summarizes_its_own_node(
        home: ClusterHandle, namespace: str, pool_web: tuple[str, str],
        callers: dict[str, str], here_only: str) -> None:
    """A port of its own per node: the review names the node addressed (a caller allowed on one
    pool's node only is refused on the other's), and /pods and /stats/summary are that node's."""
    here, nowhere = pool_web
    ports = {node: kubelet_port(home, node) for node in (here, nowhere)}
    assert ports[here] != ports[nowhere]
    at_here, at_nowhere = Kubelet(ports[here]), Kubelet(ports[nowhere])
    assert (namespace, "web") in _listed(at_here, here_only)
    refused = at_nowhere.get("/pods", token=here_only)
    assert refused.status_code == 403, refused.text
    assert (namespace, "web") not in _listed(at_nowhere, callers["admin"])
    for kubelet, node in ((at_here, here), (at_nowhere, nowhere)):
        summary = kubelet.get("/stats/summary", token=callers["admin"])
        assert summary.status_code == 200, summary.text
        assert summary.json()["node"]["nodeName"] == node
    assert at_nowhere.get("/stats/summary", token=callers["admin"]).json()["pods"] == []


def test_a_pool_nodes_pod_is_measured_on_its_node_only(
        home: ClusterHandle, namespace: str, metrics_apis: None, pool_web: tuple[str, str],
        callers: dict[str, str]) -> None:
    """/metrics/resource, what metrics-server scrapes for `kubectl top`: the pod's samples on its
    node's, none on the other pool's (counted once, not once per pool)."""
    here, nowhere = pool_web
    at_here, at_nowhere = (Kubelet(kubelet_port(home, node)) for node in (here, nowhere))
    sample = 'pod="web"'
    wait_for(lambda: sample in at_here.get("/metrics/resource", token=callers["admin"]).text,
             timeout=120, message="the remote metrics API has a sample of the pod")
    elsewhere = at_nowhere.get("/metrics/resource", token=callers["admin"])
    assert elsewhere.status_code == 200
    assert "resource_scrape_error 0" in elsewhere.text
    assert sample not in elsewhere.text
