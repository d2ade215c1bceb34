"""`annexctl status`: the home cluster's view of its peerings, read with the home kubeconfig.

- foreign clusters: the providers it knows of, how they were found, their offer and how far
  peering went (Discovered, Authenticated, Peered), as `annexctl discover` shows them;
- virtual nodes (VirtualNode, its Node's readiness and capacity, the last health check): one
  row per Node, a provider whose offer has pools being one Node per pool;
- offers: each VirtualNode's kubeconfig Secret is the consumer identity, which may read its
  ResourceOffer on the provider (an unreachable provider is shown as such, not an error);
- extended namespaces (NamespaceOffloadings, per-cluster Ready conditions), and the remote
  claims whose data keeps a withdrawn namespace's twin on its provider;
- pods on virtual nodes by phase, and the ones held back (OffloadingBackOff, remote creation
  failures);
- recent Warning Events annex reported (FailedReflection, RemoteCreationFailed, ...).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from annexctl import discover
from annexctl.clusters import EXIT_NOT_INSTALLED, CliError, Cluster
from annexctl.consumer import provider_of
from annexctl.output import Report, Table
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.virtual_node import VIRTUAL_NODE, VirtualNode
from shared.forge.node import agent_nodes, labels_by_name
from shared.wellknown import (
    FAILED_REFLECTION_REASON,
    OFFLOADING_BACKOFF_REASON,
    REMOTE_CREATION_FAILED_CONDITION,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
)

HOME_AGENT_COMPONENT = "annex-home-agent"
ANNEX_WARNING_REASONS = frozenset(
    {FAILED_REFLECTION_REASON, REMOTE_CREATION_FAILED_CONDITION, OFFLOADING_BACKOFF_REASON})
PHASES = ("Running", "Pending", "Succeeded", "Failed", "Unknown")


def _condition(conditions: list[dict[str, Any]] | None, kind: str = "Ready") -> dict[str, Any]:
    return next((c for c in conditions or [] if c.get("type") == kind), {})


def _condition_text(condition: dict[str, Any]) -> str:
    if not condition:
        return "Unknown"
    reason = f" ({condition['reason']})" if condition.get("reason") else ""
    return f"{condition.get('status', 'Unknown')}{reason}"


def virtual_nodes(home: Cluster) -> list[VirtualNode]:
    return [VirtualNode.model_validate(obj)
            for obj in home.list(VIRTUAL_NODE.api_version, VIRTUAL_NODE.kind)]


def virtual_node_rows(found: list[VirtualNode],
                      nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per Node of each VirtualNode: its node, or one per pool of its provider's offer
    (`liqo-<provider>-<pool>`, each with its pool), as the virtual `nodes` are now."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    result = []
    for vn in found:
        base = vn.status.node_name or vn.spec.effective_node_name()
        own = agent_nodes(base, vn.spec.cluster_id, labels_by_name(nodes)) or {base: None}
        for node_name, pool in sorted(own.items()):
            node = by_name.get(node_name) or {}
            capacity = (node.get("status") or {}).get("capacity") or {}
            result.append({
                "namespace": vn.metadata.namespace, "name": vn.metadata.name,
                "clusterId": vn.spec.cluster_id, "node": node_name, "pool": pool,
                "nodeExists": bool(node),
                "cordoned": bool((node.get("spec") or {}).get("unschedulable")),
                "ready": _condition((node.get("status") or {}).get("conditions")),
                "virtualNodeReady": _condition([c.to_wire() for c in vn.status.conditions]),
                "lastHealthCheck": str(vn.status.last_health_check or ""),
                "capacity": {k: capacity[k] for k in ("cpu", "memory", "pods") if k in capacity},
            })
    return result


def virtual_nodes_table(rows: list[dict[str, Any]]) -> Table:
    return Table(
        "Virtual nodes", ["CLUSTER", "VIRTUALNODE", "NODE", "POOL", "READY", "LAST CHECK", "CPU",
                          "MEMORY", "PODS"],
        [[vn["clusterId"], f"{vn['namespace']}/{vn['name']}", vn["node"], vn["pool"] or "",
          (_condition_text(vn["ready"]) + (", cordoned" if vn["cordoned"] else ""))
          if vn["nodeExists"] else "no node",
          vn["lastHealthCheck"], vn["capacity"].get("cpu", ""),
          vn["capacity"].get("memory", ""), vn["capacity"].get("pods", "")]
         for vn in rows], empty="none (no VirtualNode: install the home chart)")


def _offers(home: Cluster, virtual_node: VirtualNode) -> dict[str, Any]:
    """The ResourceOffer(s) the provider publishes for us, read as the consumer identity."""
    entry: dict[str, Any] = {"clusterId": virtual_node.spec.cluster_id, "offers": [],
                             "error": None}
    try:
        provider, tenant = provider_of(home, virtual_node)
        try:
            offers = provider.list(RESOURCE_OFFER.api_version, RESOURCE_OFFER.kind,
                                   namespace=tenant)
        finally:
            provider.close()
    except CliError as error:
        entry["error"] = str(error)
        return entry
    entry["offers"] = [{"name": o["metadata"]["name"], "namespace": o["metadata"]["namespace"],
                        "resources": (o.get("spec") or {}).get("resources") or {},
                        "labels": (o.get("spec") or {}).get("labels") or {},
                        "pools": (o.get("spec") or {}).get("pools") or [],
                        "phase": (o.get("status") or {}).get("phase")} for o in offers]
    return entry


def pools_table(offer_entries: list[dict[str, Any]]) -> Table:
    """The pools each provider's offer is split into: their selectors, what they lend, and the
    most one pod can get in each (a pod asking more fits no node of the pool)."""
    return Table(
        "Pools", ["CLUSTER", "POOL", "NODE SELECTOR", "CPU", "MEMORY", "PODS", "ONE POD CPU",
                  "ONE POD MEMORY"],
        [[entry["clusterId"], pool.get("name", ""),
          ",".join(f"{k}={v}" for k, v in sorted((pool.get("nodeSelector") or {}).items())),
          *((pool.get("resources") or {}).get(r, "") for r in ("cpu", "memory", "pods")),
          *((pool.get("maxPodResources") or {}).get(r, "") for r in ("cpu", "memory"))]
         for entry in offer_entries for offer in entry["offers"] for pool in offer["pools"]],
        empty="none (each provider is one pool)")


def _offloadings(home: Cluster) -> list[dict[str, Any]]:
    result = []
    for obj in home.list(NAMESPACE_OFFLOADING.api_version, NAMESPACE_OFFLOADING.kind):
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        clusters = {cluster: _condition(conditions) for cluster, conditions in
                    (status.get("remoteNamespacesConditions") or {}).items()}
        result.append({
            "namespace": obj["metadata"]["namespace"],
            "podOffloadingStrategy": spec.get("podOffloadingStrategy"),
            "namespaceMappingStrategy": spec.get("namespaceMappingStrategy"),
            "phase": status.get("offloadingPhase"),
            "remoteNamespaceName": status.get("remoteNamespaceName"),
            "clusters": clusters,
            "retainedRemoteClaims": status.get("retainedRemoteClaims") or {},
        })
    return result


def _held_back(pod: dict[str, Any]) -> str | None:
    """Why an offloaded pod is not running remotely, if annex said so."""
    status = pod.get("status") or {}
    if status.get("reason") == OFFLOADING_BACKOFF_REASON:
        return OFFLOADING_BACKOFF_REASON
    failed = _condition(status.get("conditions"), REMOTE_CREATION_FAILED_CONDITION)
    if failed.get("status") == "True":
        return f"{REMOTE_CREATION_FAILED_CONDITION}: {failed.get('message', '')}"
    return None


def _pods(home: Cluster, node_names: list[str]) -> list[dict[str, Any]]:
    result = []
    for node in node_names:
        pods = home.list("v1", "Pod", field_selector=f"spec.nodeName={node}")
        phases = Counter((p.get("status") or {}).get("phase") or "Unknown" for p in pods)
        held = [{"pod": f"{p['metadata']['namespace']}/{p['metadata']['name']}", "reason": why}
                for p in pods if (why := _held_back(p))]
        result.append({"node": node, "phases": {ph: phases.get(ph, 0) for ph in PHASES},
                       "heldBack": held})
    return result


def _is_annex_warning(event: dict[str, Any]) -> bool:
    component = event.get("reportingComponent") or (event.get("source") or {}).get("component")
    return (event.get("reason") in ANNEX_WARNING_REASONS or component == HOME_AGENT_COMPONENT
            or (event.get("involvedObject") or {}).get("kind") == NAMESPACE_OFFLOADING.kind)


def _when(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime")
               or event["metadata"].get("creationTimestamp") or "")


def _warnings(home: Cluster, limit: int) -> list[dict[str, Any]]:
    events = [e for e in home.list("v1", "Event", field_selector="type=Warning")
              if _is_annex_warning(e)]
    events.sort(key=_when)
    return [{"time": _when(e), "namespace": e["metadata"]["namespace"],
             "object": f"{(e.get('involvedObject') or {}).get('kind')}/"
                       f"{(e.get('involvedObject') or {}).get('name')}",
             "reason": e.get("reason"), "message": e.get("message"),
             "count": e.get("count") or 1} for e in events[-limit:]]


def status(home: Cluster, events: int = 10, offers: bool = True) -> Report:
    found = virtual_nodes(home)
    nodes = virtual_node_rows(found, home.list(
        "v1", "Node", label_selector=f"{TYPE_LABEL}={TYPE_VIRTUAL_NODE}"))
    offer_entries = [_offers(home, vn) for vn in found] if offers else []
    offloadings = _offloadings(home)
    pods = _pods(home, [vn["node"] for vn in nodes])
    warnings = _warnings(home, events)
    try:
        foreign = discover.foreign_clusters(home)
    except CliError as error:
        if error.exit_code != EXIT_NOT_INSTALLED:
            raise
        foreign = []  # a home chart from before ForeignClusters
    data = {"foreignClusters": foreign, "virtualNodes": nodes, "offers": offer_entries,
            "namespaceOffloadings": offloadings, "pods": pods, "warnings": warnings}

    tables = [
        discover.table(foreign),
        virtual_nodes_table(nodes),
        Table("Offers", ["CLUSTER", "OFFER", "PHASE", "CPU", "MEMORY", "PODS", "LABELS"],
              [[entry["clusterId"], f"{o['namespace']}/{o['name']}", o["phase"] or "",
                o["resources"].get("cpu", ""), o["resources"].get("memory", ""),
                o["resources"].get("pods", ""),
                ",".join(f"{k}={v}" for k, v in sorted(o["labels"].items()))]
               for entry in offer_entries for o in entry["offers"]]
              + [[entry["clusterId"], "", "unavailable", "", "", "", entry["error"]]
                 for entry in offer_entries if entry["error"]]),
        pools_table(offer_entries),
        Table("Extended namespaces", ["NAMESPACE", "PODS", "MAPPING", "PHASE", "REMOTE NAME",
                                      "CLUSTERS"],
              [[o["namespace"], o["podOffloadingStrategy"] or "",
                o["namespaceMappingStrategy"] or "", o["phase"] or "",
                o["remoteNamespaceName"] or "",
                "; ".join(f"{cluster}: {_condition_text(c)}"
                          for cluster, c in sorted(o["clusters"].items()))]
               for o in offloadings]),
        Table("Remote claims kept (a withdrawal waits for them)",
              ["NAMESPACE", "CLUSTER", "CLAIMS"],
              [[o["namespace"], cluster, ", ".join(claims)] for o in offloadings
               for cluster, claims in sorted(o["retainedRemoteClaims"].items())],
              empty="none"),
        Table("Pods on virtual nodes", ["NODE", *(p.upper() for p in PHASES), "HELD BACK"],
              [[p["node"], *(str(p["phases"][ph]) for ph in PHASES),
                "; ".join(f"{h['pod']} ({h['reason']})" for h in p["heldBack"])]
               for p in pods]),
        Table("Recent warnings", ["TIME", "NAMESPACE", "OBJECT", "REASON", "COUNT", "MESSAGE"],
              [[w["time"], w["namespace"], w["object"], w["reason"] or "", str(w["count"]),
                w["message"] or ""] for w in warnings]),
    ]
    return Report(data, tables)
