"""What the demo's story waits for, read from the clusters: each answers (done, what it saw),
as a `Narrator.wait` probe does."""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client

from annex_demo import app, charts, views
from shared.api.virtual_node import VIRTUAL_NODE as VIRTUAL_NODE_KIND

Seen = tuple[bool, str]


def node_ready(home: client.CoreV1Api, node: str, wanted: str) -> Seen:
    status, reason = views.ready_condition(home, node)
    return status == wanted, f"Ready={status or '?'} {reason}".strip()


def offloading_ready(home: client.ApiClient) -> Seen:
    status = app.offloading_status(home)
    twin = status.get("remoteNamespaceName") or ""
    phase = status.get("offloadingPhase") or "?"
    return phase == "Ready" and bool(twin), twin if phase == "Ready" else f"phase {phase}"


def greeting(remote: client.CoreV1Api, twin: str, wanted: str) -> Seen:
    seen = views.configmap_greeting(remote, twin)
    return seen == wanted, f"greeting={seen!r}"


def remote_running(remote: client.CoreV1Api, twin: str, count: int) -> Seen:
    rows = views.app_pods(remote, twin)
    running = sum(row.phase == "Running" for row in rows)
    return running == count, f"{running}/{count} Running remotely"


def recreated(remote: client.CoreV1Api, twin: str, deleted: views.PodRow) -> Seen:
    now = next((row for row in views.app_pods(remote, twin) if row.name == deleted.name), None)
    if now is None or now.uid == deleted.uid:
        return False, "not yet"
    return now.phase == "Running", f"new pod {now.phase} on {now.node or '-'}"


def virtual_node(home: client.ApiClient, name: str) -> dict[str, Any]:
    """The VirtualNode `name` (404 while there is none)."""
    return cast(dict[str, Any], client.CustomObjectsApi(home).get_namespaced_custom_object(
        VIRTUAL_NODE_KIND.group, VIRTUAL_NODE_KIND.version, charts.RELEASE_NAMESPACE,
        VIRTUAL_NODE_KIND.plural, name))


def spawned_agent(home: client.ApiClient, name: str, remapped_pod_cidr: str) -> Seen:
    """The agent Deployment the home controller made for the VirtualNode `name`, by name, once
    it remaps the remote's pod CIDR."""
    status = virtual_node(home, name).get("status") or {}
    deployment_name = (status.get("agent") or {}).get("deployment")
    if not deployment_name:
        return False, f"phase {status.get('phase') or '?'}"
    deployment = cast(dict[str, Any], home.sanitize_for_serialization(  # type: ignore[no-untyped-call]
        client.AppsV1Api(home).read_namespaced_deployment(deployment_name,
                                                          charts.RELEASE_NAMESPACE)))
    args = deployment["spec"]["template"]["spec"]["containers"][0].get("args") or []
    if f"--remapped-pod-cidr={remapped_pod_cidr}" not in args:
        return False, f"{deployment_name} without the remap yet"
    return True, deployment_name


def foreign_cluster_phase(home: client.ApiClient, cluster_id: str, wanted: str) -> Seen:
    rows = {row[0]: row for row in views.foreign_cluster_rows(home)}
    phase = rows[cluster_id][-1] if cluster_id in rows else "not seen"
    return phase == wanted, phase
