"""The resource quota controller (kube-controller-manager's resourcequota,
pkg/controller/resourcequota) as far as kubesim counts: each ResourceQuota's status says what
it limits (`hard`, its spec's) and what the namespace's objects take of it (`used`, for the
resources kubesim's quota admission counts, counted the same way), written when the quota is
made or changed and again every `resync` seconds (--resource-quota-sync-period; kubesim
counts at each admission and does not read the status, so it need not be fresher)."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import Controller, WorkQueue, kind_of, run_together, watch_forever
from kubesim.errors import StatusError
from kubesim.quota import counted_kind, format_quantity, used_in
from kubesim.store import Stored

QuotaKey = tuple[str, str]


def quota_status(api: ApiServer, quota: dict[str, Any]) -> dict[str, Any]:
    """`hard` as the spec says, `used` of each hard resource kubesim counts."""
    namespace = quota["metadata"].get("namespace", "")
    hard: dict[str, Any] = dict((quota.get("spec") or {}).get("hard") or {})
    counted: dict[tuple[str, str], dict[str, Decimal]] = {}
    used = {}
    for name, limit in hard.items():
        kind = counted_kind(name)
        if kind is None:
            continue
        if kind not in counted:
            counted[kind] = used_in(api.store, *kind, namespace)
        used[name] = format_quantity(counted[kind].get(name, Decimal(0)),
                                     str(limit).endswith("i"))
    return {"hard": hard, "used": used}


class ResourceQuotaController(Controller):
    name = "resourcequota"

    def __init__(self, api: ApiServer, resync: float = 10.0) -> None:
        super().__init__(api)
        self.kind = kind_of(api, "", "v1", "resourcequotas")
        self.resync = resync
        self.queue = WorkQueue(self._reconcile, self.name)

    def _on_quota(self, event_type: str, stored: Stored) -> None:
        if event_type != "DELETED":
            self.queue.add((stored.namespace, stored.name))

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.resync)
            for stored in self.api.store.list(self.kind.storage_key):
                self.queue.add((stored.namespace, stored.name))

    async def _reconcile(self, key: QuotaKey) -> None:
        stored = self.api.store.get(self.kind.storage_key, *key)
        if stored is None:
            return
        status = quota_status(self.api, stored.obj)
        if status == stored.obj.get("status"):
            return
        new = copy_json(stored.obj)
        new["status"] = status
        try:
            await self.api.update(self.kind, *key, new, subresource="status")
        except StatusError as error:
            if error.code == 409:  # changed meanwhile: its event queues it again
                return
            if error.code != 404:
                raise

    async def run(self) -> None:
        await run_together(watch_forever(self.api, self.kind, self._on_quota), self._resync(),
                           self.queue.run())
