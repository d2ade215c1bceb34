"""Quota.status.used, from the usage ledger: `kubectl get quota -o yaml` shows what each
consumer's ShadowPods take. Written after the ledger changes (debounced), only when it differs."""

from __future__ import annotations

import asyncio
import logging

from annex.kubeapi import ApiError, ClusterApi, custom_path
from annex.mirror import Mirror
from remote_enforcer.ledger import UsageLedger
from shared.api.quota import QUOTA
from shared.quota import used_for

log = logging.getLogger(__name__)


async def write_quota_status(api: ClusterApi, ledger: UsageLedger, quotas: Mirror,
                             debounce: float) -> None:
    """`quotas`: the watch's cache of Quotas (a status just written and not yet seen there is
    written again, unchanged: the API server makes that a no-op)."""
    while True:
        await ledger.changed.wait()
        await asyncio.sleep(debounce)
        ledger.changed.clear()
        try:
            for quota in quotas.values():
                spec, meta = quota.get("spec") or {}, quota["metadata"]
                used = used_for(spec, ledger.usage(spec.get("consumerClusterId", "")))
                if ((quota.get("status") or {}).get("used") or {}) != used:
                    await api.patch(custom_path(QUOTA, meta["namespace"], meta["name"], "status"),
                                    {"status": {"used": used}})
        except (ApiError, OSError) as error:  # retried on the next change
            log.warning("cannot update quota usage: %s", error)
            ledger.changed.set()
