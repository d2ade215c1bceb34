"""What kube-apiserver and etcd refuse for size: request bodies over 3 MiB (413, before the body
is read as an object) and objects etcd will not store (its 1.5 MiB request limit, passed on as a
500)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.helpers import wait_for
from tests.kubesim.rest import MERGE, call
from tests.kubesim.test_api_crd import CRDS, definition, established, widgets
from tests.kubesim.test_api_writes import ns_path

LIMIT = 3 * 1024 * 1024
FREE = {"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


def test_a_body_over_three_mebibytes_is_413_whatever_it_holds(home, namespace) -> None:
    big = {"metadata": {"name": "big"}, "data": {"k": "x" * LIMIT}}
    for method, path in (("POST", ns_path(namespace, "configmaps")),
                         ("PUT", ns_path(namespace, "configmaps", "big")),
                         ("PATCH", ns_path(namespace, "configmaps", "big"))):
        status, body = call(home, method, path, big,
                            content_type=MERGE if method == "PATCH" else "application/json")
        assert status == 413, (method, body)
        assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Failure", "reason": "RequestEntityTooLarge",
                        "message": f"Request entity too large: limit is {LIMIT}", "code": 413}
    # the limit is on bytes, not on what they say: a body just under it is read and judged
    status, body = call(home, "POST", ns_path(namespace, "configmaps"),
                        {"metadata": {"name": "big", "annotations": {"a": "x" * (LIMIT - 200)}}})
    assert (status, body["reason"]) == (422, "Invalid")
    assert call(home, "GET", ns_path(namespace, "configmaps", "big"))[0] == 404


@pytest.fixture
def free_group(home) -> Iterator[str]:
    """An established CRD whose widgets' spec may hold anything (custom resources have no size
    validation: only etcd limits them)."""
    group = f"l{uuid.uuid4().hex[:8]}.example.com"
    status, body = call(home, "POST", CRDS, definition(group, FREE))
    assert status == 201, body
    wait_for(lambda: established(home, f"widgets.{group}"), 60, "CRD not established")
    wait_for(lambda: call(home, "GET", f"/apis/{group}/v1")[0] == 200, 60, "not served")
    yield group
    call(home, "DELETE", f"{CRDS}/widgets.{group}")


def test_an_object_etcd_will_not_store_is_its_500(home, namespace, free_group: str) -> None:
    def widget(name: str, size: int) -> dict:
        return {"apiVersion": f"{free_group}/v1", "kind": "Widget", "metadata": {"name": name},
                "spec": {"blob": "x" * size}}

    path = widgets(free_group, namespace)
    status, body = call(home, "POST", path, widget("small", 1_000_000))
    assert status == 201, body
    version = body["metadata"]["resourceVersion"]
    status, body = call(home, "POST", path, widget("large", 2_000_000))
    assert (status, body["message"], body.get("reason", "")) == (
        500, "etcdserver: request is too large", "")
    assert call(home, "GET", widgets(free_group, namespace, "large"))[0] == 404
    # larger than the API server's etcd client sends at all (2 MiB): its gRPC error
    status, body = call(home, "POST", path, widget("huge", 2_200_000))
    assert (status, body.get("reason", "")) == (500, "")
    assert body["message"].startswith("rpc error: code = ResourceExhausted desc = trying to "
                                      "send message larger than max ("), body["message"]
    assert body["message"].endswith(" vs. 2097152)")
    # growing a stored object past the limit is refused the same way and changes nothing
    status, body = call(home, "PATCH", widgets(free_group, namespace, "small"),
                        {"spec": {"more": "y" * 1_000_000}}, content_type=MERGE)
    assert (status, body["message"]) == (500, "etcdserver: request is too large")
    assert call(home, "GET", widgets(free_group, namespace, "small"))[1]["metadata"][
        "resourceVersion"] == version


def test_built_in_kinds_are_measured_as_etcd_holds_them_not_as_json(home, namespace) -> None:
    """kube-apiserver stores built-in kinds as protobuf: control characters JSON writes as six
    bytes each take one there, so this ConfigMap (1.8 MB of JSON) fits in etcd."""
    status, body = call(home, "POST", ns_path(namespace, "configmaps"),
                        {"metadata": {"name": "escaped"}, "data": {"k": "\u0001" * 300_000}})
    assert status == 201, body
