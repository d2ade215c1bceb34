"""shared.forge.tenancy: the twin namespace and the RoleBinding the enforcer makes for a
consumer, what a NamespaceMap's status says of each entry and which namespaces a map names,
which twins an edited map no longer wants, and which ShadowPods a consumer may put in its twin
namespaces."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.namespace_map import MappingPhase
from shared.api.quota import PodPolicy, PodSecurityLevel
from shared.forge.tenancy import (
    consumer_subject,
    mapping_entry,
    named_twins,
    origin_problem,
    pod_policy_problem,
    pod_security_labels_patch,
    rbac_patch,
    retired_twins,
    role_ref_changed,
    twin_namespace,
    twin_role_binding,
    unusable_twin,
)

OWNED = {"offloading.liqo.io/origin": "home", "offloading.liqo.io/destination": "provider"}
BASELINE = {"pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/enforce-version": "latest"}


def tenant(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "annex-tenant-home", "annotations": annotations}}


@pytest.mark.parametrize(("identity", "subject"), [
    (None, {"kind": "ServiceAccount", "name": "consumer", "namespace": "annex-tenant-home"}),
    ("serviceaccount:robot",
     {"kind": "ServiceAccount", "name": "robot", "namespace": "annex-tenant-home"}),
    ("user:alice", {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}),
    ("User:alice", {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}),
])
def test_the_subject_is_the_identity_the_tenant_namespace_declares(
        identity: str | None, subject: dict[str, Any]) -> None:
    annotations = None if identity is None else {"liqo.io/consumer-identity": identity}
    assert consumer_subject(tenant(annotations)) == subject


@pytest.mark.parametrize(("level", "enforced"), [
    (PodSecurityLevel.BASELINE, "baseline"),
    (PodSecurityLevel.RESTRICTED, "restricted"),
    (PodSecurityLevel.PRIVILEGED, "privileged"),
])
def test_a_twin_namespace_is_owned_and_enforces_its_consumer_s_level_from_the_start(
        level: PodSecurityLevel, enforced: str) -> None:
    assert twin_namespace("shop-home", "home", "provider", PodPolicy(pod_security=level)) == {
        "metadata": {"name": "shop-home", "labels": {
            **OWNED, "pod-security.kubernetes.io/enforce": enforced,
            "pod-security.kubernetes.io/enforce-version": "latest"}}}


def test_the_binding_names_the_consumer_cluster_role_and_the_consumer() -> None:
    subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}
    assert twin_role_binding("shop-home", "home", "provider", subject, "consumers") == {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "annex-consumer", "namespace": "shop-home", "labels": OWNED},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "consumers"},
        "subjects": [subject]}


BINDING = twin_role_binding("shop-home", "home", "provider",
                            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                             "name": "alice"}, "consumers")
OLDER_BINDING = {**BINDING, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                        "name": "annex-consumer"}}


@pytest.mark.parametrize(("current", "desired", "recreate", "patch"), [
    (BINDING, BINDING, False, None),
    ({**BINDING, "metadata": {"name": "annex-consumer"}}, BINDING, False, None),  # subjects only
    (OLDER_BINDING, BINDING, True, None),  # an older enforcer's, of its Role
    ({**BINDING, "subjects": []}, BINDING, False, {"subjects": BINDING["subjects"]}),
    ({**BINDING, "roleRef": {**BINDING["roleRef"], "name": "other"}}, BINDING, True, None),
    ({}, BINDING, True, {"subjects": BINDING["subjects"]}),  # vanished meanwhile
])
def test_a_binding_that_differs_is_patched_or_made_again(
        current: dict[str, Any], desired: dict[str, Any], recreate: bool,
        patch: dict[str, Any] | None) -> None:
    assert role_ref_changed(current, desired) is recreate
    assert rbac_patch(current, desired) == patch


def namespace(labels: dict[str, str], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "shop-home", "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(("twin", "level", "patch"), [
    (namespace({**OWNED, **BASELINE}), PodSecurityLevel.BASELINE, None),
    (namespace({**OWNED, **BASELINE}), PodSecurityLevel.RESTRICTED,
     {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}),
    (namespace(OWNED), PodSecurityLevel.BASELINE, {"metadata": {"labels": BASELINE}}),
    (namespace({**OWNED, "pod-security.kubernetes.io/enforce": "privileged"}),
     PodSecurityLevel.BASELINE, {"metadata": {"labels": BASELINE}}),  # changed by hand
    (namespace(OWNED, deleting=True), PodSecurityLevel.BASELINE, None),
])
def test_twin_namespace_labels_follow_the_consumer_s_pod_policy(
        twin: dict[str, Any], level: PodSecurityLevel, patch: dict[str, Any] | None) -> None:
    assert pod_security_labels_patch(twin, PodPolicy(pod_security=level)) == patch


@pytest.mark.parametrize(("existing", "entry"), [
    (None, None),
    (namespace(OWNED), None),
    (namespace({"offloading.liqo.io/origin": "other",
                "offloading.liqo.io/destination": "provider"}),
     {"remoteNamespace": "shop-home", "phase": "CreationLoopBackOff",
      "message": "namespace 'shop-home' already exists and is not managed by annex for "
                 "consumer 'home'"}),
    (namespace({}), {"remoteNamespace": "shop-home", "phase": "CreationLoopBackOff",
                     "message": "namespace 'shop-home' already exists and is not managed by "
                                "annex for consumer 'home'"}),
    (namespace(OWNED, deleting=True), {"remoteNamespace": "shop-home", "phase": "Terminating"}),
])
def test_a_namespace_that_is_not_ours_or_is_going_cannot_be_the_twin(
        existing: dict[str, Any] | None, entry: dict[str, Any] | None) -> None:
    assert unusable_twin(existing, "shop-home", "home", "provider") == entry


def test_a_mapping_entry_carries_a_message_only_when_there_is_one() -> None:
    assert mapping_entry("shop-home", MappingPhase.ACCEPTED) == {
        "remoteNamespace": "shop-home", "phase": "Accepted"}
    assert mapping_entry("shop-home", MappingPhase.CREATION_LOOP_BACK_OFF, "quota") == {
        "remoteNamespace": "shop-home", "phase": "CreationLoopBackOff", "message": "quota"}


def accepted(remote: str) -> dict[str, Any]:
    return {"remoteNamespace": remote, "phase": "Accepted"}


@pytest.mark.parametrize(("desired", "current", "retired"), [
    ({"shop": "shop-home"}, {"shop": accepted("shop-home")}, []),
    ({}, {"shop": accepted("shop-home")}, ["shop-home"]),  # entry removed (or map deleted)
    ({"shop": "shop-2"}, {"shop": accepted("shop-home")}, ["shop-home"]),  # renamed
    ({"web": "shop-home"}, {"shop": accepted("shop-home")}, []),  # moved to another entry
    ({}, {"shop": {"remoteNamespace": "taken", "phase": "CreationLoopBackOff"}}, []),
    ({}, {"shop": {"remoteNamespace": "shop-home", "phase": "Terminating"}}, ["shop-home"]),
    ({}, {"a": accepted("a-home"), "b": accepted("b-home")}, ["a-home", "b-home"]),
])
def test_twins_the_map_no_longer_wants_are_retired_but_never_somebody_else_s(
        desired: dict[str, str], current: dict[str, Any], retired: list[str]) -> None:
    assert retired_twins(desired, current) == retired


TAKEN = {"remoteNamespace": "taken", "phase": "CreationLoopBackOff", "message": "not ours"}


@pytest.mark.parametrize(("desired", "current", "named"), [
    ({}, {}, set()),
    ({"shop": "shop-home"}, {"shop": accepted("shop-home")}, {"shop-home"}),
    # a name somebody else holds: its namespace going lets the map take it
    ({"db": "taken"}, {"db": TAKEN}, {"taken"}),
    # an entry removed from the spec: its twin is still the map's to delete
    ({"shop": "shop-home"}, {"shop": accepted("shop-home"), "old": accepted("old-home")},
     {"shop-home", "old-home"}),
    # an entry dropped with a null (a merge patch's removal) names nothing
    ({"shop": None}, {}, set()),
])
def test_a_map_names_the_twins_its_spec_wants_and_its_status_records(
        desired: dict[str, Any], current: dict[str, Any], named: set[str]) -> None:
    assert named_twins(desired, current) == named


@pytest.mark.parametrize(("labels", "namespace_consumer", "problem"), [
    ({"offloading.liqo.io/origin": "home"}, "home", None),
    ({}, "home", "the offloading.liqo.io/origin label is required"),
    ({"offloading.liqo.io/origin": ""}, "home", "the offloading.liqo.io/origin label is required"),
    ({"offloading.liqo.io/origin": "home"}, None,
     "namespace 'shop-home' does not belong to any consumer"),
    ({"offloading.liqo.io/origin": "intruder"}, "home",
     "the offloading.liqo.io/origin label 'intruder' does not match the consumer 'home' "
     "namespace 'shop-home' belongs to"),
])
def test_a_shadowpod_s_origin_must_be_the_consumer_of_its_twin_namespace(
        labels: dict[str, str], namespace_consumer: str | None, problem: str | None) -> None:
    assert origin_problem(labels, "shop-home", namespace_consumer) == problem


def shadowpod_with(container: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "web"},
            "spec": {"pod": {"containers": [{"name": "main", "image": "nginx", **container}]}}}


PLAIN = shadowpod_with({})
PRIVILEGED = shadowpod_with({"securityContext": {"privileged": True}})
PRIVILEGED_NEW_IMAGE = shadowpod_with({"image": "nginx:2", "securityContext": {"privileged": True}})
REFUSED = ("spec.pod is not allowed for consumer 'home': violates PodSecurity "
           '"baseline:latest": privileged (container "main" must not set '
           "securityContext.privileged=true)")


@pytest.mark.parametrize(("level", "shadowpod", "old", "problem"), [
    (PodSecurityLevel.BASELINE, PLAIN, None, None),
    (PodSecurityLevel.BASELINE, PRIVILEGED, None, REFUSED),
    (PodSecurityLevel.PRIVILEGED, PRIVILEGED, None, None),
    (PodSecurityLevel.BASELINE, PRIVILEGED, PLAIN, REFUSED),  # an update adding it
    # admitted under a looser policy: its updates keep what it had
    (PodSecurityLevel.BASELINE, PRIVILEGED_NEW_IMAGE, PRIVILEGED, None),
])
def test_a_shadowpod_s_pod_must_fit_its_consumer_s_policy_and_updates_only_what_they_add(
        level: PodSecurityLevel, shadowpod: dict[str, Any], old: dict[str, Any] | None,
        problem: str | None) -> None:
    assert pod_policy_problem(PodPolicy(pod_security=level), "home", shadowpod, old) == problem
