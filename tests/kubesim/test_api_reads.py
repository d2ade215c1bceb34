"""Reads: get, list shape, label and field selectors, limit/continue pagination."""

from __future__ import annotations

import pytest

from tests.kubesim.rest import call


def cms(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


# every namespace of a real cluster (and of kubesim with its controllers) gets this ConfigMap
ROOT_CA = "kube-root-ca.crt"


def names(cluster, path: str, **query: str) -> list[str]:
    """Names listed, without the root CA ConfigMap the cluster itself puts in each namespace."""
    status, body = call(cluster, "GET", path, query=query)
    assert status == 200, body
    return [i["metadata"]["name"] for i in body["items"] if i["metadata"]["name"] != ROOT_CA]


def test_get_returns_the_object_with_its_type(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}, "data": {"k": "v"}})
    status, body = call(home, "GET", cms(namespace, "a"))
    assert status == 200
    assert (body["apiVersion"], body["kind"], body["data"]) == ("v1", "ConfigMap", {"k": "v"})
    status, body = call(home, "GET", cms(namespace, "missing"))
    assert (status, body["reason"], body["message"]) == (
        404, "NotFound", 'configmaps "missing" not found')


def test_a_list_has_its_kind_a_resource_version_and_bare_items(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})
    status, body = call(home, "GET", cms(namespace))
    assert (body["apiVersion"], body["kind"]) == ("v1", "ConfigMapList")
    assert body["metadata"]["resourceVersion"].isdigit()
    # built-in lists carry their items without apiVersion/kind, as the real server encodes them
    assert "kind" not in body["items"][0] and "apiVersion" not in body["items"][0]


@pytest.fixture
def labelled(home, namespace) -> str:
    for name, labels in (("a", {"tier": "web", "env": "prod"}), ("b", {"tier": "db"}),
                         ("c", {"env": "dev"}), ("d", {})):
        call(home, "POST", cms(namespace), {"metadata": {"name": name, "labels": labels}})
    return namespace


@pytest.mark.parametrize(("selector", "expected"), [
    ("tier=web", ["a"]),
    ("tier==db", ["b"]),
    ("tier!=web", ["b", "c", "d"]),
    ("tier in (web,db)", ["a", "b"]),
    ("tier notin (web)", ["b", "c", "d"]),
    ("env", ["a", "c"]),
    ("!env", ["b", "d"]),
    ("tier=web,env=prod", ["a"]),
])
def test_label_selectors(home, labelled: str, selector: str, expected: list[str]) -> None:
    assert names(home, cms(labelled), labelSelector=selector) == expected


def test_field_selectors_on_metadata(home, labelled: str) -> None:
    assert names(home, cms(labelled), fieldSelector="metadata.name=b") == ["b"]
    assert names(home, cms(labelled), fieldSelector="metadata.name!=b") == ["a", "c", "d"]
    assert names(home, "/api/v1/configmaps",
                 fieldSelector=f"metadata.namespace={labelled},metadata.name=c") == ["c"]


def test_pod_field_selectors_on_node_and_phase(home, namespace) -> None:
    for name, node in (("on-a", "node-a"), ("on-b", "node-b")):
        call(home, "POST", f"/api/v1/namespaces/{namespace}/pods", {
            "metadata": {"name": name}, "spec": {"nodeName": node, "containers": [
                {"name": "c", "image": "nginx:1"}]}})
    path = f"/api/v1/namespaces/{namespace}/pods"
    assert names(home, path, fieldSelector="spec.nodeName=node-a") == ["on-a"]
    assert names(home, path, fieldSelector="status.phase=Succeeded") == []
    for name in ("on-a", "on-b"):
        call(home, "DELETE", f"{path}/{name}", {"gracePeriodSeconds": 0})


def test_event_field_selectors_on_the_involved_object(home, namespace) -> None:
    path = f"/api/v1/namespaces/{namespace}/events"
    for name, about in (("e1", "x"), ("e2", "y")):
        call(home, "POST", path, {"metadata": {"name": name}, "reason": "Test", "message": "m",
                                  "involvedObject": {"kind": "Pod", "name": about,
                                                     "namespace": namespace}})
    assert names(home, path, fieldSelector="involvedObject.name=y") == ["e2"]


def test_an_unsupported_field_selector_is_400(home, namespace) -> None:
    status, body = call(home, "GET", cms(namespace), query={"fieldSelector": "data.k=v"})
    assert (status, body["reason"]) == (400, "BadRequest")
    # ConfigMaps have no field label conversion of their own: the metadata-only default answers
    assert body["message"] == (
        '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"')


def test_limit_and_continue_page_through_everything_once(home, namespace) -> None:
    for index in range(5):
        call(home, "POST", cms(namespace), {"metadata": {"name": f"p{index}"}})
    everything = [i["metadata"]["name"] for i in call(home, "GET", cms(namespace))[1]["items"]]
    seen: list[str] = []
    query = {"limit": "2"}
    pages = 0
    while True:
        body = call(home, "GET", cms(namespace), query=query)[1]
        pages += 1
        seen += [i["metadata"]["name"] for i in body["items"]]
        token = body["metadata"].get("continue")
        if not token:
            break
        if pages == 1:
            assert body["metadata"]["remainingItemCount"] == len(everything) - 2
        query = {"limit": "2", "continue": token}
    assert seen == everything and pages == (len(everything) + 1) // 2


@pytest.mark.kubesim_only(reason="compacts the store on demand (sim.api.store.compact): a real "
                                 "cluster compacts on its own schedule")
def test_a_continue_token_past_compaction_is_410_expired(home, namespace) -> None:
    for index in range(3):
        call(home, "POST", cms(namespace), {"metadata": {"name": f"p{index}"}})
    token = call(home, "GET", cms(namespace), query={"limit": "1"})[1]["metadata"]["continue"]
    call(home, "POST", cms(namespace), {"metadata": {"name": "later"}})
    home.run(home.sim.api.store.compact)
    status, body = call(home, "GET", cms(namespace), query={"limit": "1", "continue": token})
    assert (status, body["reason"]) == (410, "Expired")
    assert body["message"].startswith("The provided continue parameter is too old")


def test_a_malformed_limit_is_400(home, namespace) -> None:
    status, body = call(home, "GET", cms(namespace), query={"limit": "many"})
    assert (status, body["kind"]) == (400, "Status")
