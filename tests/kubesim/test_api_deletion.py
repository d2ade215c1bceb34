"""Deletion: finalizers, pod graceful deletion, preconditions, propagation policies through
ownerReferences, deletecollection and namespace termination."""

from __future__ import annotations

from tests.helpers import wait_for
from tests.kubesim.rest import MERGE, call


def cms(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def pods(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def gone(cluster, path: str) -> bool:
    return call(cluster, "GET", path)[0] == 404


def owned_by(owner: dict, kind: str = "ConfigMap", **reference: bool) -> list[dict]:
    return [{"apiVersion": "v1", "kind": kind, "name": owner["metadata"]["name"],
             "uid": owner["metadata"]["uid"], **reference}]


def test_an_object_with_finalizers_stays_until_they_are_removed(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "f", "finalizers": ["example.com/a"]}})
    status, body = call(home, "DELETE", cms(namespace, "f"))
    assert status == 200
    assert body["metadata"]["deletionTimestamp"]
    assert body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert call(home, "GET", cms(namespace, "f"))[0] == 200
    status, body = call(home, "PATCH", cms(namespace, "f"),
                        {"metadata": {"finalizers": ["example.com/a", "example.com/b"]}},
                        content_type=MERGE)
    assert (status, body["reason"]) == (422, "Invalid")
    assert ('metadata.finalizers: Forbidden: no new finalizers can be added if the object is '
            'being deleted, found new finalizers []string{"example.com/b"}') in body["message"]
    call(home, "PATCH", cms(namespace, "f"), {"metadata": {"finalizers": None}},
         content_type=MERGE)
    wait_for(lambda: gone(home, cms(namespace, "f")), 30, "finalized object still there")


def test_an_unbound_pod_is_deleted_at_once(home, namespace) -> None:
    call(home, "POST", pods(namespace), {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "nginx:1"}], "schedulerName": "nobody"}})
    status, body = call(home, "DELETE", pods(namespace, "p"))
    assert status == 200 and body["kind"] == "Pod"
    assert gone(home, pods(namespace, "p"))


def test_a_bound_pod_waits_for_its_kubelet_to_delete_it_with_grace_0(home, namespace) -> None:
    call(home, "POST", pods(namespace), {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "nginx:1"}], "nodeName": "nowhere",
        "terminationGracePeriodSeconds": 600}})
    status, body = call(home, "DELETE", pods(namespace, "p"))
    assert status == 200
    assert body["metadata"]["deletionGracePeriodSeconds"] == 600
    assert call(home, "GET", pods(namespace, "p"))[0] == 200
    # the kubelet's final word
    status, body = call(home, "DELETE", pods(namespace, "p"), {"gracePeriodSeconds": 0})
    assert status == 200
    wait_for(lambda: gone(home, pods(namespace, "p")), 30, "pod survived grace 0")


def test_delete_preconditions_that_do_not_hold_are_409(home, namespace) -> None:
    created = call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})[1]
    status, body = call(home, "DELETE", cms(namespace, "a"),
                        {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
    # rest.BeforeDelete answers before the storage's own check, naming the Kind
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition '
        f'(00000000-0000-0000-0000-000000000000) does not match the UID in record '
        f'({created["metadata"]["uid"]}). The object might have been deleted and then recreated')
    assert body["details"] == {"name": "a", "kind": "ConfigMap"}
    status, body = call(home, "DELETE", cms(namespace, "a"),
                        {"preconditions": {"resourceVersion": "1"}})
    assert (status, body["message"]) == (409, (
        f'Operation cannot be fulfilled on ConfigMap "a": the ResourceVersion in the precondition '
        f'(1) does not match the ResourceVersion in record '
        f'({created["metadata"]["resourceVersion"]}). The object might have been modified'))
    assert call(home, "DELETE", cms(namespace, "a"), {"preconditions": {
        "uid": created["metadata"]["uid"]}})[0] == 200


def test_background_propagation_deletes_dependents(home, namespace) -> None:
    owner = call(home, "POST", cms(namespace), {"metadata": {"name": "owner"}})[1]
    call(home, "POST", cms(namespace), {"metadata": {"name": "dep",
                                                     "ownerReferences": owned_by(owner)}})
    call(home, "DELETE", cms(namespace, "owner"), {"propagationPolicy": "Background"})
    assert gone(home, cms(namespace, "owner"))
    wait_for(lambda: gone(home, cms(namespace, "dep")), 60, "dependent not collected")


def test_orphan_propagation_keeps_dependents_without_the_owner_reference(home,
                                                                         namespace) -> None:
    owner = call(home, "POST", cms(namespace), {"metadata": {"name": "owner"}})[1]
    call(home, "POST", cms(namespace), {"metadata": {"name": "dep",
                                                     "ownerReferences": owned_by(owner)}})
    status, body = call(home, "DELETE", cms(namespace, "owner"), {"propagationPolicy": "Orphan"})
    # the API server leaves the orphaning to the collector, which then removes the finalizer
    assert status == 200 and body["metadata"]["finalizers"] == ["orphan"]
    wait_for(lambda: gone(home, cms(namespace, "owner")), 60, "owner not deleted")
    wait_for(lambda: not call(home, "GET", cms(namespace, "dep"))[1]["metadata"].get(
        "ownerReferences"), 60, "dependent still references its owner")
    assert call(home, "GET", cms(namespace, "dep"))[0] == 200


def test_foreground_propagation_waits_for_dependents(home, namespace) -> None:
    owner = call(home, "POST", cms(namespace), {"metadata": {"name": "owner"}})[1]
    call(home, "POST", cms(namespace), {"metadata": {
        "name": "dep", "finalizers": ["example.com/hold"],
        "ownerReferences": owned_by(owner, blockOwnerDeletion=True)}})
    status, body = call(home, "DELETE", cms(namespace, "owner"),
                        {"propagationPolicy": "Foreground"})
    assert status == 200
    assert "foregroundDeletion" in body["metadata"]["finalizers"]
    assert body["metadata"]["deletionTimestamp"]
    wait_for(lambda: call(home, "GET", cms(namespace, "dep"))[1]["metadata"].get(
        "deletionTimestamp"), 60, "dependent not being deleted")
    assert call(home, "GET", cms(namespace, "owner"))[0] == 200  # still waiting for it
    call(home, "PATCH", cms(namespace, "dep"), {"metadata": {"finalizers": None}},
         content_type=MERGE)
    wait_for(lambda: gone(home, cms(namespace, "owner")), 60, "owner outlived its dependents")


def test_foreground_propagation_is_not_held_by_dependents_that_do_not_block(home,
                                                                         namespace) -> None:
    owner = call(home, "POST", cms(namespace), {"metadata": {"name": "owner"}})[1]
    call(home, "POST", cms(namespace), {"metadata": {
        "name": "dep", "finalizers": ["example.com/hold"], "ownerReferences": owned_by(owner)}})
    call(home, "DELETE", cms(namespace, "owner"), {"propagationPolicy": "Foreground"})
    wait_for(lambda: gone(home, cms(namespace, "owner")), 60,
             "owner held by a dependent without blockOwnerDeletion")
    assert call(home, "GET", cms(namespace, "dep"))[1]["metadata"]["deletionTimestamp"]
    call(home, "PATCH", cms(namespace, "dep"), {"metadata": {"finalizers": None}},
         content_type=MERGE)


def unstopped_pod(name: str, owner_references: list[dict]) -> dict:
    """A pod bound to a node no kubelet runs: it stays terminating until deleted with grace 0."""
    return {"metadata": {"name": name, "ownerReferences": owner_references}, "spec": {
        "containers": [{"name": "c", "image": "nginx:1"}], "nodeName": "nowhere",
        "terminationGracePeriodSeconds": 600}}


def test_foreground_propagation_waits_until_a_blocking_pod_is_gone(home, namespace) -> None:
    owner = call(home, "POST", cms(namespace), {"metadata": {"name": "owner"}})[1]
    call(home, "POST", pods(namespace),
         unstopped_pod("p", owned_by(owner, controller=True, blockOwnerDeletion=True)))
    call(home, "DELETE", cms(namespace, "owner"), {"propagationPolicy": "Foreground"})
    wait_for(lambda: call(home, "GET", pods(namespace, "p"))[1]["metadata"].get(
        "deletionTimestamp"), 60, "pod not being deleted")
    # terminating is not gone: the owner waits for the kubelet's final deletion
    assert call(home, "GET", cms(namespace, "owner"))[0] == 200
    call(home, "DELETE", pods(namespace, "p"), {"gracePeriodSeconds": 0})
    wait_for(lambda: gone(home, cms(namespace, "owner")), 60, "owner outlived its pod")


def test_foreground_propagation_reaches_through_a_dependent_that_has_dependents(
        home, namespace) -> None:
    owner = call(home, "POST", cms(namespace), {"metadata": {"name": "owner"}})[1]
    middle = call(home, "POST", cms(namespace), {"metadata": {
        "name": "middle", "ownerReferences": owned_by(owner, blockOwnerDeletion=True)}})[1]
    call(home, "POST", pods(namespace),
         unstopped_pod("p", owned_by(middle, blockOwnerDeletion=True)))
    call(home, "DELETE", cms(namespace, "owner"), {"propagationPolicy": "Foreground"})
    wait_for(lambda: call(home, "GET", pods(namespace, "p"))[1]["metadata"].get(
        "deletionTimestamp"), 60, "pod not being deleted")
    # the middle object is deleted in the foreground too (as a Deployment's ReplicaSet is)
    status, body = call(home, "GET", cms(namespace, "middle"))
    assert status == 200 and "foregroundDeletion" in body["metadata"]["finalizers"]
    assert call(home, "GET", cms(namespace, "owner"))[0] == 200
    call(home, "DELETE", pods(namespace, "p"), {"gracePeriodSeconds": 0})
    wait_for(lambda: gone(home, cms(namespace, "owner")), 60, "owner outlived the pod")
    assert gone(home, cms(namespace, "middle"))


def test_a_dependent_made_while_its_owner_waits_for_dependents_is_collected(
        home, namespace) -> None:
    """A controller that raced the owner's deletion (it read the owner just before) creates a
    dependent of an owner already deleted in the foreground: the collector deletes it when it
    next looks at the owner (processDeletingDependentsItem, here on the first pod's removal),
    and the owner waits for it too."""
    owner = call(home, "POST", cms(namespace), {"metadata": {"name": "owner"}})[1]
    call(home, "POST", pods(namespace),
         unstopped_pod("first", owned_by(owner, controller=True, blockOwnerDeletion=True)))
    call(home, "DELETE", cms(namespace, "owner"), {"propagationPolicy": "Foreground"})
    wait_for(lambda: call(home, "GET", pods(namespace, "first"))[1]["metadata"].get(
        "deletionTimestamp"), 60, "first pod not being deleted")
    status, _ = call(home, "POST", pods(namespace), unstopped_pod(
        "late", owned_by(owner, controller=True, blockOwnerDeletion=True)))
    assert status == 201
    call(home, "DELETE", pods(namespace, "first"), {"gracePeriodSeconds": 0})
    wait_for(lambda: call(home, "GET", pods(namespace, "late"))[1]["metadata"].get(
        "deletionTimestamp"), 60, "the late dependent was never collected")
    assert call(home, "GET", cms(namespace, "owner"))[0] == 200  # it waits for the late pod
    call(home, "DELETE", pods(namespace, "late"), {"gracePeriodSeconds": 0})
    wait_for(lambda: gone(home, cms(namespace, "owner")), 60, "owner outlived its pods")


def test_deletecollection_deletes_what_the_selector_matches(home, namespace) -> None:
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        call(home, "POST", cms(namespace), {"metadata": {"name": name, "labels": {"tier": tier}}})
    status, _ = call(home, "DELETE", cms(namespace), query={"labelSelector": "tier=x"})
    assert status == 200
    names = [i["metadata"]["name"] for i in call(home, "GET", cms(namespace))[1]["items"]]
    assert "c" in names and "a" not in names and "b" not in names


def test_a_deleted_namespace_terminates_then_goes_with_its_content(home) -> None:
    name = "t-terminating-ns"
    call(home, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    call(home, "POST", cms(name), {"metadata": {"name": "content"}})
    status, body = call(home, "DELETE", f"/api/v1/namespaces/{name}")
    assert status == 200 and body["status"]["phase"] == "Terminating"
    wait_for(lambda: gone(home, f"/api/v1/namespaces/{name}"), 120, "namespace never went")
    assert gone(home, cms(name, "content"))


def test_the_cluster_s_own_namespaces_may_not_be_deleted(home) -> None:
    """The NamespaceLifecycle admission plugin refuses it first, even as a dry run."""
    for name in ("default", "kube-system", "kube-public"):
        status, body = call(home, "DELETE", f"/api/v1/namespaces/{name}?dryRun=All")
        assert (status, body["reason"], body["message"]) == (
            403, "Forbidden",
            f'namespaces "{name}" is forbidden: this namespace may not be deleted')
