"""What a provider lets a consumer expose: the rules for the Services, EndpointSlices and
Ingresses written in its twin namespaces (remote_enforcer.object_admission applies them).

The consumer identity may write these objects directly, so the home agent's forge (which clears
externalIPs, node ports and load balancer fields) is not relied on: every object is checked
here against the consumer's ServicePolicy (its Quota's `servicePolicy`, closed by default).
Each refusal names the field and the rule, as the API server's own validation does
(`spec.externalIPs: Forbidden: ...`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from shared.api.quota import ServicePolicy, ServiceType

LEGACY_INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
# Ingress controller annotations that inject configuration into the controller itself (nginx's
# configuration-snippet, server-snippet, auth-snippet, stream-snippet...).
SNIPPET_MARKER = "snippet"
# The kinds reflection gives home objects in targetRef (shared.forge.endpointslice): they name
# an object of the consumer's cluster, which no provider controller resolves.
HOME_OBJECT_KIND_PREFIX = "Remote"

SERVICE_TYPE_RISKS: dict[str, str] = {
    ServiceType.NODE_PORT.value: "it opens a port on every node of the provider",
    ServiceType.LOAD_BALANCER.value: "it provisions a load balancer billed to the provider",
    ServiceType.EXTERNAL_NAME.value: "it makes the Service's name an alias of any DNS name",
}


def _allowed(rule: str, allowed: Iterable[str]) -> str:
    """What `rule` (a field of the consumer's servicePolicy) allows, as a refusal ends."""
    return f"(servicePolicy.{rule}: {', '.join(allowed) or 'none'})"


# --- Service ----------------------------------------------------------------------------------

def service_type(service: Mapping[str, Any]) -> str:
    return str((service.get("spec") or {}).get("type") or ServiceType.CLUSTER_IP.value)


def service_problems(service: Mapping[str, Any], policy: ServicePolicy) -> list[str]:
    spec = service.get("spec") or {}
    problems: list[str] = []
    if spec.get("externalIPs"):
        problems.append(
            "spec.externalIPs: Forbidden: the provider refuses external IPs: traffic to such an "
            "address is intercepted for the whole cluster (CVE-2020-8554)")
    kind = service_type(service)
    allowed = [t.value for t in policy.allowed_service_types]
    if kind not in allowed:
        risk = SERVICE_TYPE_RISKS.get(kind)
        problems.append(f'spec.type: Forbidden: type "{kind}" is not allowed for this consumer'
                        f"{f' ({risk})' if risk else ''} "
                        f"{_allowed('allowedServiceTypes', allowed)}")
    elif kind == ServiceType.CLUSTER_IP:
        problems += [f"spec.ports[{index}].nodePort: Forbidden: a ClusterIP Service opens no "
                     "port on the provider's nodes"
                     for index, port in enumerate(spec.get("ports") or []) if port.get("nodePort")]
    return problems


# --- EndpointSlice ----------------------------------------------------------------------------

def _networks(cidrs: Iterable[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The policy's CIDRs; one that does not parse allows nothing."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError:
            continue
    return networks


def _address_problem(address: str, pod_addresses: Collection[str],
                     networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network],
                     policy: ServicePolicy) -> str | None:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return f'Invalid value: "{address}": not an IP address'
    if str(parsed) in pod_addresses or any(parsed in network for network in networks):
        return None
    return (f'Forbidden: "{address}" is neither a pod of this consumer nor in the CIDRs it may '
            f"point at {_allowed('allowedEndpointCIDRs', policy.allowed_endpoint_cidrs)}: a "
            "Service must not front the provider's network (CVE-2021-25740)")


def endpointslice_problems(endpointslice: Mapping[str, Any], policy: ServicePolicy,
                           pod_addresses: Collection[str]) -> list[str]:
    """`pod_addresses`: the IPs of the pods in this consumer's twin namespaces."""
    if endpointslice.get("addressType") == "FQDN":
        return ["addressType: Forbidden: FQDN endpoints make the Service front any DNS name; "
                "the provider allows IPv4 and IPv6 endpoints only"]
    namespace = (endpointslice.get("metadata") or {}).get("namespace")
    networks = _networks(policy.allowed_endpoint_cidrs)
    problems: list[str] = []
    for index, endpoint in enumerate(endpointslice.get("endpoints") or []):
        for position, address in enumerate(endpoint.get("addresses") or []):
            problem = _address_problem(str(address), pod_addresses, networks, policy)
            if problem is not None:
                problems.append(f"endpoints[{index}].addresses[{position}]: {problem}")
        target = endpoint.get("targetRef") or {}
        if target.get("namespace") not in (None, "", namespace) and not str(
                target.get("kind") or "").startswith(HOME_OBJECT_KIND_PREFIX):
            problems.append(f"endpoints[{index}].targetRef.namespace: Forbidden: an endpoint "
                            f"refers to an object of this namespace only, not of "
                            f'"{target["namespace"]}"')
    return problems


# --- Ingress ----------------------------------------------------------------------------------

def host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """`host` is one of `patterns`, where `*.example.com` stands for one label in its place
    (and for the same wildcard)."""
    host = host.lower().rstrip(".")
    for pattern in (p.lower().rstrip(".") for p in patterns):
        if host == pattern:
            return True
        if pattern.startswith("*."):
            label, _, rest = host.partition(".")
            if rest == pattern[2:] and label not in ("", "*"):
                return True
    return False


def _class_problems(ingress: Mapping[str, Any], policy: ServicePolicy) -> list[str]:
    annotations = (ingress.get("metadata") or {}).get("annotations") or {}
    named = {"spec.ingressClassName": (ingress.get("spec") or {}).get("ingressClassName"),
             f"metadata.annotations[{LEGACY_INGRESS_CLASS_ANNOTATION}]":
                 annotations.get(LEGACY_INGRESS_CLASS_ANNOTATION)}
    allowed = _allowed("allowedIngressClasses", policy.allowed_ingress_classes)
    if not any(named.values()):
        return ["spec.ingressClassName: Required value: set one of the classes the provider "
                f"allows {allowed}: an Ingress without a class may be served by any controller "
                "of the provider"]
    return [f'{field}: Forbidden: class "{name}" is not allowed for this consumer {allowed}'
            for field, name in named.items()
            if name and name not in policy.allowed_ingress_classes]


def _hosts(spec: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """(field, host) of every host an Ingress claims; an empty host is a rule for any host."""
    for index, rule in enumerate(spec.get("rules") or []):
        yield f"spec.rules[{index}].host", str(rule.get("host") or "")
    for index, tls in enumerate(spec.get("tls") or []):
        for position, host in enumerate(tls.get("hosts") or []):
            yield f"spec.tls[{index}].hosts[{position}]", str(host or "")


def _host_problems(spec: Mapping[str, Any], policy: ServicePolicy) -> list[str]:
    allowed = _allowed("allowedIngressHosts", policy.allowed_ingress_hosts)
    problems = []
    for field, host in _hosts(spec):
        if not host:
            problems.append(f"{field}: Required value: a rule without a host serves every host "
                            f"name of the provider's ingress controller {allowed}")
        elif not host_allowed(host, policy.allowed_ingress_hosts):
            problems.append(f'{field}: Forbidden: host "{host}" is not allowed for this '
                            f"consumer {allowed}")
    if spec.get("defaultBackend"):
        problems.append("spec.defaultBackend: Forbidden: a default backend takes the requests "
                        "no rule matches, for any host of the provider's ingress controller")
    return problems


def _backends(spec: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    if spec.get("defaultBackend"):
        yield "spec.defaultBackend", spec["defaultBackend"]
    for index, rule in enumerate(spec.get("rules") or []):
        for position, path in enumerate((rule.get("http") or {}).get("paths") or []):
            yield f"spec.rules[{index}].http.paths[{position}].backend", path.get("backend") or {}


def ingress_problems(ingress: Mapping[str, Any], policy: ServicePolicy) -> list[str]:
    spec = ingress.get("spec") or {}
    annotations = (ingress.get("metadata") or {}).get("annotations") or {}
    problems = _class_problems(ingress, policy) + _host_problems(spec, policy)
    problems += [f"metadata.annotations[{key}]: Forbidden: configuration snippets run inside "
                 "the provider's ingress controller, which serves other tenants too "
                 "(CVE-2021-25742)"
                 for key in sorted(annotations) if SNIPPET_MARKER in key.lower()]
    problems += [f"{field}.resource: Forbidden: only Service backends are allowed"
                 for field, backend in _backends(spec) if backend.get("resource")]
    return problems

