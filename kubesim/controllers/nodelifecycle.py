"""Node lifecycle: a node whose Lease went stale is marked Ready=Unknown and tainted unreachable.

Like kube-controller-manager's node lifecycle controller: it remembers when it last saw each
node's Lease renewed (or its Ready condition change), and after the grace period (default 40 s)
sets every node condition to Unknown ("Kubelet stopped posting node status.") and adds the
`node.kubernetes.io/unreachable` NoSchedule and NoExecute taints. A node that reports Ready=False
gets the `node.kubernetes.io/not-ready` taints instead; a Ready node has neither.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kubesim.apiserver import ApiServer, copy_json, now_timestamp
from kubesim.controllers.base import Controller, kind_of, run_together, watch_forever
from kubesim.errors import StatusError
from kubesim.store import Stored

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
LEASE_NAMESPACE = "kube-node-lease"
_STATE_TAINTS = (UNREACHABLE, NOT_READY)


def ready_status(node: dict[str, Any]) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status", "Unknown"))
    return "Unknown"


def wanted_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's taints with the readiness taints made to match its Ready condition."""
    status = ready_status(node)
    key = {"True": None, "False": NOT_READY}.get(status, UNREACHABLE)
    current = (node.get("spec") or {}).get("taints") or []
    kept = [t for t in current if t.get("key") not in _STATE_TAINTS]
    if key is None:
        return kept
    existing = {(t.get("key"), t.get("effect")): t for t in current}
    no_schedule = existing.get((key, "NoSchedule"), {"key": key, "effect": "NoSchedule"})
    no_execute = existing.get((key, "NoExecute"),
                              {"key": key, "effect": "NoExecute", "timeAdded": now_timestamp()})
    return [*kept, no_schedule, no_execute]


class NodeLifecycle(Controller):
    name = "node-lifecycle"

    def __init__(self, api: ApiServer, grace_period: float = 40.0) -> None:
        super().__init__(api)
        self.grace_period = grace_period
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.leases_kind = kind_of(api, "coordination.k8s.io", "v1", "leases")
        self.nodes: dict[str, dict[str, Any]] = {}
        self.renewals: dict[str, tuple[str, float]] = {}  # node -> (last sign, seen at)
        self.heartbeats: dict[str, str] = {}  # node -> Ready condition's lastHeartbeatTime

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _on_node(self, event_type: str, stored: Stored) -> None:
        if event_type == "DELETED":
            self.nodes.pop(stored.name, None)
            self.renewals.pop(stored.name, None)
            self.heartbeats.pop(stored.name, None)
            return
        self.nodes[stored.name] = stored.obj
        # a changed Ready heartbeat counts as a sign of life, like a renewed Lease
        heartbeat = "status:" + next(
            (str(c.get("lastHeartbeatTime") or "") for c in
             (stored.obj.get("status") or {}).get("conditions") or []
             if c.get("type") == "Ready"), "")
        if self.heartbeats.get(stored.name) != heartbeat:
            self.heartbeats[stored.name] = heartbeat
            if heartbeat != "status:":
                self.renewals[stored.name] = (heartbeat, self._now())
        self.renewals.setdefault(stored.name, ("", self._now()))
        self._wake.set()

    def _on_lease(self, event_type: str, stored: Stored) -> None:
        if event_type == "DELETED":
            return
        renew = str((stored.obj.get("spec") or {}).get("renewTime") or "")
        if self.renewals.get(stored.name, ("",))[0] != renew:
            self.renewals[stored.name] = (renew, self._now())
            self._wake.set()

    async def _mark_unknown(self, node: dict[str, Any]) -> None:
        new = copy_json(node)
        now = now_timestamp()
        for condition in new.setdefault("status", {}).get("conditions") or []:
            if condition.get("status") != "Unknown":
                condition["lastTransitionTime"] = now
            condition.update(status="Unknown", reason="NodeStatusUnknown",
                             message="Kubelet stopped posting node status.")
        if not new["status"].get("conditions"):
            new["status"]["conditions"] = [{
                "type": "Ready", "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                "message": "Kubelet never posted node status.", "lastTransitionTime": now}]
        await self.api.update(self.nodes_kind, "", node["metadata"]["name"], new,
                              subresource="status")

    async def _sync_taints(self, node: dict[str, Any]) -> None:
        taints = wanted_taints(node)
        if taints == ((node.get("spec") or {}).get("taints") or []):
            return
        new = copy_json(node)
        if taints:
            new.setdefault("spec", {})["taints"] = taints
        else:
            new.get("spec", {}).pop("taints", None)
        await self.api.update(self.nodes_kind, "", node["metadata"]["name"], new)

    async def _check(self) -> None:
        now = self._now()
        for name in list(self.nodes):
            stored = self.api.store.get(self.nodes_kind.storage_key, "", name)
            if stored is None:
                continue
            node = stored.obj
            _, seen = self.renewals.get(name, ("", now))
            try:
                if now - seen > self.grace_period and ready_status(node) != "Unknown":
                    await self._mark_unknown(node)
                    continue  # the MODIFIED event brings us back for the taints
                await self._sync_taints(node)
            except StatusError as error:
                if error.code not in (404, 409):
                    raise

    async def run(self) -> None:
        self._wake = asyncio.Event()
        await run_together(
            watch_forever(self.api, self.nodes_kind, self._on_node),
            watch_forever(self.api, self.leases_kind, self._on_lease,
                          namespace=LEASE_NAMESPACE),
            self._monitor(),
        )

    async def _monitor(self) -> None:
        period = max(0.05, min(5.0, self.grace_period / 8))
        while True:
            await self._check()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await self._wake.wait()
            self._wake.clear()
