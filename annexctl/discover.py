"""`annexctl discover`: the providers the home cluster knows of (its ForeignClusters: discovered
on the LAN or in DNS, or added by peering), with their address, how they were found, what they
offer and how far peering went. `annexctl status` shows the same table."""

from __future__ import annotations

from typing import Any

from annexctl.clusters import CliError, Cluster
from annexctl.output import Report, Table
from shared.api.foreign_cluster import FOREIGN_CLUSTER, ForeignCluster

COLUMNS = ["NAME", "CLUSTER", "API", "SOURCE", "ANNOUNCED", "OFFER", "PHASE", "ACCEPTED",
           "VIRTUALNODE"]


def foreign_clusters(home: Cluster) -> list[dict[str, Any]]:
    found = [ForeignCluster.model_validate(obj)
             for obj in home.list(FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind)]
    return [{
        "name": fc.metadata.name, "clusterId": fc.spec.cluster_id,
        "apiServerUrl": fc.spec.api_server_url or "",
        "source": fc.status.discovery.source.value if fc.status.discovery else "",
        "announced": fc.status.discovery.announced if fc.status.discovery else None,
        "offer": fc.status.offer.summary if fc.status.offer else "",
        "phase": fc.status.phase.value if fc.status.phase else "",
        "accepted": fc.spec.accepted,
        "virtualNode": fc.status.virtual_node or "",
        "conditions": [c.to_wire() for c in fc.status.conditions],
    } for fc in sorted(found, key=lambda fc: str(fc.metadata.name))]


def table(entries: list[dict[str, Any]]) -> Table:
    return Table("Foreign clusters", COLUMNS, [
        [e["name"], e["clusterId"], e["apiServerUrl"], e["source"],
         "" if e["announced"] is None else str(e["announced"]).lower(), e["offer"], e["phase"],
         str(e["accepted"]).lower(), e["virtualNode"]] for e in entries],
        empty="none (discovery off, nothing announced, nobody peered)")


def discover(home: Cluster) -> Report:
    entries = foreign_clusters(home)
    notes = [f"{e['name']}: {c['message']}" for e in entries for c in e["conditions"]
             if c.get("status") == "False" and c.get("message")]
    if any(e["phase"] == "Discovered" for e in entries):
        notes.append("A Discovered cluster grants nothing yet: peer with it with `annexctl peer "
                     "--from-discovered NAME --remote-kubeconfig ...` (the provider's admin "
                     "consents), or redeem a token its admin generated (`annexctl peer --token`).")
    return Report({"foreignClusters": entries}, [table(entries)], notes)


def discovered(home: Cluster, name: str) -> ForeignCluster:
    """The ForeignCluster `name` (its name or its cluster id); CliError when unknown."""
    obj = home.get(FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind, name)
    if obj is None:
        obj = next((o for o in home.list(FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind)
                    if (o.get("spec") or {}).get("clusterId") == name), None)
    if obj is None:
        raise CliError(f"{home.where}: no ForeignCluster {name} (see `annexctl discover`)")
    return ForeignCluster.model_validate(obj)
