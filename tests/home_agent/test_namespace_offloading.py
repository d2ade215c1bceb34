"""NamespaceOffloading → the NamespaceMap entry on the remote side → status; deletion unwinds."""

from __future__ import annotations

from typing import Any

from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.play import (
    accept_mapping,
    desired_mapping,
    namespace_offloading,
    offload_namespace,
    set_current_mapping,
)


def status(home: ClusterHandle, namespace: str) -> dict[str, Any]:
    return namespace_offloading(home, namespace).get("status") or {}


def test_a_namespace_is_extended_once_the_remote_accepts(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    offload_namespace(home, namespace)
    twin = wait_for(lambda: desired_mapping(remote, agent).get(namespace), timeout=30,
                    message="NamespaceMap entry")
    assert twin == f"{namespace}-{agent.home_id}"
    wait_for(lambda: status(home, namespace).get("offloadingPhase") == "InProgress",
             timeout=30, message="InProgress while the remote has not answered")

    accept_mapping(remote, agent, namespace)
    wait_for(lambda: status(home, namespace).get("offloadingPhase") == "Ready", timeout=30,
             message="Ready once Accepted")
    current = status(home, namespace)
    assert current["remoteNamespaceName"] == twin
    [condition] = current["remoteNamespacesConditions"][agent.remote_id]
    assert (condition["type"], condition["status"]) == ("Ready", "True")
    assert namespace_offloading(home, namespace)["metadata"]["finalizers"]


def test_a_refused_twin_namespace_is_reported(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    offload_namespace(home, namespace, namespaceMappingStrategy="EnforceSameName")
    wait_for(lambda: desired_mapping(remote, agent).get(namespace) == namespace, timeout=30,
             message="EnforceSameName entry")
    set_current_mapping(remote, agent, namespace, {
        "remoteNamespace": namespace, "phase": "CreationLoopBackOff",
        "message": "namespace exists and is not managed by annex"})
    wait_for(lambda: status(home, namespace).get("offloadingPhase") == "AllFailed",
             timeout=30, message="AllFailed")
    [condition] = status(home, namespace)["remoteNamespacesConditions"][agent.remote_id]
    assert condition["reason"] == "CreationLoopBackOff"
    assert "not managed by annex" in condition["message"]


def test_a_cluster_selector_that_does_not_match_selects_nothing(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    offload_namespace(home, namespace, clusterSelector={"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "liqo.io/remote-cluster-id", "operator": "In",
                              "values": ["some-other-cluster"]}]}]})
    wait_for(lambda: status(home, namespace).get("offloadingPhase") == "NoClusterSelected",
             timeout=30, message="NoClusterSelected")
    assert namespace not in desired_mapping(remote, agent)


def test_deleting_the_namespace_offloading_unwinds(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    from tests.home_agent.play import custom

    agent = start_agent()
    offload_namespace(home, namespace)
    accept_mapping(remote, agent, namespace)
    wait_for(lambda: status(home, namespace).get("offloadingPhase") == "Ready", timeout=30)
    custom(home).delete_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", namespace, "namespaceoffloadings", "offloading")
    wait_for(lambda: namespace not in desired_mapping(remote, agent), timeout=30,
             message="mapping entry removed")
    # Held by the finalizer until the enforcer reports the twin namespace gone.
    assert namespace_offloading(home, namespace)["metadata"]["deletionTimestamp"]
    set_current_mapping(remote, agent, namespace, None)

    def gone() -> bool:
        try:
            namespace_offloading(home, namespace)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, timeout=30, message="NamespaceOffloading released")
    wait_for(lambda: "liqo.io/scheduling-enabled" not in (
        home.core.read_namespace(namespace).metadata.labels or {}), timeout=30,
        message="the namespace is no longer labelled for the pod webhook")


def test_an_invalid_selected_name_is_reported_and_nothing_is_requested(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    agent = start_agent()
    offload_namespace(home, namespace, namespaceMappingStrategy="SelectedName",
                      remoteNamespaceName="Not_Valid")
    wait_for(lambda: status(home, namespace).get("offloadingPhase") == "AllFailed",
             timeout=30, message="AllFailed")
    [condition] = status(home, namespace)["remoteNamespacesConditions"][agent.remote_id]
    assert condition["reason"] == "InvalidNamespaceName"
    assert "Not_Valid" in condition["message"]
    assert namespace not in desired_mapping(remote, agent)


def test_a_namespace_no_longer_selected_is_released_once_its_twin_is_gone(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_agent: Any) -> None:
    """A NamespaceOffloading whose selector stops naming this cluster keeps its finalizer
    until the enforcer reports the twin gone, then says NoClusterSelected."""
    from tests.home_agent.play import custom

    agent = start_agent()
    offload_namespace(home, namespace)
    accept_mapping(remote, agent, namespace)
    wait_for(lambda: status(home, namespace).get("offloadingPhase") == "Ready", timeout=30)
    custom(home).patch_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", namespace, "namespaceoffloadings", "offloading",
        {"spec": {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{
            "key": "liqo.io/remote-cluster-id", "operator": "In",
            "values": ["some-other-cluster"]}]}]}}})
    wait_for(lambda: namespace not in desired_mapping(remote, agent), timeout=30,
             message="mapping entry removed")
    set_current_mapping(remote, agent, namespace, None)
    wait_for(lambda: not namespace_offloading(home, namespace)["metadata"].get("finalizers"),
             timeout=30, message="finalizer removed once the twin is gone")
    assert status(home, namespace).get("offloadingPhase") == "NoClusterSelected"
