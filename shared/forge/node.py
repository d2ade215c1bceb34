"""The virtual node's desired state: labels, taints, capacity and conditions.

Pure functions of the VirtualNode, the ResourceOffer and the health state; the home agent's
`virtual_node.py` writes what they compute, and only when it differs from the cluster.

Which labels and taints the agent put on the node is recorded in one annotation of its own, so
that a label the offer no longer carries is removed while labels and taints others added (node
lifecycle taints, a user's `kubectl label`) are left alone.

A provider whose offer declares pools is one Node per pool, `<node name>-<pool>`
(`offered_nodes`), each with its pool's capacity, labels and platform and the pool's name in
POOL_LABEL; one declaring none is one Node, the node name itself. A Node of the agent the offer
no longer makes (a pool withdrawn, pools declared or given up) is cordoned, saying why
(`withdrawal_patch`), and deleted once no pod is bound to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.api.resource_offer import PoolOffer, ResourceOffer
from shared.api.virtual_node import VirtualNode
from shared.forge.node_status import Health, node_status
from shared.pools import is_pool_name
from shared.wellknown import (
    ARCH_LABEL,
    HOSTNAME_LABEL,
    OS_LABEL,
    POOL_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
    VIRTUAL_NODE_TAINT_EFFECT,
    VIRTUAL_NODE_TAINT_KEY,
    VIRTUAL_NODE_TAINT_VALUE,
)

MANAGED_ANNOTATION = "offloading.liqo.io/managed-node-fields"
"""JSON {"labels": [...], "taints": [...]}: the label and taint keys the agent owns on the node."""

MAX_POD_ANNOTATION = "offloading.liqo.io/max-pod-resources"
"""JSON {"cpu": "2", "memory": "4Gi", ...}: what one pod can get on the remote cluster (the
offer's maxPodResources: the most one remote node has free, per resource). The scheduler sees
only the node's allocatable, the sum of every remote node: a pod within it but above this is
bound here and stays Pending remotely, and this says so beforehand. An annotation, as Node
status has no field for it and a Node condition would read as the node's health."""

WITHDRAWN_ANNOTATION = "offloading.liqo.io/pool-withdrawn"
"""On a virtual node the agent cordoned because the offer no longer makes it (its pool
withdrawn): why. Only such a cordon is lifted when the pool comes back (a user's stays)."""

POOL_WITHDRAWN_REASON = "PoolWithdrawn"
"""The Event on a virtual node the agent cordoned because the offer no longer makes it."""



def node_labels(node_name: str, remote_cluster_id: str, offer_labels: Mapping[str, str],
                extra_labels: Mapping[str, str],
                platform: Mapping[str, str] | None = None) -> dict[str, str]:
    """The offer's labels, the VirtualNode's, then the identity labels (which always win),
    `kubernetes.io/arch` among them once the offer tells the remote nodes' architecture."""
    labels = {**offer_labels, **extra_labels}
    labels.update({
        TYPE_LABEL: TYPE_VIRTUAL_NODE,
        REMOTE_CLUSTER_ID_LABEL: remote_cluster_id,
        HOSTNAME_LABEL: node_name,
        OS_LABEL: "linux",
    })
    if platform and platform.get("architecture"):
        labels[ARCH_LABEL] = platform["architecture"]
    return labels


def offer_platform(offer: ResourceOffer | PoolOffer | None) -> dict[str, str]:
    """What the offer (or one of its pools) says about the remote nodes (the consumer may not
    read them itself): `architecture` and `kubeletVersion`, each once the offer tells it."""
    if offer is None:
        return {}
    lent = offer.spec if isinstance(offer, ResourceOffer) else offer
    return {key: value for key, value in (("architecture", lent.architecture),
                                          ("kubeletVersion", lent.kubelet_version))
            if value}


def pool_node_name(node_name: str, pool: str) -> str:
    """The virtual node of the provider's pool `pool`, the agent's node being `node_name`."""
    return f"{node_name}-{pool}"


def offered_nodes(node_name: str, offer: ResourceOffer | None) -> dict[str, str | None]:
    """The agent's Nodes as the offer makes them, by name: its pool's name, or None for the
    provider shown as one node (no offer, or an offer without pools). The provider names its
    pools: a name no pool can have (`shared.pools.is_pool_name`) makes no node."""
    pools = [pool.name for pool in offer.spec.pools] if offer is not None else []
    if not pools:
        return {node_name: None}
    return {pool_node_name(node_name, pool): pool for pool in pools if is_pool_name(pool)}


def served_nodes(node_name: str, offer: ResourceOffer | None,
                 existing: Mapping[str, str | None]) -> tuple[dict[str, str | None],
                                                          dict[str, str | None]]:
    """(the agent's nodes the offer makes, its `existing` nodes it no longer makes), each name →
    pool. Without an offer (not listed yet, or withdrawn whole) the nodes there are stay as they
    are: a provider offering nothing is cordoned by the home controller, not taken apart."""
    if offer is None:
        return dict(existing) or offered_nodes(node_name, None), {}
    offered = offered_nodes(node_name, offer)
    return offered, {name: pool for name, pool in existing.items() if name not in offered}


def agent_nodes(node_name: str, remote_cluster_id: str,
                nodes: Mapping[str, Mapping[str, str]]) -> dict[str, str | None]:
    """The Nodes among `nodes` (name → labels) that are the agent's, by name: its pool (None
    for `node_name` itself). Each is labelled with the provider; a pool's is named after its
    pool and labelled with it."""
    found: dict[str, str | None] = {}
    for name, labels in nodes.items():
        if labels.get(REMOTE_CLUSTER_ID_LABEL) != remote_cluster_id:
            continue
        pool = labels.get(POOL_LABEL)
        if name == node_name:
            found[name] = None
        elif pool and name == pool_node_name(node_name, pool):
            found[name] = pool
    return found


def labels_by_name(nodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Node objects as name → labels."""
    return {str((node.get("metadata") or {}).get("name")):
            dict((node.get("metadata") or {}).get("labels") or {}) for node in nodes}


def _pool(offer: ResourceOffer | None, pool: str | None) -> PoolOffer | None:
    if offer is None or pool is None:
        return None
    return next((each for each in offer.spec.pools if each.name == pool), None)


def virtual_node_labels(node_name: str, remote_cluster_id: str, offer: ResourceOffer | None,
                        virtual_node: VirtualNode | None, pool: str | None = None
                        ) -> dict[str, str]:
    """The virtual node's labels as they should be (what clusterSelectors are matched against):
    a pool's node has its pool's labels (the offer's and the pool's selector) and POOL_LABEL."""
    extra = virtual_node.spec.labels if virtual_node else {}
    lent = _pool(offer, pool)
    offer_labels = lent.labels if lent is not None else offer.spec.labels if offer else {}
    labels = node_labels(node_name, remote_cluster_id, offer_labels, extra,
                         offer_platform(lent or offer))
    if pool is not None:
        labels[POOL_LABEL] = pool
    return labels


def offered_node_labels(node_name: str, remote_cluster_id: str, offer: ResourceOffer | None,
                        virtual_node: VirtualNode | None) -> dict[str, dict[str, str]]:
    """Each Node the offer makes (`offered_nodes`) with its labels as they should be."""
    return {name: virtual_node_labels(name, remote_cluster_id, offer, virtual_node, pool)
            for name, pool in offered_nodes(node_name, offer).items()}


def node_taints(extra_taints: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    taints = [{"key": VIRTUAL_NODE_TAINT_KEY, "value": VIRTUAL_NODE_TAINT_VALUE,
               "effect": VIRTUAL_NODE_TAINT_EFFECT}]
    taints.extend(dict(t) for t in extra_taints if t.get("key") != VIRTUAL_NODE_TAINT_KEY)
    return taints


def _managed(node: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    try:
        record = json.loads(annotations.get(MANAGED_ANNOTATION) or "{}")
    except ValueError:
        record = {}
    return set(record.get("labels") or []), set(record.get("taints") or [])


def _managed_record(labels: Mapping[str, str], taints: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({"labels": sorted(labels), "taints": sorted({t["key"] for t in taints})})


def max_pod_resources_of(node: Mapping[str, Any] | None) -> dict[str, str]:
    """What one pod can get on a virtual node, as its MAX_POD_ANNOTATION says ({} when it says
    nothing, or nothing readable)."""
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    try:
        resources = json.loads(annotations.get(MAX_POD_ANNOTATION) or "{}")
    except ValueError:
        return {}
    if not isinstance(resources, dict):
        return {}
    return {str(name): str(value) for name, value in resources.items()}


def max_pod_annotation(resources: Mapping[str, str]) -> dict[str, str | None]:
    """The MAX_POD_ANNOTATION the offer's (or pool's) maxPodResources make: None (removed)
    while they tell nothing."""
    return {MAX_POD_ANNOTATION: json.dumps(dict(sorted(resources.items()))) if resources
            else None}


def withdrawal_patch(node: Mapping[str, Any], withdrawn: str | None) -> dict[str, Any] | None:
    """A merge patch cordoning the node because the offer no longer makes it (`withdrawn`: why,
    in WITHDRAWN_ANNOTATION), or lifting that cordon once it does again (None); None when the
    node already is as it should be."""
    annotations = ((node.get("metadata") or {}).get("annotations") or {})
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    if withdrawn is not None:
        if cordoned and annotations.get(WITHDRAWN_ANNOTATION) == withdrawn:
            return None
        return {"metadata": {"annotations": {WITHDRAWN_ANNOTATION: withdrawn}},
                "spec": {"unschedulable": True}}
    if WITHDRAWN_ANNOTATION not in annotations:
        return None
    return {"metadata": {"annotations": {WITHDRAWN_ANNOTATION: None}},
            "spec": {"unschedulable": None}}


def withdrawn_message(node_name: str, pool: str | None, remote_cluster_id: str) -> str:
    what = f"pool {pool}" if pool is not None else "the provider as one node (it declares pools)"
    return (f"{remote_cluster_id} no longer offers {what}: virtual node {node_name} is "
            "cordoned, and deleted once no pod is bound to it")


def new_node(node_name: str, labels: Mapping[str, str], taints: Sequence[Mapping[str, Any]],
             status: Mapping[str, Any],
             annotations: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    written = {key: value for key, value in (annotations or {}).items() if value is not None}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name, "labels": dict(labels),
                     "annotations": {**written,
                                     MANAGED_ANNOTATION: _managed_record(labels, taints)}},
        "spec": {"taints": [dict(t) for t in taints]},
        "status": dict(status),
    }


def node_metadata_patch(node: Mapping[str, Any], labels: Mapping[str, str],
                        taints: Sequence[Mapping[str, Any]],
                        annotations: Mapping[str, str | None] | None = None
                        ) -> dict[str, Any] | None:
    """A merge patch bringing the node's labels, taints and the agent's `annotations` (None:
    absent) to the desired ones (None when they already are). It carries the resourceVersion:
    taints are a list others edit too."""
    metadata = node.get("metadata") or {}
    current_labels: dict[str, str] = dict(metadata.get("labels") or {})
    current_taints: list[dict[str, Any]] = list((node.get("spec") or {}).get("taints") or [])
    owned_labels, owned_taints = _managed(node)

    label_patch: dict[str, Any] = {k: v for k, v in labels.items() if current_labels.get(k) != v}
    label_patch.update({k: None for k in owned_labels - set(labels) if k in current_labels})

    desired_keys = {t["key"] for t in taints}
    others = [t for t in current_taints
              if t.get("key") not in desired_keys and t.get("key") not in owned_taints]
    wanted_taints = [dict(t) for t in taints] + others
    record = _managed_record(labels, taints)

    current_annotations = metadata.get("annotations") or {}
    annotation_patch = {key: value for key, value in
                        {**(annotations or {}), MANAGED_ANNOTATION: record}.items()
                        if current_annotations.get(key) != value}

    patch: dict[str, Any] = {}
    if label_patch:
        patch.setdefault("metadata", {})["labels"] = label_patch
    if annotation_patch:
        patch.setdefault("metadata", {})["annotations"] = annotation_patch
    if _taint_set(wanted_taints) != _taint_set(current_taints):
        patch["spec"] = {"taints": wanted_taints}
    if not patch:
        return None
    patch.setdefault("metadata", {})["resourceVersion"] = metadata.get("resourceVersion")
    return patch


def _taint_set(taints: Sequence[Mapping[str, Any]]) -> set[tuple[Any, Any, Any]]:
    return {(t.get("key"), t.get("value"), t.get("effect")) for t in taints}


@dataclass(frozen=True)
class DesiredNode:
    """The virtual Node as it should be: `status` without timestamps (see `node_status_patch`)."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    status: dict[str, Any]
    annotations: dict[str, str | None]
    """The annotations the agent keeps (MAX_POD_ANNOTATION); None: to be absent."""


def desired_node(node_name: str, remote_cluster_id: str, offer: ResourceOffer | None,
                 virtual_node: VirtualNode | None, health: Health, node_ip: str,
                 kubelet_port: int, pool: str | None = None) -> DesiredNode:
    """The virtual Node from the offer and the VirtualNode: its capacity is the VirtualNode's
    `resources` when set, else what the offer announces. The node of the pool `pool` has what
    that pool lends (nothing once the offer no longer has it); the VirtualNode's `resources`
    override only a provider shown as one node."""
    capacity: dict[str, str] = {}
    max_pod: Mapping[str, str] = {}
    lent = _pool(offer, pool)
    if pool is not None:
        if lent is not None:
            capacity, max_pod = dict(lent.resources), lent.max_pod_resources
    elif virtual_node is not None and virtual_node.spec.resources is not None:
        capacity = dict(virtual_node.spec.resources)
    elif offer is not None:
        capacity = dict(offer.spec.resources)
    if pool is None and offer is not None:
        max_pod = offer.spec.max_pod_resources
    extra_taints = [t.to_wire() for t in virtual_node.spec.taints] if virtual_node else []
    return DesiredNode(
        name=node_name,
        labels=virtual_node_labels(node_name, remote_cluster_id, offer, virtual_node, pool),
        taints=node_taints(extra_taints),
        annotations=max_pod_annotation(max_pod),
        status=node_status(capacity, health, remote_cluster_id, node_ip, node_name,
                           kubelet_port, offer_platform(lent or offer)))
