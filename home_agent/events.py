"""core/v1 Events the agent reports on home objects, each distinct message once per object."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from annex.kubeapi import ClusterApi, core_path, error_message

log = logging.getLogger(__name__)

COMPONENT = "annex-home-agent"


class EventRecorder:
    """Serves one kind of object: what it reported is remembered by the object's namespace and
    name (with its uid, so a new object of the same name starts afresh), which lets a deletion
    known only by its key, as a relist reveals one, forget it."""

    def __init__(self, api: ClusterApi, instance: str) -> None:
        self._api = api
        self._instance = instance
        self._reported: dict[tuple[str, str], tuple[str, dict[str, str]]] = {}
        """(namespace, name) -> (uid, reason -> the message last reported for it)"""
        self._lock = threading.Lock()

    def _first_time(self, obj: Mapping[str, Any], reason: str, message: str) -> bool:
        metadata = obj.get("metadata") or {}
        key = (str(metadata.get("namespace")), str(metadata.get("name")))
        uid = str(metadata.get("uid"))
        with self._lock:
            reported = self._reported.get(key)
            if reported is None or reported[0] != uid:
                reported = self._reported[key] = (uid, {})
            if reported[1].get(reason) == message:
                return False
            reported[1][reason] = message
            return True

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._reported.pop((namespace, name), None)

    async def record(self, obj: Mapping[str, Any], reason: str, message: str,
                     event_type: str = "Warning") -> None:
        """Post an Event on `obj` unless the same reason and message were reported already."""
        if not self._first_time(obj, reason, message):
            return
        metadata = obj.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "default")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{metadata.get('name')}.{uuid.uuid4().hex[:16]}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion", "v1"),
                               "kind": obj.get("kind", "Pod"), "namespace": namespace,
                               "name": metadata.get("name"), "uid": metadata.get("uid"),
                               "resourceVersion": metadata.get("resourceVersion")},
            "reason": reason, "message": message[:1024], "type": event_type,
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            await self._api.create(core_path("events", namespace), body)
        except Exception as error:  # noqa: BLE001 - an Event is best effort
            log.warning("could not record event %s on %s/%s: %s", reason, namespace,
                        metadata.get("name"), error_message(error))
