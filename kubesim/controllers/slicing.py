"""What the EndpointSlice controller wants for one Service, as pure functions.

Follows pkg/controller/endpointslice (and staging endpointslice/utils.go): pods with an IP that are
not terminal are endpoints (terminating ones included, with ready=false); endpoints are grouped by
their resolved ports (a named targetPort resolves per pod) and cut into slices of at most 100.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
HEADLESS_LABEL = "service.kubernetes.io/headless"
MAX_ENDPOINTS_PER_SLICE = 100
ZONE_LABEL = "topology.kubernetes.io/zone"


def _pod_is_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or []
    )


def pod_is_endpoint(pod: Mapping[str, Any]) -> bool:
    """endpointsliceutil.ShouldPodBeInEndpoints with includeTerminating=true."""
    status = pod.get("status", {})
    if not status.get("podIP"):
        return False
    phase = status.get("phase")
    restart = pod.get("spec", {}).get("restartPolicy", "Always")
    if restart == "Never" and phase in ("Succeeded", "Failed"):
        return False
    return not (restart == "OnFailure" and phase == "Succeeded")


def _container_port(pod: Mapping[str, Any], name: str, protocol: str) -> int | None:
    for container in pod.get("spec", {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The service's ports as this pod serves them (targetPort resolved; unresolvable dropped)."""
    ports: list[dict[str, Any]] = []
    for port in service.get("spec", {}).get("ports") or []:
        protocol = port.get("protocol", "TCP")
        target = port.get("targetPort", port.get("port"))
        number = (
            _container_port(pod, target, protocol) if isinstance(target, str) else int(target)
        )
        if number is None:
            continue
        resolved: dict[str, Any] = {"name": port.get("name", ""), "port": number,
                                    "protocol": protocol}
        if port.get("appProtocol"):
            resolved["appProtocol"] = port["appProtocol"]
        ports.append(resolved)
    return ports


def endpoint_for(
    service: Mapping[str, Any], pod: Mapping[str, Any], node: Mapping[str, Any] | None
) -> dict[str, Any]:
    metadata = pod["metadata"]
    terminating = bool(metadata.get("deletionTimestamp"))
    serving = _pod_is_ready(pod) or bool(service.get("spec", {}).get("publishNotReadyAddresses"))
    endpoint: dict[str, Any] = {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {"ready": serving and not terminating, "serving": serving,
                       "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": metadata.get("namespace", ""),
                      "name": metadata["name"], "uid": metadata.get("uid", "")},
    }
    node_name = pod.get("spec", {}).get("nodeName")
    if node_name:
        endpoint["nodeName"] = node_name
    zone = ((node or {}).get("metadata", {}).get("labels") or {}).get(ZONE_LABEL)
    if zone:
        endpoint["zone"] = zone
    return endpoint


def _port_key(ports: Sequence[Mapping[str, Any]]) -> str:
    return repr(sorted((p["name"], p["port"], p["protocol"]) for p in ports))


def desired_slices(
    service: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """[{"ports": [...], "endpoints": [...]}]: the slice contents the service should have.

    `pods` are the pods its selector selects (in its namespace). Order is deterministic.
    """
    groups: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        if not pod_is_endpoint(pod):
            continue
        ports = endpoint_ports(service, pod)
        node = (nodes or {}).get(pod.get("spec", {}).get("nodeName", ""))
        groups.setdefault(_port_key(ports), (ports, []))[1].append(
            endpoint_for(service, pod, node)
        )
    slices: list[dict[str, Any]] = []
    for key in sorted(groups):
        ports, endpoints = groups[key]
        for start in range(0, len(endpoints), MAX_ENDPOINTS_PER_SLICE):
            chunk = endpoints[start : start + MAX_ENDPOINTS_PER_SLICE]
            slices.append({"ports": ports, "endpoints": chunk})
    if not slices:
        # The real controller keeps one empty placeholder slice per selector-based service.
        slices.append({"ports": [], "endpoints": []})
    return slices


def slice_labels(service: Mapping[str, Any]) -> dict[str, str]:
    """The service's labels plus the two the controller owns (and headless, when it is)."""
    labels = dict(service.get("metadata", {}).get("labels") or {})
    labels[SERVICE_NAME_LABEL] = service["metadata"]["name"]
    labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
    if service.get("spec", {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return labels


def slice_object(service: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """A new EndpointSlice (generateName `<service>-`), owned by the service."""
    metadata = service["metadata"]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "generateName": f"{metadata['name'][:57]}-",
            "namespace": metadata.get("namespace", ""),
            "labels": slice_labels(service),
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Service", "name": metadata["name"],
                "uid": metadata.get("uid", ""), "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "addressType": "IPv4",
        "ports": list(content["ports"]),
        "endpoints": list(content["endpoints"]),
    }


def is_managed(endpoint_slice: Mapping[str, Any]) -> bool:
    labels = endpoint_slice.get("metadata", {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == CONTROLLER_NAME


def slice_content(endpoint_slice: Mapping[str, Any]) -> dict[str, Any]:
    return {"ports": endpoint_slice.get("ports") or [],
            "endpoints": endpoint_slice.get("endpoints") or []}
