"""The virtual node's kubelet API, its pure part: how a request path is authorized (as kubelet's
Webhook authorizer maps paths to `nodes` subresources, pkg/kubelet/server/auth.go), which pod and
container a path names, and how a home request becomes the twin pod's request on the remote API
server (pods/log query, pods/exec|attach|portforward paths)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete"}
"""kubelet's server.go: the request method as an API verb."""

SUBRESOURCE_PATHS = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"))
"""Paths with a `nodes` subresource of their own; every other path is `nodes/proxy`."""

STREAM_PATHS = ("/exec", "/attach", "/run", "/portForward")
"""Paths that run something in a container: `create` whatever the method. A WebSocket starts
as a GET, which a kubelet's method mapping would authorize as `get` (nodes/proxy get would
then allow exec); kube-apiserver checks `create` on WebSocket upgrades of pods/exec from v1.35
for the same reason."""

LOG_OPTIONS = ("follow", "previous", "sinceSeconds", "sinceTime", "timestamps", "tailLines",
               "limitBytes")
"""The v1.PodLogOptions a kubelet reads from the query (container comes from the path)."""

STREAM_OPTIONS = ("stdin", "stdout", "stderr", "tty")
"""What exec and attach carry on to the remote API server besides `command`."""


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def authorization_attributes(method: str, path: str, node_name: str) -> dict[str, str]:
    """The SubjectAccessReview resourceAttributes of a request, as a kubelet asks them."""
    subresource = next((name for prefix, name in SUBRESOURCE_PATHS if _is_subpath(path, prefix)),
                       "proxy")
    verb = METHOD_VERBS.get(method.upper(), "")
    if any(_is_subpath(path, prefix) for prefix in STREAM_PATHS):
        verb = "create"
    return {"verb": verb, "version": "v1", "resource": "nodes", "subresource": subresource,
            "name": node_name}


def forbidden_message(user: str, attributes: Mapping[str, str]) -> str:
    """kubelet's answer to a request its authorizer refuses."""
    return (f"Forbidden (user={user}, verb={attributes['verb']}, "
            f"resource={attributes['resource']}, subresource={attributes['subresource']})")


@dataclass(frozen=True)
class PodRequest:
    """What a pod path names: `action` is containerLogs, exec, attach or portForward."""

    action: str
    namespace: str
    pod: str
    uid: str = ""
    container: str = ""


def parse_pod_path(path: str) -> PodRequest | None:
    """/containerLogs/{ns}/{pod}/{container}, /exec|attach/{ns}/{pod}[/{uid}]/{container},
    /portForward/{ns}/{pod}[/{uid}]; None for anything else."""
    parts = [part for part in path.split("/") if part]
    if not parts:
        return None
    action, rest = parts[0], parts[1:]
    if action == "containerLogs" and len(rest) == 3:
        return PodRequest(action, rest[0], rest[1], container=rest[2])
    if action in ("exec", "attach") and len(rest) in (3, 4):
        uid = rest[2] if len(rest) == 4 else ""
        return PodRequest(action, rest[0], rest[1], uid=uid, container=rest[-1])
    if action == "portForward" and len(rest) in (2, 3):
        return PodRequest(action, rest[0], rest[1], uid=rest[2] if len(rest) == 3 else "")
    return None


def container_names(pod: Mapping[str, Any]) -> set[str]:
    spec = pod.get("spec") or {}
    return {str(c.get("name")) for key in ("containers", "initContainers", "ephemeralContainers")
            for c in spec.get(key) or []}


def pod_not_found(request: PodRequest) -> str:
    """kubelet's message for a pod it does not run."""
    return f'pod "{request.pod}" does not exist'


def container_not_found(request: PodRequest) -> str:
    return f'container "{request.container}" not found in pod "{request.pod}"'


def remote_pod_path(remote_namespace: str, pod: str, subresource: str) -> str:
    return (f"/api/v1/namespaces/{quote(remote_namespace, safe='')}/pods/"
            f"{quote(pod, safe='')}/{subresource}")


def remote_log_query(container: str, query: Mapping[str, str]) -> dict[str, str]:
    """The twin pod's pods/log query: the container and the log options, nothing else."""
    remote = {"container": container}
    remote.update({key: query[key] for key in LOG_OPTIONS if key in query})
    return remote


def remote_stream_query(request: PodRequest,
                        query: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The twin pod's exec/attach/portforward query: the command words (repeated, in order),
    the stream flags, the container, the ports; other parameters are dropped. A kubelet is
    given ports as `port` (repeated), the API server takes them as `ports`."""
    if request.action == "portForward":
        return [("ports", port) for key, value in query if key in ("port", "ports")
                for port in value.split(",") if port]
    kept = ("command", *STREAM_OPTIONS)
    remote = [(key, value) for key, value in query if key in kept]
    if request.container:
        remote.append(("container", request.container))
    return remote


def pod_list(pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """kubelet's /pods: the pods bound to the node, as a v1 PodList."""
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {},
            "items": [dict(pod) for pod in pods]}
