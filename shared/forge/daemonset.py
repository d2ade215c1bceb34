"""A DaemonSet's pod on a virtual node: never offloaded.

A DaemonSet runs one pod on each node to serve that node (its logs, metrics, network, storage),
usually through the node's host namespaces and paths. A virtual node stands for a whole provider
cluster, whose own nodes run the provider's own daemons: a copy offloaded to some provider node
would serve nothing of the virtual node's, duplicate what the provider runs, and be refused by
the provider's pod policy whenever it needs host access. Offloading one pod per virtual node
would be no better: a workload that wants pods spread over a provider is a Deployment with an
anti-affinity preset.

Its pods land on a virtual node only when they tolerate its taint (a tolerate-all toleration,
as node agents often carry); the DaemonSet controller then wants a pod there for as long as the
node exists. The agent leaves that pod Pending with reason `DaemonSetPodNotOffloaded`, its
conditions False with that reason and a message saying why and how to keep the DaemonSet off
virtual nodes, an Event on the pod and on the DaemonSet, and never a ShadowPod. It never deletes
it: the DaemonSet controller would make it again at once on the same node. The pod counts as
unavailable in the DaemonSet's status, as a pod a real node cannot run does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.wellknown import TYPE_LABEL, TYPE_VIRTUAL_NODE, VIRTUAL_NODE_TAINT_KEY

DAEMONSET_POD_REASON = "DaemonSetPodNotOffloaded"


def daemon_set_of(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod's controller reference when its controller is a DaemonSet (apps), else None."""
    for reference in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if (reference.get("controller") and reference.get("kind") == "DaemonSet"
                and str(reference.get("apiVersion") or "").startswith("apps/")):
            return dict(reference)
    return None


def daemon_set_object(pod: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
    """The DaemonSet `reference` names, as much of it as an Event about it needs."""
    return {"apiVersion": reference.get("apiVersion"), "kind": reference.get("kind"),
            "metadata": {"name": reference.get("name"), "uid": reference.get("uid"),
                         "namespace": (pod.get("metadata") or {}).get("namespace")}}


def not_offloaded_message(reference: Mapping[str, Any], node_name: str) -> str:
    """Why the DaemonSet's pod stays Pending on `node_name`, and how to keep it off."""
    return (f"DaemonSet {reference.get('name')} is not offloaded: {node_name} is a virtual node "
            f"standing for a remote cluster, whose nodes run their own daemons, so its pod "
            f"stays Pending here. To keep the DaemonSet off virtual nodes, give its pod template "
            f"the node affinity {TYPE_LABEL} NotIn [{TYPE_VIRTUAL_NODE}], or no toleration of "
            f"{VIRTUAL_NODE_TAINT_KEY}")
