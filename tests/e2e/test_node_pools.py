"""End to end: an enforcer declaring two pools (`--offer-pool`, a schedulable remote node
labelled into one of them, as an administrator labels nodes) is two virtual nodes at home, one
per pool, each with its pool's capacity and labels; a pod asking for one pool with a
nodeSelector lands on that pool's node, its ShadowPod names the pool, and the remote pod runs
within the pool's nodes; its log comes through the home API server, which dials the one
kubelet API of every pool's Node. The same on kubesim and on real clusters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared.node_selector import node_selector_matches
from shared.quantity import parse_quantity
from shared.wellknown import POOL_LABEL
from tests.conftest import ClusterHandle
from tests.e2e.conftest import e2e_enforcer
from tests.e2e.devices import schedulable_node
from tests.e2e.test_kubelet_api import echo_pod, reachable
from tests.e2e.test_offloading import REMOTE_STRATEGY, home_ready, offloaded
from tests.helpers import wait_for
from tests.home_agent.conftest import RunningAgent
from tests.home_agent.play import node_or_none, shadow_pod
from tests.remote_enforcer.conftest import Enforcer

__all__ = ["reachable"]  # the fixture, for the logs through the home API server

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


def test_a_pool_nodes_pod_logs_come_through_the_home_api_server(
        home: ClusterHandle, namespace: str, reachable: RunningAgent) -> None:
    """Every pool's Node gives the agent's address and kubelet port: the home API server dials
    the one kubelet API for a pod bound to any of them."""
    wait_for(lambda: _lending(home, f"{reachable.node_name}-here"), timeout=60,
             message="the here pool's node")
    offloaded(home, namespace)
    pod = echo_pod()
    pod["spec"]["nodeSelector"] = {SELECTOR: "here"}
    home.core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: home.core.read_namespaced_pod("web", namespace).status.phase == "Running",
             timeout=90, message="the pod runs remotely and says so at home")
    assert home.core.read_namespaced_pod("web", namespace).spec.node_name == (
        f"{reachable.node_name}-here")
    wait_for(lambda: home.core.read_namespaced_pod_log("web", namespace, container="web")
             == "one\ntwo\nthree\n", timeout=30, message="its log through the home API server")
