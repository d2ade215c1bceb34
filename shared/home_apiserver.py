"""Where offloaded pods reach the home API server when no address is configured.

kube-apiserver advertises its address and secure port in the EndpointSlice of the `kubernetes`
Service in `default` (its endpoint reconciler writes it: one slice named after the Service per
address family, a ready endpoint per API server). Across the flat network annex assumes, that
address is reachable from remote pods, where the Service's cluster IP is not. Failing that, the
server of the agent's own kubeconfig serves, unless it is that cluster-internal Service itself
(the in-cluster configuration is).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

KUBERNETES_SERVICE = "kubernetes"
KUBERNETES_SERVICE_NAMESPACE = "default"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
HTTPS_PORT_NAME = "https"

Address = tuple[str, int]


def advertised_address(slices: Iterable[Mapping[str, Any]]) -> Address | None:
    """The first ready address and the https port the `kubernetes` Service's slices list; the
    primary family's slice (named after the Service) first."""
    ordered = sorted(slices, key=lambda s: (_name(s) != KUBERNETES_SERVICE, _name(s)))
    for endpoint_slice in ordered:
        port = _https_port(endpoint_slice)
        if port is None:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            addresses = endpoint.get("addresses") or []
            if addresses:
                return str(addresses[0]), port
    return None


def kubeconfig_address(server: str, service: Mapping[str, Any] | None) -> Address | None:
    """The host and port of `server`, unless remote pods cannot reach it: the `kubernetes`
    Service's cluster IPs and DNS names exist only inside the home cluster."""
    url = urlsplit(server)
    host = url.hostname
    if not host:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    spec = (service or {}).get("spec") or {}
    cluster_ips = {*(spec.get("clusterIPs") or []), spec.get("clusterIP")} - {None, "", "None"}
    if _canonical_ip(host) in {_canonical_ip(ip) for ip in cluster_ips}:
        return None
    if _is_service_name(host):
        return None
    return host, port


def home_apiserver_address(slices: Iterable[Mapping[str, Any]], server: str,
                           service: Mapping[str, Any] | None) -> Address | None:
    """The advertised address, else the kubeconfig's when remote pods can reach it."""
    return advertised_address(slices) or kubeconfig_address(server, service)


def _name(endpoint_slice: Mapping[str, Any]) -> str:
    return str((endpoint_slice.get("metadata") or {}).get("name") or "")


def _https_port(endpoint_slice: Mapping[str, Any]) -> int | None:
    ports = [p for p in endpoint_slice.get("ports") or [] if p.get("port")]
    named = [p for p in ports if p.get("name") == HTTPS_PORT_NAME]
    chosen = (named or ports or [None])[0]
    return int(chosen["port"]) if chosen is not None else None


def _canonical_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def _is_service_name(host: str) -> bool:
    """kubernetes, kubernetes.default, kubernetes.default.svc[.<cluster domain>]."""
    labels = host.rstrip(".").lower().split(".")
    return labels[0] == KUBERNETES_SERVICE and (
        len(labels) == 1 or (labels[1] == KUBERNETES_SERVICE_NAMESPACE
                             and (len(labels) == 2 or labels[2] == "svc")))
