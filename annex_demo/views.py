"""What the demo reads back from the clusters to show and to wait on (as plain dicts: the
shape kubectl shows)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from annex_demo.app import APP_LABELS, CONFIGMAP
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.ipremap import CidrRemap

POD_COLUMNS = ("NAME", "PHASE", "IP", "NODE")
NODE_COLUMNS = ("NAME", "READY", "REASON", "CPU", "MEMORY", "PODS")
FOREIGN_CLUSTER_COLUMNS = ("NAME", "API", "SOURCE", "PHASE")


def _plain(core: client.CoreV1Api, answer: object) -> Any:
    return core.api_client.sanitize_for_serialization(answer)


@dataclass(frozen=True)
class PodRow:
    name: str
    phase: str
    ip: str
    node: str
    uid: str = ""

    def cells(self) -> list[str]:
        return [self.name, self.phase, self.ip or "-", self.node or "-"]


def app_pods(core: client.CoreV1Api, namespace: str) -> list[PodRow]:
    """The sample application's pods in `namespace` (none if it does not exist)."""
    selector = ",".join(f"{k}={v}" for k, v in APP_LABELS.items())
    try:
        pods = _plain(core, core.list_namespaced_pod(namespace, label_selector=selector))
    except ApiException as error:
        if error.status == 404:
            return []
        raise
    rows = [PodRow(p["metadata"]["name"], p.get("status", {}).get("phase", ""),
                   p.get("status", {}).get("podIP", ""), p["spec"].get("nodeName", ""),
                   p["metadata"].get("uid", ""))
            for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
    return sorted(rows, key=lambda row: row.name)


def _ready(node: dict[str, Any]) -> tuple[str, str]:
    for condition in node.get("status", {}).get("conditions") or []:
        if condition["type"] == "Ready":
            return str(condition["status"]), str(condition.get("reason", ""))
    return "", ""


def ready_condition(core: client.CoreV1Api, node: str) -> tuple[str, str]:
    """(status, reason) of the node's Ready condition; ("", "") when it has none."""
    return _ready(_plain(core, core.read_node(node)))


def node_rows(core: client.CoreV1Api) -> list[list[str]]:
    rows = []
    for node in _plain(core, core.list_node())["items"]:
        allocatable = node.get("status", {}).get("allocatable") or {}
        rows.append([node["metadata"]["name"], *_ready(node),
                     *(str(allocatable.get(r, "-")) for r in ("cpu", "memory", "pods"))])
    return sorted(rows)


def foreign_cluster_rows(api: client.ApiClient) -> list[list[str]]:
    """The providers the home cluster knows, as `kubectl get foreignclusters` shows them."""
    found = cast(dict[str, Any], client.CustomObjectsApi(api).list_cluster_custom_object(
        FOREIGN_CLUSTER.group, FOREIGN_CLUSTER.version, FOREIGN_CLUSTER.plural))
    return sorted([item["metadata"]["name"], item["spec"].get("apiServerUrl") or "-",
                   ((item.get("status") or {}).get("discovery") or {}).get("source") or "-",
                   (item.get("status") or {}).get("phase") or "-"]
                  for item in found["items"])


def configmap_greeting(core: client.CoreV1Api, namespace: str) -> str | None:
    try:
        found = _plain(core, core.read_namespaced_config_map(CONFIGMAP, namespace))
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return (found.get("data") or {}).get("greeting")


@dataclass(frozen=True)
class Convergence:
    done: bool
    summary: str


def convergence(home: list[PodRow], remote: list[PodRow], replicas: int, virtual_node: str,
                remap: CidrRemap) -> Convergence:
    """Every replica runs on the virtual node at home, its twin runs remotely, and the home pod
    shows the remote pod's address through the remapped CIDR."""
    by_name = {row.name: row for row in remote}
    matched = [r for r in home if r.phase == "Running" and r.node == virtual_node
               and r.name in by_name and by_name[r.name].phase == "Running"
               and r.ip == remap.remap(by_name[r.name].ip)]
    done = len(home) == replicas == len(matched) == len(remote)
    # Where the home pods are, for a reader wondering why it takes long.
    where = Counter(f"{row.phase or '?'} on {row.node or 'no node'}" for row in home)
    at_home = ", ".join(f"{count} {place}" for place, count in sorted(where.items())) or "none"
    return Convergence(done, f"{len(matched)}/{replicas} replicas running remotely and mirrored "
                             f"at home (home pods: {at_home}; {len(remote)} remotely)")
