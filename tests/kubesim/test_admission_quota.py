"""ResourceQuota admission for pods: counts, cpu/memory requests and limits, the explicit requests a
constrained quota demands, what no longer counts, and the real 403 messages.

A real cluster admits against the quota's status, which its quota controller fills shortly after
the quota is made and recounts after a pod finishes: creations are retried until the quota
answers with its verdict, within QUOTA_DEADLINE."""

from __future__ import annotations

from typing import Any

from tests.helpers import wait_for
from tests.kubesim.rest import MERGE, call

QUOTA_DEADLINE = 90
"""Seconds a real quota controller may take to count or recount: under the whole suite it has
hundreds of quotas to resync every period, and a pod's replenishment waits behind them (30 s
were missed there while the file alone took 21 s)."""


def quotas(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/resourcequotas"


def pods(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def pod(name: str, **resources: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "nginx:1"}
    if resources:
        container["resources"] = resources
    # bound to a node no kubelet runs: it stays as it is written
    return {"metadata": {"name": name},
            "spec": {"containers": [container], "nodeName": "nowhere"}}


def quota(cluster: Any, namespace: str, **hard: str) -> None:
    status, body = call(cluster, "POST", quotas(namespace),
                        {"metadata": {"name": "compute"}, "spec": {"hard": hard}})
    assert status == 201, body


def created(cluster: Any, namespace: str, body: dict[str, Any]) -> None:
    """Create, waiting for the quota to be known (a real quota controller's first sync)."""
    wait_for(lambda: call(cluster, "POST", pods(namespace), body)[0] == 201,
             timeout=QUOTA_DEADLINE,
             message=f"pod {body['metadata']['name']} admitted")


def refused(cluster: Any, namespace: str, body: dict[str, Any], wanted: str) -> dict[str, Any]:
    """The quota's refusal of `body` (its message contains `wanted`)."""
    def verdict() -> dict[str, Any] | None:
        status, answer = call(cluster, "POST", pods(namespace), body)
        assert status != 201, "admitted"
        return answer if status == 403 and wanted in answer["message"] else None
    return wait_for(verdict, timeout=QUOTA_DEADLINE, message=f"refused with {wanted!r}")


def test_the_pod_count_is_limited(home, namespace) -> None:
    quota(home, namespace, pods="1")
    created(home, namespace, pod("a"))
    answer = refused(home, namespace, pod("b"), "exceeded quota")
    assert answer["reason"] == "Forbidden"
    assert answer["message"] == ('pods "b" is forbidden: exceeded quota: compute, requested: '
                                 'pods=1, used: pods=1, limited: pods=1')


def test_a_constrained_resource_must_be_requested_by_every_container(home, namespace) -> None:
    quota(home, namespace, **{"requests.cpu": "1", "limits.memory": "1Gi"})
    answer = refused(home, namespace, pod("bare"), "failed quota")
    assert answer["message"] == (
        'pods "bare" is forbidden: failed quota: compute: must specify limits.memory for: main; '
        'requests.cpu for: main')
    created(home, namespace, pod("given", requests={"cpu": "100m"}, limits={"memory": "64Mi"}))


def test_requests_add_up_to_the_hard_limit(home, namespace) -> None:
    quota(home, namespace, **{"requests.cpu": "500m", "memory": "1Gi"})
    created(home, namespace, pod("a", requests={"cpu": "300m", "memory": "256Mi"}))
    answer = refused(home, namespace, pod("b", requests={"cpu": "300m", "memory": "256Mi"}),
                     "exceeded quota")
    assert answer["message"] == (
        'pods "b" is forbidden: exceeded quota: compute, requested: requests.cpu=300m, '
        'used: requests.cpu=300m, limited: requests.cpu=500m')
    created(home, namespace, pod("c", requests={"cpu": "200m", "memory": "768Mi"}))


def test_finished_pods_no_longer_count(home, namespace) -> None:
    quota(home, namespace, pods="1")
    created(home, namespace, pod("done"))
    refused(home, namespace, pod("next"), "exceeded quota")
    status, body = call(home, "PATCH", pods(namespace, "done") + "/status",
                        {"status": {"phase": "Succeeded"}}, content_type=MERGE)
    assert status == 200, body
    created(home, namespace, pod("next"))


def test_a_deleted_quota_is_answered_with_the_object_and_no_longer_limits(home,
                                                                        namespace) -> None:
    quota(home, namespace, pods="0")
    refused(home, namespace, pod("a"), "exceeded quota")
    deleted = home.core.delete_namespaced_resource_quota("compute", namespace)
    assert deleted.kind == "ResourceQuota" and deleted.spec.hard == {"pods": "0"}
    created(home, namespace, pod("a"))


# --- object counts (the object count evaluator, and the service evaluator) -------------------


def configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def test_object_counts_refuse_the_object_one_past_the_hard_limit(home, namespace) -> None:
    """`count/configmaps` and the legacy `configmaps` count the same objects; the N+1st is
    refused with kube-apiserver's message, naming what the quota says is used (the
    namespace's kube-root-ca.crt, which the root CA publisher puts in every namespace, counts
    too)."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    present = len(call(home, "GET", path)[1]["items"])
    limit = present + 2
    status, body = call(home, "POST", quotas(namespace), {
        "metadata": {"name": "objects"}, "spec": {"hard": {"count/configmaps": str(limit)}}})
    assert status == 201, body
    for name in ("a", "b"):
        wait_for(lambda name=name: call(home, "POST", path, configmap(name))[0] in (201, 409),
                 timeout=QUOTA_DEADLINE, message=f"configmap {name} admitted")

    def verdict() -> dict[str, Any] | None:
        status, answer = call(home, "POST", path, configmap("c"))
        assert status != 201, "admitted"
        return answer if status == 403 else None
    answer = wait_for(verdict, timeout=QUOTA_DEADLINE, message="the third configmap refused")
    assert answer["message"] == (
        f'configmaps "c" is forbidden: exceeded quota: objects, requested: count/configmaps=1, '
        f'used: count/configmaps={limit}, limited: count/configmaps={limit}')
    status, body = call(home, "POST", quotas(namespace), {
        "metadata": {"name": "legacy"}, "spec": {"hard": {"secrets": "0"}}})
    assert status == 201, body
    answer = wait_for(lambda: (lambda r: r[1] if r[0] == 403 else None)(call(
        home, "POST", f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "s"}, "stringData": {"k": "v"}})), timeout=QUOTA_DEADLINE,
        message="the secret refused")
    assert answer["message"] == ('secrets "s" is forbidden: exceeded quota: legacy, requested: '
                                 'secrets=1, used: secrets=0, limited: secrets=0')


def test_grouped_resources_are_counted_as_count_resource_group(home, namespace) -> None:
    status, body = call(home, "POST", quotas(namespace), {
        "metadata": {"name": "objects"},
        "spec": {"hard": {"count/endpointslices.discovery.k8s.io": "0"}}})
    assert status == 201, body
    path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
    slice_ = {"metadata": {"name": "e"}, "addressType": "IPv4", "endpoints": []}
    answer = wait_for(lambda: (lambda r: r[1] if r[0] == 403 else None)(
        call(home, "POST", path, slice_)), timeout=QUOTA_DEADLINE, message="the slice refused")
    assert answer["message"] == (
        'endpointslices.discovery.k8s.io "e" is forbidden: exceeded quota: objects, requested: '
        'count/endpointslices.discovery.k8s.io=1, used: count/endpointslices.discovery.k8s.io=0, '
        'limited: count/endpointslices.discovery.k8s.io=0')


def test_the_quota_controller_writes_what_a_quota_limits_and_what_is_used(
        home, namespace) -> None:
    for name in ("a", "b"):
        status, body = call(home, "POST", f"/api/v1/namespaces/{namespace}/configmaps",
                            {"metadata": {"name": name}})
        assert status == 201, body
    quota(home, namespace, **{"count/configmaps": "10", "requests.memory": "1Gi"})

    def status() -> Any:
        return call(home, "GET", f"{quotas(namespace)}/compute")[1].get("status")
    # the namespace's root CA ConfigMap and the two
    wait_for(lambda: status() == {
        "hard": {"count/configmaps": "10", "requests.memory": "1Gi"},
        "used": {"count/configmaps": "3", "requests.memory": "0"}}, timeout=QUOTA_DEADLINE,
        message="the quota's status")
