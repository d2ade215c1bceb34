"""The virtual node's status: its conditions from the health checks, its addresses, what it
lends, and the status to write (`node_status_patch`: nothing while nothing changes, a
resource the offer no longer lends zeroed). The rest of the Node is `shared.forge.node`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.rfc3339 import rfc3339

READY = "Ready"
READY_REASON = "RemoteClusterReady"
UNREACHABLE_REASON = "RemoteClusterUnreachable"
PENDING_REASON = "RemoteClusterNotChecked"
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")


@dataclass(frozen=True)
class Health:
    """What the health checks concluded: ready (None before the first check) and why."""

    ready: bool | None
    message: str


def readiness(health: Health) -> tuple[str, str]:
    """The status and reason of the Ready condition, the Node's and the VirtualNode's alike."""
    if health.ready is None:
        return "Unknown", PENDING_REASON
    return ("True", READY_REASON) if health.ready else ("False", UNREACHABLE_REASON)


def _conditions(health: Health, remote_cluster_id: str) -> list[dict[str, str]]:
    status, reason = readiness(health)
    if health.ready is None:
        message = f"remote cluster {remote_cluster_id} not checked yet"
    elif health.ready:
        message = f"remote cluster {remote_cluster_id} is reachable"
    else:
        message = f"remote cluster {remote_cluster_id} is unreachable: {health.message}"
    ready = {"type": READY, "status": status, "reason": reason, "message": message}
    pressure = [{"type": kind, "status": "False", "reason": "RemoteClusterHasNo" + kind,
                 "message": f"no {kind} reported by remote cluster {remote_cluster_id}"}
                for kind in PRESSURE_CONDITIONS]
    return [*pressure, ready]


def node_addresses(node_ip: str) -> list[dict[str, str]]:
    """Where the API server dials the virtual node's kubelet endpoint: the agent's own address
    only. kube-apiserver takes the first address of its --kubelet-preferred-address-types
    (Hostname first by default) that the node lists, and nothing resolves a virtual node's name:
    a Hostname address would make `kubectl logs` fail with a DNS lookup error."""
    return [{"type": "InternalIP", "address": node_ip}]


def node_status(capacity: Mapping[str, str], health: Health, remote_cluster_id: str,
                node_ip: str, node_name: str, kubelet_port: int,
                platform: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The node status the agent maintains, without timestamps (see `node_status_patch`).
    `platform` is the offer's architecture and kubeletVersion (empty until it tells them)."""
    platform = platform or {}
    return {
        "capacity": dict(capacity),
        "allocatable": dict(capacity),
        "conditions": _conditions(health, remote_cluster_id),
        "addresses": node_addresses(node_ip),
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "nodeInfo": {"operatingSystem": "linux",
                     "architecture": platform.get("architecture", ""),
                     "kubeletVersion": platform.get("kubeletVersion", ""), "kubeProxyVersion": "",
                     "containerRuntimeVersion": "annex://remote", "osImage": "",
                     "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
    }


def status_as_known(desired: Mapping[str, Any], current: Mapping[str, Any], health: Health,
                    offer_known: bool) -> dict[str, Any]:
    """`desired` but for what the agent cannot tell yet, which stays as the node's `current`
    status says it: its Ready condition before the first health check (a restarted agent must
    not write Unknown for an unchanged remote), its capacity, allocatable and nodeInfo while the
    remote side is not listed (e.g. unreachable since a restart: only readiness is ours to
    tell)."""
    status = dict(desired)
    if health.ready is None:
        existing = next((c for c in current.get("conditions") or [] if c.get("type") == READY),
                        None)
        if existing is not None:
            status["conditions"] = [existing if c["type"] == READY else c
                                    for c in desired["conditions"]]
    if not offer_known:
        status.update(capacity=current.get("capacity") or {},
                      allocatable=current.get("allocatable") or {},
                      nodeInfo=current.get("nodeInfo") or desired["nodeInfo"])
    return status


def _comparable(condition: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(condition.get(k) for k in ("type", "status", "reason", "message"))


def node_status_patch(current_status: Mapping[str, Any], desired: Mapping[str, Any],
                      now: datetime) -> dict[str, Any] | None:
    """The status to write (a complete status with timestamps), or None when the node already
    says it. A condition keeps its timestamps unless it changed: nothing is written while
    nothing changes (the Lease is the heartbeat)."""
    current_conditions = {c.get("type"): c for c in current_status.get("conditions") or []}
    conditions = []
    changed = False
    for condition in desired["conditions"]:
        existing = current_conditions.get(condition["type"])
        if existing is not None and _comparable(existing) == _comparable(condition):
            conditions.append(dict(existing))
            continue
        changed = True
        stamp = rfc3339(now)
        transition = (existing.get("lastTransitionTime") if existing is not None
                      and existing.get("status") == condition["status"] else stamp)
        conditions.append({**condition, "lastHeartbeatTime": stamp,
                           "lastTransitionTime": transition})
    status = {**desired, "conditions": conditions}
    for key in RESOURCE_LISTS:
        if key in desired:
            status[key] = _with_withdrawn_zeroed(current_status.get(key) or {}, desired[key])
    for key, value in status.items():
        if key != "conditions" and current_status.get(key) != value:
            changed = True
    return status if changed else None


RESOURCE_LISTS = ("capacity", "allocatable")


def _with_withdrawn_zeroed(current: Mapping[str, Any], desired: Mapping[str, Any]
                           ) -> dict[str, Any]:
    """`desired`, and "0" for what the node has that `desired` no longer lists: a status patch
    (a strategic merge) leaves a map's keys it does not name, so a resource the provider stopped
    lending would stay advertised; the kubelet zeroes an extended resource whose device plugin
    went, and so does the agent."""
    return {**{resource: "0" for resource in current if resource not in desired}, **desired}
