"""shared.forge.pod_plan: what the agent writes for a home pod bound to its virtual node, given
everything it reads. Each case is one situation: the inputs that differ from a pod just bound
in an extended namespace, and the plan (its steps, whether it is retried or looked at again).
Then what a write's answer tells."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.forge.daemonset import DAEMONSET_POD_REASON
from shared.forge.metadata import ReflectionConfig
from shared.forge.node import MAX_POD_ANNOTATION
from shared.forge.pod import PodForgeConfig, shadow_pod
from shared.forge.pod_inputs import OffloadingInputs, PodInputs
from shared.forge.pod_plan import (
    COPY_WAIT,
    AddEphemeralContainers,
    CreateShadowPod,
    DeleteShadowPod,
    ForgetPod,
    PatchShadowPod,
    PodPlan,
    RecordEvent,
    ReleasePod,
    ReturnToScheduler,
    StopWaitingForCopies,
    WaitForCopies,
    WriteStatus,
    foreign_shadow_pod,
    foreign_shadow_pod_message,
    pod_plan,
    refused_creation,
)
from shared.forge.pod_status import StatusForgeConfig
from shared.wellknown import (
    DESTINATION_CLUSTER_LABEL,
    FAILED_REFLECTION_REASON,
    OFFLOADING_BACKOFF_REASON,
    ORIGIN_CLUSTER_LABEL,
    REMOTE_CREATION_FAILED_CONDITION,
    RETURNED_TO_SCHEDULER_REASON,
    VIRTUAL_STORAGE_PROVISIONER,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TWIN = "shop-home"
NODE = "liqo-remote"
OURS = {ORIGIN_CLUSTER_LABEL: "home", DESTINATION_CLUSTER_LABEL: "remote"}
FORGE = PodForgeConfig(reflection=ReflectionConfig(home_cluster_id="home",
                                                   remote_cluster_id="remote"))
STATUS = StatusForgeConfig(node_ip="192.0.2.10")
TOKEN = {"name": "kube-api-access", "projected": {"sources": [
    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}
SETTINGS_COPY = ("configmaps", TWIN, "settings")


def a_pod(**changes: Any) -> dict[str, Any]:
    """A pod bound to the virtual node, Pending (what the scheduler leaves)."""
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web",
                     "resourceVersion": "10", "labels": {"app": "web"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "nginx:1"}]},
        "status": {"phase": "Pending"}}
    for path, value in changes.items():
        *parents, last = path.split("__")
        at = pod
        for parent in parents:
            at = at.setdefault(parent, {})
        at[last] = value
    return pod


def its_shadow(pod: dict[str, Any], **status: Any) -> dict[str, Any]:
    """The pod's ShadowPod as the agent made it, as the provider reports it."""
    made = shadow_pod(pod, TWIN, FORGE)
    made["metadata"].update(uid="uid-shadow", resourceVersion="20")
    made["status"] = status
    return made


def offloading(**changes: Any) -> OffloadingInputs:
    """A pod with nothing in its way: no claims, a virtual node with room, its token Secret
    made, no copy to wait for."""
    return dataclasses.replace(OffloadingInputs(
        claims={}, volumes={}, node={"metadata": {"name": NODE}}, webhook_serves=True,
        returned_since=None, tokens_reflected=True, token_secret_made=True, pending_copies=(),
        waiting_since=None, clock=100.0), **changes)


def inputs(pod: dict[str, Any] | None = None, shadow: dict[str, Any] | None = None,
           **changes: Any) -> PodInputs:
    """The inputs of `pod` (a pod just bound unless given) in a namespace whose twin is
    accepted; the offloading inputs of a pod to offload."""
    pod = a_pod() if pod is None else pod
    live = pod is not None and not pod["metadata"].get("deletionTimestamp")
    base = PodInputs(
        key=("shop", "web"), pod=pod, shadow=shadow, mapped_namespace=TWIN,
        accepted_namespace=TWIN, node_name=NODE, pool=None, forge=FORGE, status=STATUS,
        unkept_status=frozenset(), refused_ephemeral=frozenset(), now=NOW,
        offloading=offloading() if live and shadow is None else None)
    return dataclasses.replace(base, **changes)


def gone() -> PodInputs:
    return dataclasses.replace(inputs(), pod=None, offloading=None)


def held(message: str, reason: str = OFFLOADING_BACKOFF_REASON) -> WriteStatus:
    """The status of a pod held at home: Pending with `reason` and `message`."""
    return WriteStatus({"phase": "Pending", "reason": reason, "message": message})


def assert_held_saying(plan: PodPlan, text: str) -> None:
    """`plan` holds the pod Pending, an Event saying why (with `text`), looked at again."""
    status, event = plan.steps
    assert plan.retry and isinstance(event, RecordEvent)
    assert event.reason == OFFLOADING_BACKOFF_REASON and text in event.message
    assert status == held(event.message)


# --- pods not offloaded yet ------------------------------------------------------------------

def test_a_pod_with_nothing_in_its_way_gets_its_shadowpod() -> None:
    plan = pod_plan(inputs())
    assert plan == PodPlan((StopWaitingForCopies(), CreateShadowPod(shadow_pod(a_pod(), TWIN,
                                                                               FORGE))))


def test_a_pod_bound_to_a_pools_node_gets_a_shadowpod_naming_that_pool() -> None:
    """The pool is the node's, as the agent made it, whatever the pod says."""
    pod = a_pod(spec__nodeName=f"{NODE}-gpu", spec__nodeSelector={
        "offloading.liqo.io/pool": "cpu"})
    step = pod_plan(inputs(pod, node_name=f"{NODE}-gpu", pool="gpu")).steps[-1]
    assert isinstance(step, CreateShadowPod)
    assert step.body["spec"]["pool"] == "gpu"
    alone = pod_plan(inputs(pod)).steps[-1]
    assert isinstance(alone, CreateShadowPod) and "pool" not in alone.body["spec"]


def test_what_cannot_be_honoured_is_said_in_an_event_before_the_creation() -> None:
    pod = a_pod(metadata__annotations={"liqo.io/api-server-support": "sometimes"})
    steps = pod_plan(inputs(pod)).steps
    assert [type(step) for step in steps] == [StopWaitingForCopies, RecordEvent, CreateShadowPod]
    assert steps[1] == RecordEvent(pod, FAILED_REFLECTION_REASON, steps[1].message)
    assert "sometimes" in steps[1].message


def test_a_namespace_not_extended_holds_the_pod_pending() -> None:
    plan = pod_plan(inputs(accepted_namespace=None, offloading=None))
    [status] = plan.steps
    assert isinstance(status, WriteStatus) and not plan.retry
    assert (status.status["phase"], status.status["reason"]) == (
        "Pending", OFFLOADING_BACKOFF_REASON)
    assert "is not offloaded to this virtual node's cluster" in status.status["message"]


def test_a_pod_already_said_held_is_not_written_again() -> None:
    first = pod_plan(inputs(accepted_namespace=None, offloading=None)).steps[0]
    assert isinstance(first, WriteStatus)
    pod = a_pod(status=first.status)
    assert pod_plan(inputs(pod, accepted_namespace=None, offloading=None)) == PodPlan()


def test_a_daemon_sets_pod_is_never_offloaded_and_said_so_once() -> None:
    reference = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds",
                 "controller": True}
    pod = a_pod(metadata__ownerReferences=[reference])
    steps = pod_plan(inputs(pod)).steps
    assert [type(step) for step in steps] == [WriteStatus, RecordEvent, RecordEvent]
    status, on_pod, on_daemon_set = steps
    assert status.status["reason"] == DAEMONSET_POD_REASON
    assert on_pod.about is pod
    assert on_daemon_set.about["kind"] == "DaemonSet"
    assert on_daemon_set.message == f"pod web: {on_pod.message}"
    said = a_pod(metadata__ownerReferences=[reference], status=status.status)
    assert pod_plan(inputs(said)) == PodPlan()


CLAIM_VOLUME = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}


def a_claim(volume: str | None) -> dict[str, Any]:
    return {"metadata": {"name": "data", "namespace": "shop"},
            "spec": {"volumeName": volume} if volume else {}}


def test_a_claim_not_known_bound_yet_is_looked_at_again_with_nothing_written() -> None:
    pod = a_pod(spec__volumes=[CLAIM_VOLUME])
    plan = pod_plan(inputs(pod, offloading=offloading(claims={"data": a_claim(None)})))
    assert plan == PodPlan(retry=True)


def test_claims_not_reflected_are_never_waited_for() -> None:
    pod = a_pod(spec__volumes=[CLAIM_VOLUME])
    plan = pod_plan(inputs(pod, offloading=offloading(claims=None)))
    assert isinstance(plan.steps[-1], CreateShadowPod)


def test_a_claim_bound_to_a_home_volume_holds_the_pod_saying_which() -> None:
    pod = a_pod(spec__volumes=[CLAIM_VOLUME])
    home_volume = {"metadata": {"name": "pv-home", "annotations": {}}, "spec": {}}
    plan = pod_plan(inputs(pod, offloading=offloading(claims={"data": a_claim("pv-home")},
                                                      volumes={"pv-home": home_volume})))
    assert_held_saying(plan, 'persistentvolumeclaim "data" is bound to the home volume "pv-home"')


def test_a_claim_bound_to_this_virtual_nodes_volume_is_offloaded() -> None:
    pod = a_pod(spec__volumes=[CLAIM_VOLUME])
    ours = {"metadata": {"name": "pv-ours", "annotations": {
        "pv.kubernetes.io/provisioned-by": VIRTUAL_STORAGE_PROVISIONER}},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}]}}}}
    plan = pod_plan(inputs(pod, offloading=offloading(claims={"data": a_claim("pv-ours")},
                                                      volumes={"pv-ours": ours})))
    assert isinstance(plan.steps[-1], CreateShadowPod)


BIG = [{"name": "app", "image": "nginx:1", "resources": {"requests": {"cpu": "3"}}}]
SMALL_NODE = {"metadata": {"name": NODE, "annotations": {MAX_POD_ANNOTATION: json.dumps(
    {"cpu": "1500m"})}}}
CONTROLLER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "rs",
              "controller": True}


def test_a_pod_no_provider_node_has_room_for_is_returned_to_its_controller() -> None:
    pod = a_pod(spec__containers=BIG, metadata__ownerReferences=[CONTROLLER])
    plan = pod_plan(inputs(pod, offloading=offloading(node=SMALL_NODE)))
    event, returned = plan.steps
    assert not plan.retry and isinstance(event, RecordEvent)
    assert event.reason == RETURNED_TO_SCHEDULER_REASON and "cpu 3 > 1500m" in event.message
    assert returned == ReturnToScheduler("uid-web", "rs", event.message)


def test_a_pod_no_provider_node_has_room_for_is_held_when_nothing_would_keep_it_off() -> None:
    pod = a_pod(spec__containers=BIG, metadata__ownerReferences=[CONTROLLER])
    plan = pod_plan(inputs(pod, offloading=offloading(node=SMALL_NODE, webhook_serves=False)))
    assert_held_saying(plan, "without the agent's pod webhook")


def test_a_pod_whose_token_secret_is_not_made_yet_waits_for_its_event() -> None:
    pod = a_pod(spec__volumes=[TOKEN])
    assert pod_plan(inputs(pod, offloading=offloading(token_secret_made=False))) == PodPlan()


def test_without_token_reflection_no_token_secret_is_waited_for() -> None:
    pod = a_pod(spec__volumes=[TOKEN])
    plan = pod_plan(inputs(pod, offloading=offloading(token_secret_made=False,
                                                      tokens_reflected=False)))
    assert isinstance(plan.steps[-1], CreateShadowPod)


def test_a_pod_waits_for_the_copies_still_to_come_and_since_when_is_kept() -> None:
    first = pod_plan(inputs(offloading=offloading(pending_copies=(SETTINGS_COPY,))))
    assert first == PodPlan((WaitForCopies((SETTINGS_COPY,), 100.0),), requeue_after=COPY_WAIT)
    later = pod_plan(inputs(offloading=offloading(pending_copies=(SETTINGS_COPY,),
                                                  waiting_since=100.0, clock=110.0)))
    assert later == PodPlan((WaitForCopies((SETTINGS_COPY,), 100.0),),
                            requeue_after=COPY_WAIT - 10)


def test_a_copy_that_does_not_come_in_time_is_given_up_and_the_pod_offloaded() -> None:
    plan = pod_plan(inputs(offloading=offloading(pending_copies=(SETTINGS_COPY,),
                                                 waiting_since=100.0, clock=100.0 + COPY_WAIT)))
    assert plan.steps[0] == StopWaitingForCopies((SETTINGS_COPY,))
    assert isinstance(plan.steps[-1], CreateShadowPod) and plan.requeue_after is None


def test_a_pod_to_offload_is_decided_with_its_offloading_inputs_only() -> None:
    with pytest.raises(ValueError, match="offloading inputs"):
        pod_plan(inputs(offloading=None))


# --- offloaded pods --------------------------------------------------------------------------

def test_an_offloaded_pod_unchanged_with_its_status_home_asks_for_nothing() -> None:
    pod = a_pod()
    shadow = its_shadow(pod, podStatus={"phase": "Running", "podIP": "10.0.0.7"})
    status = pod_plan(inputs(pod, shadow)).steps
    [write] = status
    assert isinstance(write, WriteStatus)
    assert write.status["podIP"] == "10.0.0.7" and write.status["hostIP"] == "192.0.2.10"
    home = a_pod(status=write.status)
    assert pod_plan(inputs(home, its_shadow(home, podStatus={
        "phase": "Running", "podIP": "10.0.0.7"}))) == PodPlan()


def test_a_status_field_the_home_api_server_drops_is_not_written_again() -> None:
    pod = a_pod()
    shadow = its_shadow(pod, podStatus={"phase": "Running"})
    [write] = pod_plan(inputs(pod, shadow)).steps
    assert isinstance(write, WriteStatus)
    stored = {key: value for key, value in write.status.items() if key != "hostIPs"}
    home = a_pod(status=stored)
    assert pod_plan(inputs(home, its_shadow(home, podStatus={"phase": "Running"}),
                           unkept_status=frozenset({("hostIPs",)}))) == PodPlan()


def test_a_label_changed_at_home_is_patched_onto_the_shadowpod() -> None:
    pod = a_pod()
    shadow = its_shadow(pod)
    relabelled = a_pod(metadata__labels={"app": "web", "tier": "front"})
    [patch] = pod_plan(inputs(relabelled, shadow)).steps
    assert patch == PatchShadowPod({"metadata": {"labels": {"tier": "front"},
                                                 "resourceVersion": "20"}})


DEBUG = {"name": "debugger", "image": "busybox", "targetContainerName": "app"}


def test_an_ephemeral_container_is_added_in_a_write_of_its_own_unless_refused_before() -> None:
    pod = a_pod()
    shadow = its_shadow(pod)
    debugged = a_pod(spec__ephemeralContainers=[DEBUG])
    [added] = pod_plan(inputs(debugged, shadow)).steps
    assert isinstance(added, AddEphemeralContainers)
    assert [c["name"] for c in added.containers] == ["debugger"]
    refused = inputs(debugged, shadow, refused_ephemeral=frozenset({"debugger"}))
    assert pod_plan(refused) == PodPlan()


def test_a_remote_pod_the_provider_refuses_is_said_in_the_condition_and_an_event() -> None:
    pod = a_pod()
    shadow = its_shadow(pod, conditions=[{
        "type": "PodCreated", "status": "False", "reason": "Forbidden",
        "message": "exceeded quota", "lastTransitionTime": "2026-12-01T11:59:00Z"}])
    event, status = pod_plan(inputs(pod, shadow)).steps
    assert event == RecordEvent(pod, REMOTE_CREATION_FAILED_CONDITION,
                                "the remote pod cannot be created: exceeded quota")
    assert isinstance(status, WriteStatus)
    [condition] = status.status["conditions"]
    assert (condition["type"], condition["reason"]) == (REMOTE_CREATION_FAILED_CONDITION,
                                                        "Forbidden")


# --- deletion --------------------------------------------------------------------------------

def test_a_pod_gone_is_forgotten_and_its_shadowpod_deleted_once_confirmed_gone() -> None:
    shadow = its_shadow(a_pod())
    assert pod_plan(dataclasses.replace(gone(), shadow=shadow)) == PodPlan((
        ForgetPod(), DeleteShadowPod(TWIN, "web", "uid-shadow", once_pod_gone=True)))
    assert pod_plan(gone()) == PodPlan((ForgetPod(),))


def test_a_shadowpod_being_deleted_is_not_deleted_again() -> None:
    shadow = its_shadow(a_pod())
    shadow["metadata"]["deletionTimestamp"] = "2026-12-01T11:59:00Z"
    assert pod_plan(dataclasses.replace(gone(), shadow=shadow)) == PodPlan((ForgetPod(),))
    terminating = a_pod(metadata__deletionTimestamp="2026-12-01T11:59:30Z")
    assert pod_plan(inputs(terminating, shadow)) == PodPlan()


def test_a_terminating_pod_has_its_shadowpod_deleted_then_is_released() -> None:
    terminating = a_pod(metadata__deletionTimestamp="2026-12-01T11:59:30Z")
    assert pod_plan(inputs(terminating, its_shadow(a_pod()))) == PodPlan((
        DeleteShadowPod(TWIN, "web", "uid-shadow"),))
    assert pod_plan(inputs(terminating)) == PodPlan((ReleasePod("uid-web", TWIN),))


# --- what a write's answer tells -------------------------------------------------------------

def test_a_refused_creation_is_the_pods_condition_and_an_event_retried() -> None:
    plan = refused_creation(inputs(), "Forbidden", "exceeded quota: annex-consumer")
    status, event = plan.steps
    assert plan.retry
    assert event == RecordEvent(a_pod(), REMOTE_CREATION_FAILED_CONDITION,
                                "exceeded quota: annex-consumer")
    assert isinstance(status, WriteStatus)
    [condition] = status.status["conditions"]
    assert condition == {"type": REMOTE_CREATION_FAILED_CONDITION, "status": "True",
                         "reason": "Forbidden", "message": "exceeded quota: annex-consumer",
                         "lastTransitionTime": "2026-12-01T12:00:00Z"}


def test_a_shadowpod_of_another_peering_in_the_way_is_said_and_retried() -> None:
    message = foreign_shadow_pod_message(TWIN, "web")
    assert "is not this peering's" in message
    assert foreign_shadow_pod(inputs(), message) == PodPlan(
        (RecordEvent(a_pod(), FAILED_REFLECTION_REASON, message),), retry=True)
