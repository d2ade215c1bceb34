"""Quota.status.used, from the usage ledger: `kubectl get quota -o yaml` shows what each
consumer's ShadowPods and claims take. A reconcile per Quota (its key), written only when it
differs: a Quota changed (its status rewritten by hand, say) is looked at at once, a change of
its consumer's usage once the debounce passed (one pending look per Quota, however many
ShadowPods come and go meanwhile).

A Quota lending pools (`spec.pools`) the provider does not declare (`--offer-pool`) gets a
Warning Event, UndeclaredPools, and a log line naming it, once for each such list of names:
those names lend nothing."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from annex.api_paths import custom_path
from annex.controller import DONE, Controller, Result
from annex.events import EventRecorder
from annex.informers import Change
from annex.kubeapi import ClusterApi
from annex.mirror import Key, Mirror
from remote_enforcer.ledger import UsageLedger
from shared.api.quota import QUOTA
from shared.pools import Pool, undeclared_pools
from shared.quota import used_for

log = logging.getLogger(__name__)

UNDECLARED_POOLS_REASON = "UndeclaredPools"


class QuotaStatus:
    """Keys: Quotas. Reads the Quotas' mirror and the ledger; fed by the route of Quotas
    (`on_quota`) and the ledger's changes."""

    def __init__(self, api: ClusterApi, ledger: UsageLedger, quotas: Mirror,
                 debounce: float, events: EventRecorder, pools: Sequence[Pool] = ()) -> None:
        self.api = api
        self.events = events
        self.pools = tuple(pools)
        """The provider's pools (`--offer-pool`): what a Quota's `pools` may name."""
        self._undeclared: dict[Key, list[str]] = {}
        """Per Quota, the undeclared pool names it was last warned of."""
        self.ledger = ledger
        self.quotas = quotas
        self.debounce = debounce
        self._scheduled: set[Key] = set()
        """Quotas whose look after the debounce is pending."""
        self._written: dict[Key, tuple[str, dict[str, str]]] = {}
        """Per Quota, the version our last write replaced and what it wrote: until its echo
        comes, the mirror's status is older than ours."""
        self.controller: Controller[Key] = Controller(
            "quota-status", self._reconcile, workers=1,
            synced=lambda: ledger.synced.is_set() and ledger.claims_synced.is_set())
        ledger.on_change = self.on_usage

    def on_quota(self, change: Change) -> None:
        if change.deleted:
            self._written.pop(change.key, None)
            self._undeclared.pop(change.key, None)
        else:
            self.controller.add(change.key)

    def on_usage(self, consumer: str) -> None:
        """The consumer's usage changed: its Quotas are looked at once the debounce passed."""
        for quota in self.quotas.values():
            if (quota.get("spec") or {}).get("consumerClusterId") == consumer:
                key = (str(quota["metadata"]["namespace"]), str(quota["metadata"]["name"]))
                if key not in self._scheduled:
                    self._scheduled.add(key)
                    self.controller.queue.add_after(key, self.debounce)

    async def _reconcile(self, key: Key) -> Result:
        self._scheduled.discard(key)  # a change from now on is looked at again
        quota = self.quotas.get(key)
        if quota is None:
            return DONE
        spec = quota.get("spec") or {}
        await self._warn_of_undeclared_pools(key, quota)
        used = used_for(spec, self.ledger.usage(str(spec.get("consumerClusterId") or "")))
        version = str(quota["metadata"].get("resourceVersion") or "")
        shown = (quota.get("status") or {}).get("used") or {}
        written = self._written.get(key)
        if written is not None and written[0] == version:
            shown = written[1]
        if shown != used:
            await self.api.patch(custom_path(QUOTA, *key, "status"), {"status": {"used": used}})
            self._written[key] = (version, used)
        return DONE

    async def _warn_of_undeclared_pools(self, key: Key, quota: dict[str, Any]) -> None:
        undeclared = undeclared_pools(self.pools, (quota.get("spec") or {}).get("pools"))
        if undeclared == self._undeclared.get(key, []):
            return
        self._undeclared[key] = undeclared
        if undeclared:
            declared = ", ".join(pool.name for pool in self.pools) or "none"
            message = (f"spec.pools names {', '.join(undeclared)}, which this provider does not "
                       f"declare (its pools: {declared}): lent nothing")
            log.warning("Quota %s/%s: %s", *key, message)
            await self.events.record(quota, UNDECLARED_POOLS_REASON, message)
