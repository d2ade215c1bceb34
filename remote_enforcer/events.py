"""Warning Events on the enforcer's objects (a ShadowPod's Events reach the home pod through the
home agent's event reflection). Each distinct warning is posted once per object and process."""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from annex.kubeapi import ApiError, ClusterApi, core_path

log = logging.getLogger(__name__)
COMPONENT = "annex-remote-enforcer"


class EventRecorder:
    def __init__(self, api: ClusterApi) -> None:
        self.api = api
        self._posted: set[tuple[str, str, str]] = set()

    async def warn(self, obj: dict[str, Any], reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("uid", "")), reason, message)
        if key in self._posted:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = meta.get("namespace", "")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{secrets.token_hex(8)}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": namespace,
                               "uid": meta.get("uid")},
            "reason": reason, "message": message, "type": "Warning", "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        }
        try:
            await self.api.create(core_path("events", namespace), event)
            self._posted.add(key)
        except ApiError as error:  # an Event is best effort: the log line stays
            log.warning("cannot post event %s on %s/%s: %s", reason, namespace,
                        meta.get("name"), error)
