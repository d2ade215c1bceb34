"""shared.forge.shadowpod_plan: what the enforcer writes for a ShadowPod, given everything it
reads. Each case is one situation: the inputs that differ from a ShadowPod just made in a twin
namespace of its origin (no pod yet), and the plan. Then what the pod's creation answers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from shared.api.quota import PodPolicy
from shared.forge.enforcement import desired_pod, recreated_status, shadowpod_status
from shared.forge.shadowpod_plan import (
    FAILED_CREATE_REASON,
    POLICY_REFUSED_REASON,
    AddEphemeralContainers,
    CreatePod,
    LookUpNamespace,
    PatchPod,
    ReadShadowPod,
    RecordEvent,
    RecordRecreation,
    ReportForeignPod,
    ShadowPodInputs,
    ShadowPodPlan,
    WriteStatus,
    created_pod,
    foreign_pod,
    refused_pod,
    shadowpod_plan,
)
from shared.pools import Pool
from shared.wellknown import ORIGIN_CLUSTER_LABEL, POD_CREATED_CONDITION

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TWIN = "shop-home"


def a_shadowpod(**status: Any) -> dict[str, Any]:
    """A ShadowPod of the consumer `home` in its twin namespace, with `status`."""
    shadowpod: dict[str, Any] = {
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "ShadowPod",
        "metadata": {"name": "web", "namespace": TWIN, "uid": "uid-shadow",
                     "resourceVersion": "20", "generation": 1,
                     "labels": {ORIGIN_CLUSTER_LABEL: "home", "app": "web"}},
        "spec": {"pod": {"containers": [{"name": "app", "image": "nginx:1"}]}}}
    if status:
        shadowpod["status"] = status
    return shadowpod


def its_pod(shadowpod: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    """The pod the enforcer made for `shadowpod`, in `phase`."""
    pod = desired_pod(shadowpod)
    pod["metadata"].update(uid="uid-pod", resourceVersion="30")
    pod["spec"]["nodeName"] = "worker-1"
    pod["status"] = {"phase": phase, "containerStatuses": [
        {"name": "app", "restartCount": 2, "ready": phase == "Running"}]}
    return pod


def inputs(shadowpod: dict[str, Any] | None = None, pod: dict[str, Any] | None = None,
           **changes: Any) -> ShadowPodInputs:
    """The inputs of `shadowpod` (one just made unless given) in a twin namespace of its
    origin (looked up), the ShadowPod read from the cache."""
    base = ShadowPodInputs(
        shadowpod=a_shadowpod() if shadowpod is None else shadowpod, pod=pod, now=NOW,
        namespace_looked_up=True, namespace={"metadata": {"name": TWIN}}, consumer="home",
        pod_policy=PodPolicy())
    return dataclasses.replace(base, **changes)


def reported(shadowpod: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """`shadowpod` once the status of `pod` is copied into it."""
    return {**shadowpod, "status": shadowpod_status(shadowpod, pod)}


def assert_refused_saying(plan: ShadowPodPlan, shadowpod: dict[str, Any], reason: str,
                          text: str) -> None:
    """`plan` makes no pod, says why (`text`) in an Event and the PodCreated False condition
    with `reason`, and is retried."""
    event, status = plan.steps
    assert plan.refused is not None and text in plan.refused
    assert event == RecordEvent(shadowpod, FAILED_CREATE_REASON,
                                f"cannot create the pod: {plan.refused}")
    assert isinstance(status, WriteStatus) and status.shadowpod == shadowpod
    assert status.status["conditions"] == [{
        "type": POD_CREATED_CONDITION, "status": "False", "reason": reason,
        "message": plan.refused, "lastTransitionTime": "2026-12-01T12:00:00Z"}]


# --- no pod yet ------------------------------------------------------------------------------

def test_a_shadowpod_just_made_gets_its_pod_from_the_cache() -> None:
    shadowpod = a_shadowpod()
    assert shadowpod_plan(inputs()) == ShadowPodPlan((CreatePod(shadowpod,
                                                                desired_pod(shadowpod)),))


def test_a_shadowpod_gone_or_being_deleted_is_left_to_the_garbage_collector() -> None:
    deleting = a_shadowpod()
    deleting["metadata"]["deletionTimestamp"] = "2026-12-01T11:59:00Z"
    assert shadowpod_plan(inputs(shadowpod=deleting)) == ShadowPodPlan()
    assert shadowpod_plan(inputs(shadowpod=deleting, pod=its_pod(deleting))) == ShadowPodPlan()
    assert shadowpod_plan(dataclasses.replace(inputs(), shadowpod=None)) == ShadowPodPlan()


def test_a_terminal_shadowpod_never_gets_a_pod_again() -> None:
    assert shadowpod_plan(inputs(a_shadowpod(phase="Succeeded"))) == ShadowPodPlan()


def test_a_pod_seen_gone_is_made_again_only_once_the_api_server_s_shadowpod_says_so() -> None:
    shadowpod = a_shadowpod()
    seen_gone = inputs(deleted_pod=its_pod(shadowpod))
    assert shadowpod_plan(seen_gone) == ShadowPodPlan((ReadShadowPod(),))
    read = a_shadowpod()
    read["metadata"]["resourceVersion"] = "21"
    assert shadowpod_plan(dataclasses.replace(seen_gone, shadowpod=read, shadowpod_read=True)) \
        == ShadowPodPlan((CreatePod(read, desired_pod(read)),))
    assert shadowpod_plan(dataclasses.replace(seen_gone, shadowpod=None,
                                              shadowpod_read=True)) == ShadowPodPlan()


def test_a_status_that_reports_a_pod_makes_a_missing_pod_one_seen_gone() -> None:
    shadowpod = reported(a_shadowpod(), its_pod(a_shadowpod()))
    assert shadowpod_plan(inputs(shadowpod)) == ShadowPodPlan((ReadShadowPod(),))
    # Read, the ShadowPod turns out terminal (its pod finished meanwhile): no pod.
    finished = a_shadowpod(phase="Failed")
    assert shadowpod_plan(inputs(finished, shadowpod_read=True)) == ShadowPodPlan()


def test_a_pod_deleted_in_a_terminal_phase_is_recorded_first_and_never_made_again() -> None:
    shadowpod = a_shadowpod()
    done = its_pod(shadowpod, phase="Succeeded")
    plan = shadowpod_plan(inputs(deleted_pod=done))
    assert plan == ShadowPodPlan((WriteStatus(shadowpod, shadowpod_status(shadowpod, done) or {},
                                              final=True),))
    assert plan.steps[0].status["phase"] == "Succeeded"  # type: ignore[union-attr]


def test_a_deleted_pod_the_shadowpod_does_not_control_records_nothing() -> None:
    shadowpod = a_shadowpod()
    other = its_pod(shadowpod, phase="Failed")
    other["metadata"]["ownerReferences"][0]["uid"] = "uid-other"
    assert shadowpod_plan(inputs(deleted_pod=other)) == ShadowPodPlan((ReadShadowPod(),))


def test_the_namespace_and_its_consumer_s_policy_are_looked_up_only_for_a_pod_to_make(
        ) -> None:
    unknown = inputs(namespace_looked_up=False, namespace=None, consumer=None, pod_policy=None)
    assert shadowpod_plan(unknown) == ShadowPodPlan((LookUpNamespace(),))
    shadowpod = a_shadowpod()
    pod = its_pod(shadowpod)
    assert shadowpod_plan(dataclasses.replace(unknown, pod=pod)) == ShadowPodPlan(
        (WriteStatus(shadowpod, shadowpod_status(shadowpod, pod) or {}),))
    # Looked up, and nobody's twin (or no namespace at all): refused.
    plan = shadowpod_plan(dataclasses.replace(unknown, namespace_looked_up=True))
    assert_refused_saying(plan, a_shadowpod(), POLICY_REFUSED_REASON,
                          f"namespace '{TWIN}' does not belong to any consumer")


def test_a_shadowpod_of_another_origin_than_its_twin_s_consumer_gets_no_pod() -> None:
    plan = shadowpod_plan(inputs(consumer="other", pod_policy=PodPolicy()))
    assert_refused_saying(plan, a_shadowpod(), POLICY_REFUSED_REASON,
                          "does not match the consumer 'other'")


def test_a_pod_against_the_consumer_s_policy_is_not_made_even_if_admission_was_bypassed(
        ) -> None:
    shadowpod = a_shadowpod()
    shadowpod["spec"]["pod"]["containers"][0]["securityContext"] = {"privileged": True}
    plan = shadowpod_plan(inputs(shadowpod))
    assert_refused_saying(plan, shadowpod, POLICY_REFUSED_REASON, "privileged")


def test_a_pod_is_made_on_its_pool_s_nodes_and_an_undeclared_pool_gets_none() -> None:
    gpu, general = Pool("gpu", (("gpu", "true"),)), Pool("general", (("gpu", "false"),))
    shadowpod = a_shadowpod()
    shadowpod["spec"]["pool"] = "gpu"
    (create,) = shadowpod_plan(inputs(shadowpod, pools=(gpu, general))).steps
    assert isinstance(create, CreatePod)
    affinity = create.body["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        gpu.term()]
    shadowpod["spec"]["pool"] = "zone-b"
    plan = shadowpod_plan(inputs(shadowpod, pools=(gpu, general)))
    assert_refused_saying(plan, shadowpod, POLICY_REFUSED_REASON, "zone-b")


def test_a_pod_is_made_in_the_pools_lent_to_its_consumer_only() -> None:
    gpu, general = Pool("gpu", (("gpu", "true"),)), Pool("general", (("gpu", "false"),))
    shadowpod = a_shadowpod()  # naming no pool: in every pool lent, here general only
    (create,) = shadowpod_plan(inputs(shadowpod, pools=(gpu, general),
                                      lent_pools=("general",))).steps
    assert isinstance(create, CreatePod)
    affinity = create.body["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        general.term()]
    # Admitted before its Quota stopped lending the pool: its pod is not made.
    shadowpod["spec"]["pool"] = "gpu"
    plan = shadowpod_plan(inputs(shadowpod, pools=(gpu, general), lent_pools=("general",)))
    assert_refused_saying(plan, shadowpod, POLICY_REFUSED_REASON, "'gpu' is not lent")


def test_a_refusal_already_recorded_is_said_again_in_an_event_only() -> None:
    shadowpod = a_shadowpod()
    shadowpod["spec"]["pod"]["containers"][0]["securityContext"] = {"privileged": True}
    first = shadowpod_plan(inputs(shadowpod))
    recorded = {**shadowpod, "status": first.steps[1].status}  # type: ignore[union-attr]
    again = shadowpod_plan(inputs(recorded, now=NOW.replace(hour=13)))
    assert again == ShadowPodPlan((dataclasses.replace(first.steps[0], shadowpod=recorded),),
                                  refused=first.refused)


# --- a pod there -----------------------------------------------------------------------------

def test_a_running_pod_s_status_is_copied_into_its_shadowpod_once() -> None:
    shadowpod = a_shadowpod()
    pod = its_pod(shadowpod)
    plan = shadowpod_plan(inputs(shadowpod, pod))
    assert plan == ShadowPodPlan((WriteStatus(shadowpod, shadowpod_status(shadowpod, pod) or {}),))
    assert shadowpod_plan(inputs(reported(shadowpod, pod), pod)) == ShadowPodPlan()


def test_a_pod_the_shadowpod_does_not_control_is_left_alone_and_said() -> None:
    shadowpod = a_shadowpod()
    pod = its_pod(shadowpod)
    pod["metadata"]["ownerReferences"] = []
    plan = shadowpod_plan(inputs(shadowpod, pod))
    assert plan == ShadowPodPlan((ReportForeignPod(
        shadowpod, f"pod {TWIN}/web exists and is not controlled by this ShadowPod"),))
    assert plan.steps[0] == foreign_pod(pod, shadowpod)


def test_a_new_image_reaches_the_pod_and_so_do_ephemeral_containers() -> None:
    shadowpod = a_shadowpod()
    pod = its_pod(shadowpod)
    shadowpod = reported(shadowpod, pod)
    shadowpod["spec"]["pod"] = {
        "containers": [{"name": "app", "image": "nginx:2"}],
        "ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}
    plan = shadowpod_plan(inputs(shadowpod, pod))
    assert plan == ShadowPodPlan((
        PatchPod({"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}),
        AddEphemeralContainers(pod, {"spec": {"ephemeralContainers": [
            {"name": "debugger", "image": "busybox"}]}})))


def test_a_pod_being_deleted_only_reports_its_status() -> None:
    shadowpod = a_shadowpod()
    pod = its_pod(shadowpod)
    shadowpod = reported(shadowpod, pod)
    shadowpod["spec"]["pod"]["containers"][0]["image"] = "nginx:2"
    pod["metadata"]["deletionTimestamp"] = "2026-12-01T11:59:00Z"
    pod["status"]["phase"] = "Failed"
    plan = shadowpod_plan(inputs(shadowpod, pod))
    assert plan == ShadowPodPlan((WriteStatus(shadowpod, shadowpod_status(shadowpod, pod) or {}),))


# --- what the pod's creation answers ---------------------------------------------------------

def test_a_first_pod_made_needs_nothing_more_and_a_pod_made_again_carries_restarts() -> None:
    assert created_pod(a_shadowpod()) == ShadowPodPlan()
    vanished = reported(a_shadowpod(), its_pod(a_shadowpod()))
    plan = created_pod(vanished)
    assert plan == ShadowPodPlan((RecordRecreation(vanished, recreated_status(vanished)),))
    assert plan.steps[0].status["carriedRestarts"] == {"app": 3}  # type: ignore[union-attr]


def test_a_pod_the_api_server_refuses_is_recorded_with_its_reason() -> None:
    shadowpod = a_shadowpod()
    plan = refused_pod(shadowpod, "Forbidden", "exceeded quota: compute", NOW)
    assert_refused_saying(plan, shadowpod, "Forbidden", "exceeded quota")
