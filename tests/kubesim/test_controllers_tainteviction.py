"""Taint eviction (NoExecute taints) and the DefaultTolerationSeconds admission plugin."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import condition, pod_manifest
from tests.kubesim.test_controllers_podgc import gone
from tests.kubesim.version import at_least

EVICT_TAINT = {"key": "example.com/evict", "value": "yes", "effect": "NoExecute"}


def evicted(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    """Deleted: gone, or terminating (a pod bound to a node waits for its kubelet)."""
    try:
        pod = core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return pod.metadata.deletion_timestamp is not None


@pytest.fixture
def tainted_node(home) -> Iterator[str]:
    """A node of its own (no kubelet serves it) carrying a NoExecute taint."""
    name = f"tainted-{uuid.uuid4().hex[:8]}"
    home.core.create_node({"metadata": {"name": name}, "spec": {"taints": [EVICT_TAINT]}})
    yield name
    home.core.delete_node(name)


def bound_pod(name: str, node: str, *tolerations: dict[str, Any]) -> dict[str, Any]:
    return pod_manifest(name, nodeName=node, tolerations=list(tolerations))


def eviction_events(home, namespace: str) -> list[Any]:
    return [e for e in home.core.list_namespaced_event(namespace).items
            if e.reason == "TaintManagerEviction"]


def test_pods_are_evicted_at_once_after_their_toleration_or_never(home, namespace,
                                                                  tainted_node) -> None:
    toleration = {"key": "example.com/evict", "operator": "Exists", "effect": "NoExecute"}
    core = home.core
    core.create_namespaced_pod(namespace, bound_pod("forever", tainted_node, toleration))
    core.create_namespaced_pod(namespace, bound_pod(
        "patient", tainted_node, {**toleration, "tolerationSeconds": 3}))
    core.create_namespaced_pod(namespace, bound_pod("intolerant", tainted_node))

    wait_for(lambda: evicted(core, namespace, "intolerant"), timeout=5)
    assert not evicted(core, namespace, "patient")  # it tolerates the taint for 3 s
    wait_for(lambda: evicted(core, namespace, "patient"), timeout=10)
    assert not evicted(core, namespace, "forever")

    events = wait_for(lambda: len(eviction_events(home, namespace)) >= 2 and
                      eviction_events(home, namespace))
    messages = {e.message for e in events}
    assert messages == {f"Marking for deletion Pod {namespace}/intolerant",
                        f"Marking for deletion Pod {namespace}/patient"}
    # taint eviction is its own controller since v1.29; before, the node lifecycle
    # controller's taint manager recorded these Events as taint-controller
    component = "taint-eviction-controller" if at_least(home, (1, 29)) else "taint-controller"
    assert {(e.type, e.source.component, e.involved_object.kind) for e in events} == {
        ("Normal", component, "Pod")}


@pytest.mark.since("1.26", "pod disruption conditions are on by default")
def test_an_evicted_pod_is_marked_as_a_disruption_target(home, namespace, tainted_node) -> None:
    home.core.create_namespaced_pod(namespace, bound_pod("victim", tainted_node))
    wait_for(lambda: evicted(home.core, namespace, "victim"), timeout=5)
    pod = home.core.read_namespaced_pod("victim", namespace)  # terminating: no kubelet
    target = condition(pod, "DisruptionTarget")
    assert (target.status, target.reason, target.message) == (
        "True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")


def test_removing_the_taint_cancels_a_scheduled_eviction(home, namespace, tainted_node) -> None:
    toleration = {"key": "example.com/evict", "operator": "Exists", "effect": "NoExecute",
                  "tolerationSeconds": 2}
    other_node = f"{tainted_node}-b"
    home.core.create_node({"metadata": {"name": other_node}, "spec": {"taints": [EVICT_TAINT]}})
    try:
        home.core.create_namespaced_pod(namespace, bound_pod("spared", tainted_node, toleration))
        home.core.create_namespaced_pod(namespace, bound_pod("witness", other_node, toleration))
        home.core.patch_node(tainted_node, {"spec": {"taints": []}})
        wait_for(lambda: f"Cancelling deletion of Pod {namespace}/spared" in
                 [e.message for e in eviction_events(home, namespace)])
        wait_for(lambda: evicted(home.core, namespace, "witness"), timeout=10)
        assert not evicted(home.core, namespace, "spared")  # its eviction was called off
    finally:
        home.core.delete_node(other_node)


def test_pods_get_default_tolerations_for_not_ready_and_unreachable_nodes(home, namespace) -> None:
    pod = home.core.create_namespaced_pod(namespace, pod_manifest("plain"))
    assert [(t.key, t.operator, t.effect, t.toleration_seconds) for t in pod.spec.tolerations] == [
        ("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300)]


def test_a_pod_tolerating_the_taint_itself_keeps_its_own_toleration(home, namespace) -> None:
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 7}
    pod = home.core.create_namespaced_pod(namespace, pod_manifest("own", tolerations=[own]))
    assert [(t.key, t.toleration_seconds) for t in pod.spec.tolerations] == [
        ("node.kubernetes.io/unreachable", 7), ("node.kubernetes.io/not-ready", 300)]
    everything = {"operator": "Exists"}  # no key, no effect: tolerates every taint
    pod = home.core.create_namespaced_pod(namespace, pod_manifest("all", tolerations=[everything]))
    assert [(t.key, t.operator) for t in pod.spec.tolerations] == [(None, "Exists")]


@pytest.mark.kubesim_only(reason="kubesim's controller switches")
def test_the_controller_can_be_switched_off() -> None:
    from kubesim.controllers import ALL_CONTROLLERS, parse_controller_names

    assert "taint-eviction-controller" in ALL_CONTROLLERS
    assert "taint-eviction-controller" not in parse_controller_names(
        "*,-taint-eviction-controller")


@pytest.mark.kubesim_only(reason="a simulated cluster of its own with a 2 s default toleration, "
                                 "whose kubelet stops on demand")
def test_pods_on_an_unreachable_node_go_after_the_default_toleration(tmp_path: Path) -> None:
    """What annex relies on: a node whose kubelet is gone loses its pods after the default
    toleration (300 s on a real cluster; 2 s here), not at once and not never; they stay
    Terminating until the kubelet is back."""
    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    sim = Cluster("evicting", workers=1)
    sim.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=1, node_prefix="evicting", node_grace_period=1.0, lease_renew_interval=0.2,
        default_not_ready_toleration_seconds=2, default_unreachable_toleration_seconds=2)
    with ClusterThread([sim], tmp_path):
        api_client = config.new_client_from_config(
            config_file=str(tmp_path / "evicting.kubeconfig"))
        core = client.CoreV1Api(api_client)
        wait_for(lambda: core.read_namespaced_service_account("default", "default"))
        pod = core.create_namespaced_pod("default", pod_manifest("stranded"))
        assert {t.toleration_seconds for t in pod.spec.tolerations} == {2}
        wait_for(lambda: core.read_namespaced_pod("stranded", "default").status.phase
                 == "Running")
        sim.controllers.kubelet.stop_kubelet("evicting-1")
        wait_for(lambda: any(t.key == "node.kubernetes.io/unreachable" and t.effect == "NoExecute"
                             for t in core.read_node("evicting-1").spec.taints or []))
        assert not evicted(core, "default", "stranded")  # tolerated for 2 s
        wait_for(lambda: evicted(core, "default", "stranded"), timeout=10)
        # No kubelet confirms the deletion: past its grace period the pod is still Terminating
        # (what real clusters do until the node comes back or someone force-deletes it).
        deadline = core.read_namespaced_pod("stranded", "default").metadata.deletion_timestamp
        wait_for(lambda: datetime.now(UTC) > deadline + timedelta(seconds=1))
        assert core.read_namespaced_pod("stranded", "default").metadata.deletion_timestamp
        sim.controllers.kubelet.start_kubelet("evicting-1")
        wait_for(lambda: gone(core, "default", "stranded"), timeout=10)
        api_client.close()
