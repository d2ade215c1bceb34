"""The pure rules behind the enforcer (shared.forge.enforcement, shared.offer)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from shared.forge import enforcement
from shared.forge.pod_status import StatusForgeConfig, local_pod_status
from shared.offer import differs_enough, free_resources, pod_reservation, share

SHADOWPOD: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "twin", "uid": "u-1", "generation": 2,
                 "labels": {"app": "web"}, "annotations": {"a": "1"}},
    "spec": {"pod": {"containers": [{"name": "main", "image": "nginx:1"}]}},
}


def with_status(**status: Any) -> dict[str, Any]:
    return {**SHADOWPOD, "status": status}


def test_the_desired_pod_is_controlled_by_its_shadowpod() -> None:
    pod = enforcement.desired_pod(SHADOWPOD)
    assert pod["metadata"]["ownerReferences"] == [{
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod", "name": "web",
        "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]
    assert enforcement.is_controlled_by(pod, SHADOWPOD)
    assert pod["spec"] == SHADOWPOD["spec"]["pod"]
    assert pod["spec"] is not SHADOWPOD["spec"]["pod"]


def test_a_terminal_phase_is_final() -> None:
    done = with_status(phase="Succeeded")
    assert enforcement.is_terminal(done)
    running_pod = {"spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
    assert enforcement.shadowpod_status(done, running_pod) is None


def test_status_is_written_only_when_it_changes() -> None:
    pod = {"spec": {"nodeName": "n1"}, "status": {"phase": "Running", "podIP": "10.0.0.5"}}
    status = enforcement.shadowpod_status(SHADOWPOD, pod)
    assert status == {"phase": "Running", "nodeName": "n1", "podStatus": pod["status"],
                      "observedGeneration": 2}
    assert enforcement.shadowpod_status(with_status(**status), pod) is None


def test_the_first_status_is_written_once_a_kubelet_or_the_scheduler_has_news() -> None:
    created = {"spec": {}, "status": {"phase": "Pending", "qosClass": "BestEffort"}}
    placed = {"spec": {"nodeName": "n1"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}]}}
    assert enforcement.shadowpod_status(SHADOWPOD, created) is None
    assert enforcement.shadowpod_status(SHADOWPOD, placed) is None
    unschedulable = {"spec": {}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    status = enforcement.shadowpod_status(SHADOWPOD, unschedulable)
    assert status is not None and status["podStatus"] == unschedulable["status"]
    reported = {"spec": {"nodeName": "n1"}, "status": {
        **placed["status"], "containerStatuses": [
            {"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    assert enforcement.shadowpod_status(SHADOWPOD, reported) == {
        "phase": "Pending", "nodeName": "n1", "podStatus": reported["status"],
        "observedGeneration": 2}
    # Once a status is written, every later state is (a recreated pod replaces the last one).
    assert enforcement.shadowpod_status(with_status(phase="Running"), created) is not None


def test_recreations_are_counted_in_the_status() -> None:
    assert enforcement.recreated_status(with_status(phase="Running", recreations=2))[
        "recreations"] == 3


def test_a_recreation_carries_the_old_pods_restarts_over_so_home_counts_never_go_down() -> None:
    containers = [{"name": "main", "image": "nginx"}, {"name": "sidecar", "image": "envoy"}]
    shadowpod = {**SHADOWPOD, "spec": {"pod": {"containers": containers}}, "status": {
        "recreations": 1, "carriedRestarts": {"main": 2},
        "podStatus": {"containerStatuses": [{"name": "main", "restartCount": 5},
                                            {"name": "sidecar", "restartCount": 0}]}}}
    status = enforcement.recreated_status(shadowpod)
    # main: 2 carried before + 5 of the vanished pod + 1 for this replacement
    assert status["carriedRestarts"] == {"main": 8, "sidecar": 1}
    assert status["recreations"] == 2


def test_right_after_a_recreation_the_home_count_is_one_more_not_the_old_restarts_twice() -> None:
    containers = [{"name": "main", "image": "nginx"}]
    shadowpod = {**SHADOWPOD, "spec": {"pod": {"containers": containers}}, "status": {
        "phase": "Running", "carriedRestarts": {"main": 2},
        "podStatus": {"phase": "Running",
                      "containerStatuses": [{"name": "main", "restartCount": 5}]}}}
    config = StatusForgeConfig(node_ip="192.0.2.10")

    def home_count(status: dict[str, Any]) -> int:
        home = local_pod_status(status["podStatus"], status["carriedRestarts"], config)
        return int(home["containerStatuses"][0]["restartCount"])

    assert home_count(shadowpod["status"]) == 7
    # Until the replacement reports its own status, the vanished pod's is the one reported.
    assert home_count(enforcement.recreated_status(shadowpod)) == 8


QUOTA_MESSAGE = ('pods "web" is forbidden: exceeded quota: compute, requested: pods=1, '
                 'used: pods=1, limited: pods=1')


def test_a_refused_pod_is_recorded_once_and_cleared_once_the_pod_exists() -> None:
    from datetime import UTC, datetime, timedelta

    first = datetime(2026, 1, 1, tzinfo=UTC)
    status = enforcement.creation_failed_status(SHADOWPOD, "Forbidden", QUOTA_MESSAGE, first)
    assert status is not None
    assert status["conditions"] == [{
        "type": "PodCreated", "status": "False", "reason": "Forbidden",
        "message": QUOTA_MESSAGE, "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    refused = with_status(**status)
    # The same refusal again: nothing to write. Another: written, since-time kept.
    assert enforcement.creation_failed_status(refused, "Forbidden", QUOTA_MESSAGE,
                                              first + timedelta(minutes=1)) is None
    other = enforcement.creation_failed_status(refused, "Invalid", "spec.x: Invalid value",
                                               first + timedelta(minutes=1))
    assert other is not None and other["conditions"][0]["reason"] == "Invalid"
    assert other["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    # An empty reason still reads as a reason.
    assert enforcement.creation_failed_status(SHADOWPOD, "", "no", first)["conditions"][0][
        "reason"] == "CreationFailed"
    # The pod exists: the condition goes with the first status written from it, and with the
    # status of a recreation.
    created = enforcement.shadowpod_status(refused, {"spec": {"nodeName": "n"},
                                                     "status": {"phase": "Pending"}})
    assert created is not None and "conditions" not in created
    assert "conditions" not in enforcement.recreated_status(refused)


def test_other_conditions_outlive_a_refusal() -> None:
    from datetime import UTC, datetime

    kept = {"type": "Example", "status": "True"}
    refused = enforcement.creation_failed_status(with_status(conditions=[kept]), "Forbidden",
                                                 QUOTA_MESSAGE, datetime.now(UTC))
    assert refused is not None and refused["conditions"][0] == kept
    created = enforcement.shadowpod_status(with_status(**refused), {"status": {}})
    assert created is not None and created["conditions"] == [kept]


def test_pod_patch_carries_only_what_changed_and_a_pod_allows() -> None:
    pod = enforcement.desired_pod(SHADOWPOD)
    assert enforcement.pod_patch(pod, SHADOWPOD) is None
    changed = {**SHADOWPOD,
               "metadata": {**SHADOWPOD["metadata"], "labels": {"app": "web", "v": "2"},
                            "annotations": {}},
               "spec": {"pod": {"containers": [{"name": "main", "image": "nginx:2"}],
                                "activeDeadlineSeconds": 30}}}
    assert enforcement.pod_patch(pod, changed) == {
        "metadata": {"labels": {"v": "2"}, "annotations": {"a": None}},
        "spec": {"containers": [{"name": "main", "image": "nginx:2"}],
                 "activeDeadlineSeconds": 30}}


def test_tolerations_are_only_ever_added_to_the_pod() -> None:
    pod = enforcement.desired_pod(SHADOWPOD)
    admitted = {"key": "node.kubernetes.io/not-ready", "operator": "Exists"}
    pod["spec"]["tolerations"] = [admitted]  # added by the cluster's admission
    assert enforcement.pod_patch(pod, SHADOWPOD) is None
    tolerant = {**SHADOWPOD, "spec": {"pod": {**SHADOWPOD["spec"]["pod"],
                                              "tolerations": [{"key": "gpu"}]}}}
    assert enforcement.pod_patch(pod, tolerant) == {
        "spec": {"tolerations": [admitted, {"key": "gpu"}]}}


def test_forbidden_spec_changes() -> None:
    old = {"containers": [{"name": "main", "image": "a"}], "tolerations": [{"key": "k"}]}
    allowed = {"containers": [{"name": "main", "image": "b"}], "activeDeadlineSeconds": 5,
               "tolerations": [{"key": "k"}, {"key": "new"}]}
    assert enforcement.forbidden_spec_change(old, allowed) is None
    for forbidden in ({**old, "containers": [{"name": "main", "image": "a", "args": ["x"]}]},
                      {**old, "tolerations": []},
                      {**old, "nodeName": "elsewhere"}):
        message = enforcement.forbidden_spec_change(old, forbidden)
        assert message is not None and message.startswith("spec.pod: Forbidden: ")


DEBUGGER = {"name": "debugger", "image": "busybox:1.36", "targetContainerName": "main"}


def test_ephemeral_containers_may_only_be_added_as_a_pods_subresource_allows() -> None:
    old = {"containers": [{"name": "main", "image": "a"}], "ephemeralContainers": [DEBUGGER]}
    added = {**old, "ephemeralContainers": [DEBUGGER, {"name": "second", "image": "busybox"}]}
    assert enforcement.forbidden_spec_change(old, added) is None
    for forbidden in ({**old, "ephemeralContainers": []},
                      {**old, "ephemeralContainers": [{**DEBUGGER, "image": "busybox:1.37"}]}):
        assert enforcement.forbidden_spec_change(old, forbidden) == (
            'spec.pod.ephemeralContainers: Forbidden: existing ephemeral containers "debugger" '
            "may not be changed or removed")


def test_a_pod_is_made_without_its_ephemeral_containers_then_given_the_missing_ones() -> None:
    debugged = {**SHADOWPOD, "spec": {"pod": {**SHADOWPOD["spec"]["pod"],
                                              "ephemeralContainers": [DEBUGGER]}}}
    pod = enforcement.desired_pod(debugged)
    assert "ephemeralContainers" not in pod["spec"]  # the API server refuses them on create
    assert enforcement.pod_patch(pod, debugged) is None  # not through a plain pod update
    assert enforcement.ephemeral_containers_patch(pod, debugged) == {
        "spec": {"ephemeralContainers": [DEBUGGER]}}
    pod["spec"]["ephemeralContainers"] = [DEBUGGER]
    assert enforcement.ephemeral_containers_patch(pod, debugged) is None


def node(name: str, cpu: str, ready: bool = True, unschedulable: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "10"},
                       "conditions": [{"type": "Ready",
                                       "status": "True" if ready else "False"}]}}


def pod(node_name: str | None, cpu: str, phase: str = "Running") -> dict[str, Any]:
    return {"spec": {"nodeName": node_name, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}, "status": {"phase": phase}}


def test_free_resources_count_only_schedulable_ready_nodes_and_holding_pods() -> None:
    nodes = [node("a", "4"), node("b", "8", ready=False), node("c", "8", unschedulable=True)]
    holding = [r for r in (pod_reservation(p) for p in [
        pod("a", "1"), pod("a", "500m", phase="Succeeded"), pod(None, "2"), pod("b", "1")])
        if r is not None]
    free = free_resources(nodes, holding)
    assert free["cpu"] == Decimal(3)
    assert free["pods"] == Decimal(9)
    assert share(free, Decimal(50)) == {"cpu": "1500m", "memory": "2Gi", "pods": "4",
                                        "ephemeral-storage": "0"}


def test_small_moves_are_not_worth_a_write() -> None:
    assert not differs_enough({"cpu": "1000m"}, {"cpu": "1005m"}, Decimal(1))
    assert differs_enough({"cpu": "1000m"}, {"cpu": "1020m"}, Decimal(1))
    assert differs_enough({"cpu": "0"}, {"cpu": "1m"}, Decimal(1))
    assert differs_enough({"cpu": "1"}, {"cpu": "1", "memory": "1Gi"}, Decimal(1))
