"""What the EndpointSlice controller computes for a Service and its pods."""

from __future__ import annotations

from typing import Any

from kubesim.controllers.slicing import desired_slices, slice_object


def service(**spec: Any) -> dict[str, Any]:
    ports = [{"name": "http", "port": 80, "targetPort": "web", "protocol": "TCP"}]
    return {"metadata": {"name": "svc", "namespace": "ns", "uid": "u1", "labels": {"app": "a"}},
            "spec": {"selector": {"app": "a"}, "ports": ports, **spec}}


def pod(name: str, ip: str = "10.0.0.1", ready: bool = True, port: int = 8080,
        **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", **metadata},
        "spec": {"nodeName": "w1", "containers": [
            {"name": "c", "ports": [{"name": "web", "containerPort": port}]}]},
        "status": {"phase": "Running", "podIP": ip, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_named_target_port_resolves_per_pod_and_groups_slices() -> None:
    slices = desired_slices(service(), [pod("a", port=8080), pod("b", port=9090)])
    assert sorted(s["ports"][0]["port"] for s in slices) == [8080, 9090]
    assert all(len(s["endpoints"]) == 1 for s in slices)


def test_conditions_ready_serving_terminating() -> None:
    pods = [pod("ready"), pod("unready", ready=False),
            pod("leaving", deletionTimestamp="2026-01-01T00:00:00Z")]
    [content] = desired_slices(service(), pods)
    conditions = {e["targetRef"]["name"]: e["conditions"] for e in content["endpoints"]}
    assert conditions == {
        "ready": {"ready": True, "serving": True, "terminating": False},
        "unready": {"ready": False, "serving": False, "terminating": False},
        "leaving": {"ready": False, "serving": True, "terminating": True},
    }


def test_pods_without_ip_or_finished_are_not_endpoints() -> None:
    done = pod("done")
    done["spec"]["restartPolicy"] = "Never"
    done["status"]["phase"] = "Succeeded"
    [content] = desired_slices(service(), [pod("noip", ip=""), done])
    assert content == {"ports": [], "endpoints": []}


def test_at_most_100_endpoints_per_slice() -> None:
    pods = [pod(f"p{i:03}", ip=f"10.0.{i // 250}.{i % 250}") for i in range(250)]
    assert [len(s["endpoints"]) for s in desired_slices(service(), pods)] == [100, 100, 50]


def test_slice_object_is_labelled_and_owned() -> None:
    [content] = desired_slices(service(), [pod("a")])
    created = slice_object(service(), content)
    assert created["metadata"]["generateName"] == "svc-"
    assert created["metadata"]["labels"] == {
        "app": "a", "kubernetes.io/service-name": "svc",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    owner = created["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Service", "u1", True)
    assert created["addressType"] == "IPv4"
    assert created["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
