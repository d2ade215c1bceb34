"""Service, home → remote: verbatim except the fields the remote cluster must choose itself.

Cleared (the remote API server defaults them; home values would conflict with its own ranges):
clusterIP/clusterIPs (a headless `None` is kept: it is a choice, not an allocation),
loadBalancerIP, every port's nodePort (kept when the Service is annotated
`liqo.io/force-remote-node-port=true`, the exact value "true", as Liqo) and healthCheckNodePort.

Also cleared, following Liqo's forge, which never copies them: externalIPs (addresses routed to
home nodes; many clusters also deny them by admission), ipFamilies (the remote may be single-stack;
it derives them from ipFamilyPolicy) and loadBalancerClass (it names a home load-balancer
implementation, as ingressClassName names a home ingress controller). Status is never copied.
`default/kubernetes` is the home API server's own Service and is never reflected.
"""

from collections.abc import Mapping
from typing import Any

from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, remote_metadata
from shared.wellknown import FORCE_REMOTE_NODE_PORT_ANNOTATION

HEADLESS_CLUSTER_IP = "None"
_CLEARED_SPEC_FIELDS = (
    "loadBalancerIP",
    "externalIPs",
    "healthCheckNodePort",
    "ipFamilies",
    "loadBalancerClass",
)


def switches_headless(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when one Service is headless and the other not: a Service's clusterIP is
    immutable, so a copy switching is deleted and created again (`must_recreate`)."""
    return _is_headless(current) != _is_headless(desired)


def _is_headless(service: Mapping[str, Any]) -> bool:
    return bool((service.get("spec") or {}).get("clusterIP") == HEADLESS_CLUSTER_IP)


def is_reflectable_service(service: Mapping[str, Any]) -> bool:
    """False for `default/kubernetes`, which names the home API server."""
    metadata = service.get("metadata") or {}
    return not (metadata.get("namespace") == "default" and metadata.get("name") == "kubernetes")


def forces_remote_node_port(service: Mapping[str, Any]) -> bool:
    """True when the Service asks for its nodePorts to be kept in the remote cluster."""
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(FORCE_REMOTE_NODE_PORT_ANNOTATION) == "true")


def remote_service_spec(local_spec: Mapping[str, Any], keep_node_ports: bool) -> dict[str, Any]:
    """The remote spec: `local_spec` without the remote-allocated fields."""
    spec: dict[str, Any] = copied(dict(local_spec))
    if spec.get("clusterIP") != HEADLESS_CLUSTER_IP:
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    for field in _CLEARED_SPEC_FIELDS:
        spec.pop(field, None)
    if not keep_node_ports:
        for port in spec.get("ports") or []:
            port.pop("nodePort", None)
    return spec


def remote_service(
    local: Mapping[str, Any], remote_namespace: str, config: ReflectionConfig
) -> dict[str, Any]:
    """The desired remote copy of the home Service `local` (check `is_reflectable_service`)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": remote_metadata(local, remote_namespace, config),
        "spec": remote_service_spec(local.get("spec") or {}, forces_remote_node_port(local)),
    }
