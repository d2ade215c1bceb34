"""What only annex's components remove, removed before they go: `annexctl uninstall` (the
charts' pre-delete hooks run it) and `annexctl unpeer` share it.

Home, per VirtualNode: it is deleted and the running components drain it (the home controller
cordons the Node and deletes its pods, the agent withdraws every offloaded namespace from the
provider, the controller deletes the agent, its Node and Lease, then its finalizer). What is
left once the VirtualNode is gone (an agent that made its Node again while stopping, the election
Lease, the controller's token grants, the agents' label on offloaded namespaces, the
ForeignCluster) is deleted here. A drain that does not end in time is ended here (the agent's
and the controller's finalizers removed, so nothing hangs) and reported as a failure: the
provider may keep the twin namespaces.

Provider, per tenant namespace: its NamespaceMaps are deleted and the running enforcer deletes
their twin namespaces, then its finalizer. A map still there in time has its twin namespaces
(those labelled as made for that consumer by this provider, never another) deleted here, then
the finalizer removed.

Each step is bounded by one deadline; only objects annex made are touched (the ownership labels,
the finalizer names, the release's labels), never a user's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from annexctl.clusters import CliError, Cluster
from annexctl.output import Report, Table
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.virtual_node import FINALIZER as DRAIN_FINALIZER
from shared.api.virtual_node import VIRTUAL_NODE
from shared.forge.agent import (
    NAMESPACE_GRANT_COMPONENT,
    RETIRED_GRANT_COMPONENTS,
    election_lease_name,
)
from shared.forge.namespace_offloading import finalizer_name
from shared.ownership import is_owned
from shared.wellknown import (
    REMOTE_CLUSTER_ID_LABEL,
    SCHEDULING_ENABLED_LABEL,
    TENANT_NAMESPACE_LABEL,
    TWIN_NAMESPACES_FINALIZER,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
)

DEFAULT_TIMEOUT_SECONDS = 120.0
POLL_SECONDS = 0.5
COMPONENTS_SHARE = 0.5
"""Of the time allowed, what the running components get before this takes over."""
# What each side's cleanup uses, no more: the charts' hook roles hold exactly these (a chart
# test checks it).
HOME_CLUSTER_RULES = [
    {"apiGroups": ["offloading.liqo.io"], "resources": ["namespaceoffloadings"],
     "verbs": ["list", "patch"]},
    {"apiGroups": ["discovery.liqo.io"], "resources": ["foreignclusters"], "verbs": ["delete"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "delete"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "patch"]},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"],
     "verbs": ["list", "delete"]},
]
HOME_NAMESPACE_RULES = [
    {"apiGroups": ["offloading.liqo.io"], "resources": ["virtualnodes"],
     "verbs": ["list", "delete", "patch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["delete"]},
]
PROVIDER_CLUSTER_RULES = [
    {"apiGroups": ["virtualkubelet.liqo.io"], "resources": ["namespacemaps"],
     "verbs": ["list", "get", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "get", "delete"]},
]
LEASE = ("coordination.k8s.io/v1", "Lease")
ROLE_BINDING = ("rbac.authorization.k8s.io/v1", "RoleBinding")
INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"


@dataclass
class Cleanup:
    """What was done (rows: cluster, kind, name, action) and what could not be (problems)."""

    started: float = field(default_factory=time.monotonic)
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    rows: list[list[str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def components_deadline(self) -> float:
        return self.started + self.timeout * COMPONENTS_SHARE

    @property
    def deadline(self) -> float:
        return self.started + self.timeout

    def done(self, where: str, kind: str, name: str, action: str) -> None:
        self.rows.append([where, kind, name, action])

    def table(self) -> Table:
        return Table("Objects", ["CLUSTER", "KIND", "NAME", "ACTION"], self.rows,
                     empty="nothing to remove")

    def report(self, data: dict[str, Any], notes: Iterable[str] = ()) -> Report:
        """The report; a CliError naming what is left when something could not be done."""
        if self.problems:
            raise CliError("; ".join(self.problems))
        data = {**data, "objects": [dict(zip(("cluster", "kind", "name", "action"), row,
                                             strict=True)) for row in self.rows]}
        return Report(data, [self.table()], list(notes))


def wait(check: Callable[[], bool], deadline: float) -> bool:
    """Poll `check` until it holds or the deadline passes; whether it held."""
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True


def _name(obj: dict[str, Any]) -> str:
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else str(
        metadata["name"])


def remove_finalizer(cluster: Cluster, obj: dict[str, Any], finalizer: str,
                     cleanup: Cleanup) -> None:
    """Remove one finalizer, guarded by the resourceVersion read (others' finalizers stay)."""
    metadata = obj["metadata"]
    finalizers = list(metadata.get("finalizers") or [])
    if finalizer not in finalizers:
        return
    cluster.patch(obj["apiVersion"], obj["kind"], metadata["name"], metadata.get("namespace"),
                  {"metadata": {"finalizers": [f for f in finalizers if f != finalizer],
                                "resourceVersion": metadata["resourceVersion"]}})
    cleanup.done(cluster.role, obj["kind"], _name(obj), f"finalizer {finalizer} removed")


# --- home ------------------------------------------------------------------------------------


def _virtual_nodes(home: Cluster, namespace: str, remote_cluster_id: str | None
                   ) -> list[dict[str, Any]]:
    return [vn for vn in home.list(VIRTUAL_NODE.api_version, VIRTUAL_NODE.kind, namespace)
            if remote_cluster_id in (None, (vn.get("spec") or {}).get("clusterId"))]


def drain_virtual_nodes(home: Cluster, namespace: str, cleanup: Cleanup,
                        remote_cluster_id: str | None = None) -> set[str]:
    """Delete the VirtualNodes of `namespace` (those serving `remote_cluster_id` only, when
    given) and let the home controller drain them; end the drains that do not finish in time.
    Returns the remote cluster ids they served."""
    virtual_nodes = _virtual_nodes(home, namespace, remote_cluster_id)
    served = {str(vn["spec"]["clusterId"]) for vn in virtual_nodes}
    for vn in virtual_nodes:
        if vn["metadata"].get("deletionTimestamp") is None:
            home.delete(VIRTUAL_NODE.api_version, VIRTUAL_NODE.kind, vn["metadata"]["name"],
                        namespace)
            cleanup.done("home", VIRTUAL_NODE.kind, _name(vn), "deleted")

    def drained() -> bool:
        return not _virtual_nodes(home, namespace, remote_cluster_id)

    if wait(drained, cleanup.components_deadline):
        return served
    for vn in _virtual_nodes(home, namespace, remote_cluster_id):
        cluster_id = str(vn["spec"]["clusterId"])
        held = _offloadings_held(home, cluster_id)
        cleanup.problems.append(
            f"home: VirtualNode {_name(vn)} was not drained in "
            f"{cleanup.timeout * COMPONENTS_SHARE:g}s (is the home controller running? "
            f"`kubectl -n {namespace} get events --field-selector involvedObject.name="
            f"{vn['metadata']['name']}`); its drain was ended here"
            + (f" and the provider {cluster_id} may keep the twins of "
               f"{', '.join(_name(o) for o in held)}: run `annexctl uninstall --side provider` "
               "there" if held else ""))
        for offloading in held:
            remove_finalizer(home, offloading, finalizer_name(cluster_id), cleanup)
        remove_finalizer(home, vn, DRAIN_FINALIZER, cleanup)
    wait(drained, cleanup.deadline)
    return served


def _offloadings_held(home: Cluster, cluster_id: str) -> list[dict[str, Any]]:
    finalizer = finalizer_name(cluster_id)
    return [o for o in home.list(NAMESPACE_OFFLOADING.api_version, NAMESPACE_OFFLOADING.kind)
            if finalizer in (o["metadata"].get("finalizers") or [])]


def remove_agent_leftovers(home: Cluster, namespace: str, cluster_ids: Iterable[str],
                           cleanup: Cleanup) -> None:
    """What the agents of `cluster_ids` made at home and nobody removes once they are gone:
    their virtual Nodes (an agent stopping may make its Node again), election Leases and
    ForeignClusters."""
    for cluster_id in sorted(cluster_ids):
        for node in home.list("v1", "Node", label_selector=(
                f"{TYPE_LABEL}={TYPE_VIRTUAL_NODE},{REMOTE_CLUSTER_ID_LABEL}={cluster_id}")):
            if home.delete("v1", "Node", node["metadata"]["name"]):
                cleanup.done("home", "Node", node["metadata"]["name"], "deleted")
        lease = election_lease_name(cluster_id)
        if home.delete(*LEASE, lease, namespace):
            cleanup.done("home", "Lease", f"{namespace}/{lease}", "deleted")
        if _served(home, FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind) and home.delete(
                FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind, cluster_id):
            cleanup.done("home", FOREIGN_CLUSTER.kind, cluster_id, "deleted")


def remove_release_grants(home: Cluster, release: str, cleanup: Cleanup) -> None:
    """The home controller's namespace grants of `release` (RoleBindings in offloaded
    namespaces, an earlier version's too) and the agents' scheduling label on those
    namespaces."""
    components = ",".join(sorted({NAMESPACE_GRANT_COMPONENT, *RETIRED_GRANT_COMPONENTS}))
    for binding in home.list(*ROLE_BINDING, label_selector=(
            f"{COMPONENT_LABEL} in ({components}),{INSTANCE_LABEL}={release}")):
        metadata = binding["metadata"]
        if home.delete(*ROLE_BINDING, metadata["name"], metadata["namespace"]):
            cleanup.done("home", "RoleBinding", _name(binding), "deleted")
    for namespace in home.list("v1", "Namespace", label_selector=SCHEDULING_ENABLED_LABEL):
        home.patch("v1", "Namespace", namespace["metadata"]["name"], None,
                   {"metadata": {"labels": {SCHEDULING_ENABLED_LABEL: None}}})
        cleanup.done("home", "Namespace", namespace["metadata"]["name"],
                     f"label {SCHEDULING_ENABLED_LABEL} removed")


def _served(cluster: Cluster, api_version: str, kind: str) -> bool:
    try:
        cluster.resource(api_version, kind)
    except CliError:
        return False
    return True


def uninstall_home(home: Cluster, namespace: str, release: str,
                   timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Report:
    """Before the home-agent chart's release `release` in `namespace` goes."""
    cleanup = Cleanup(timeout=timeout)
    served: set[str] = set()
    if _served(home, VIRTUAL_NODE.api_version, VIRTUAL_NODE.kind):
        served = drain_virtual_nodes(home, namespace, cleanup)
    remove_agent_leftovers(home, namespace, served, cleanup)
    remove_release_grants(home, release, cleanup)
    return cleanup.report({"side": "home", "namespace": namespace, "release": release,
                           "remoteClusterIds": sorted(served)})


# --- provider --------------------------------------------------------------------------------


def _maps(provider: Cluster, tenant: str) -> list[dict[str, Any]]:
    return provider.list(NAMESPACE_MAP.api_version, NAMESPACE_MAP.kind, tenant)


def withdraw_consumer(provider: Cluster, tenant: dict[str, Any], provider_cluster_id: str,
                      cleanup: Cleanup) -> None:
    """Delete the NamespaceMaps of a tenant namespace and let the enforcer delete their twin
    namespaces; those it has not deleted in time are deleted here, then its finalizer."""
    namespace = tenant["metadata"]["name"]
    consumer = str((tenant["metadata"].get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL))
    for namespace_map in _maps(provider, namespace):
        if namespace_map["metadata"].get("deletionTimestamp") is None:
            provider.delete(NAMESPACE_MAP.api_version, NAMESPACE_MAP.kind,
                            namespace_map["metadata"]["name"], namespace)
            cleanup.done("provider", NAMESPACE_MAP.kind, _name(namespace_map), "deleted")
    if wait(lambda: not _maps(provider, namespace), cleanup.components_deadline):
        return
    for namespace_map in _maps(provider, namespace):
        mapping = (namespace_map.get("status") or {}).get("currentMapping") or {}
        twins = []
        for twin in sorted({str(e["remoteNamespace"]) for e in mapping.values()
                            if e.get("remoteNamespace")}):
            found = provider.get("v1", "Namespace", twin)
            if found is None or not is_owned(found, consumer, provider_cluster_id):
                continue  # gone already, or not this provider's for that consumer
            twins.append(twin)
            if found["metadata"].get("deletionTimestamp") is None:
                provider.delete("v1", "Namespace", twin)
                cleanup.done("provider", "Namespace", twin, "deleted (twin)")
        if not wait(lambda twins=twins: all(  # type: ignore[misc]
                provider.get("v1", "Namespace", t) is None for t in twins), cleanup.deadline):
            cleanup.problems.append(
                f"provider: the twin namespaces of NamespaceMap {_name(namespace_map)} "
                f"({', '.join(twins)}) are still terminating after {cleanup.timeout:g}s: its "
                "finalizer is kept")
            continue
        current = provider.get(NAMESPACE_MAP.api_version, NAMESPACE_MAP.kind,
                               namespace_map["metadata"]["name"], namespace)
        if current is not None:
            remove_finalizer(provider, current, TWIN_NAMESPACES_FINALIZER, cleanup)


def tenant_namespaces(provider: Cluster, consumer: str | None = None) -> list[dict[str, Any]]:
    selector = f"{TENANT_NAMESPACE_LABEL}=true" + (
        f",{REMOTE_CLUSTER_ID_LABEL}={consumer}" if consumer else "")
    return provider.list("v1", "Namespace", label_selector=selector)


def uninstall_provider(provider: Cluster, cluster_id: str,
                       timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Report:
    """Before the remote-enforcer chart's release goes: every consumer's offloaded namespaces
    withdrawn (the enforcer serves every tenant namespace, whoever made it)."""
    cleanup = Cleanup(timeout=timeout)
    tenants = tenant_namespaces(provider) if _served(
        provider, NAMESPACE_MAP.api_version, NAMESPACE_MAP.kind) else []
    for tenant in tenants:
        withdraw_consumer(provider, tenant, cluster_id, cleanup)
    return cleanup.report({"side": "provider", "clusterId": cluster_id,
                           "tenantNamespaces": [t["metadata"]["name"] for t in tenants]})
