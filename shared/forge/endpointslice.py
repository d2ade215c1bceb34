"""EndpointSlice, home → remote: the endpoints the destination cluster cannot see by itself.

The remote control plane already builds slices for the pods running there (the offloaded ones),
so only the other endpoints are reflected: pods at home, pods offloaded to *other* clusters, and
external endpoints without a nodeName (as Liqo). Per endpoint:
- addresses are remapped into the CIDR through which the destination reaches home pods;
- nodeName, zone, hints and deprecatedTopology are cleared: they name home nodes and zones, and
  a home node name equal to a remote one would make remote kube-proxies treat the endpoint as
  node-local (traffic policy Local); without hints, topology-aware routing falls back to all
  endpoints rather than dropping ours;
- targetRef's kind becomes `RemotePod` (as Liqo), so remote controllers that resolve endpoints to
  pods do not look up a pod that does not run there;
- conditions, hostname (headless DNS names) and ports are kept verbatim.

Labels: `endpointslice.kubernetes.io/managed-by` is ours, otherwise the remote EndpointSlice
controller would consider the slice its own and delete it; `kubernetes.io/service-name` is kept
(the remote kube-proxy joins the slice to the remote Service of the same name) even if skip-listed.
The name is the home slice's (deterministic, and remote events map back to it).

A slice whose endpoints are all in the destination is still reflected, with `endpoints: []`: the
copy then stays in step (and empty) instead of keeping stale endpoints; it is deleted only when
the home slice goes.
"""

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, remote_metadata
from shared.ipremap import CidrRemap, remap_address
from shared.wellknown import (
    ENDPOINTSLICE_MANAGED_BY_LABEL,
    ENDPOINTSLICE_MANAGED_BY_VALUE,
    SERVICE_NAME_LABEL,
)

REMOTE_KIND_PREFIX = "Remote"
_HOME_PLACEMENT_FIELDS = ("nodeName", "zone", "hints", "deprecatedTopology")


class EndpointDestination(BaseModel):
    """How to tell that an endpoint already runs in the destination cluster: it is on one of
    the virtual nodes standing for that cluster, or its pod is one offloaded there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    virtual_node_names: frozenset[str] = frozenset()
    offloaded_pod_names: frozenset[str] = frozenset()


def is_in_destination(endpoint: Mapping[str, Any], destination: EndpointDestination) -> bool:
    """True when the endpoint's pod runs in the destination cluster (so it is not reflected)."""
    if endpoint.get("nodeName") in destination.virtual_node_names:
        return True
    target = endpoint.get("targetRef") or {}
    return (
        target.get("kind", "Pod") == "Pod" and target.get("name") in destination.offloaded_pod_names
    )


def is_reflectable_endpointslice(endpointslice: Mapping[str, Any]) -> bool:
    """False for the slices of `default/kubernetes`, which is never reflected, and for slices
    that are themselves reflected copies (managed by reflection, ours or a peer's: this cluster
    is also somebody's remote): sending them on would bounce endpoints back to where they run."""
    metadata = endpointslice.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if labels.get(ENDPOINTSLICE_MANAGED_BY_LABEL) == ENDPOINTSLICE_MANAGED_BY_VALUE:
        return False
    service = labels.get(SERVICE_NAME_LABEL)
    return not (metadata.get("namespace") == "default" and service == "kubernetes")


def _remote_endpoint(endpoint: Mapping[str, Any], remap: CidrRemap | None) -> dict[str, Any]:
    remote: dict[str, Any] = copied(dict(endpoint))
    for field in _HOME_PLACEMENT_FIELDS:
        remote.pop(field, None)
    remote["addresses"] = [remap_address(a, remap) for a in endpoint.get("addresses") or []]
    target = remote.get("targetRef")
    if target:
        target["kind"] = REMOTE_KIND_PREFIX + str(target.get("kind") or "Pod")
    return remote


def remote_endpointslice(
    local: Mapping[str, Any],
    remote_namespace: str,
    config: ReflectionConfig,
    destination: EndpointDestination,
    remap: CidrRemap | None = None,
) -> dict[str, Any]:
    """The desired remote copy of the home EndpointSlice `local`, holding only the endpoints not
    in `destination`, their addresses passed through `remap` (None: unchanged)."""
    forced = {ENDPOINTSLICE_MANAGED_BY_LABEL: ENDPOINTSLICE_MANAGED_BY_VALUE}
    service = ((local.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)
    if service is not None:
        forced[SERVICE_NAME_LABEL] = service
    remote: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": remote_metadata(local, remote_namespace, config, forced_labels=forced),
        "addressType": local.get("addressType", "IPv4"),
        "endpoints": [
            _remote_endpoint(endpoint, remap)
            for endpoint in local.get("endpoints") or []
            if not is_in_destination(endpoint, destination)
        ],
    }
    if local.get("ports") is not None:
        remote["ports"] = copied(local["ports"])
    return remote
