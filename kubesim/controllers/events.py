"""Recording core/v1 Events the way the real components' event recorders do."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from kubesim.apiserver import ApiServer, now_timestamp
from kubesim.controllers.base import kind_of
from kubesim.errors import StatusError

log = logging.getLogger("kubesim.controllers")


async def record_event(api: ApiServer, regarding: dict[str, Any], event_type: str,
                       reason: str, message: str, component: str, host: str = "") -> None:
    """Create an Event about `regarding`; failures are logged, never raised (best effort)."""
    metadata = regarding["metadata"]
    namespace = metadata.get("namespace") or "default"
    now = now_timestamp()
    source = {"component": component, **({"host": host} if host else {})}
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        # the recorder names events <object>.<unique hex suffix>
        "metadata": {"name": f"{metadata['name']}.{secrets.token_hex(8)}",
                     "namespace": namespace},
        "involvedObject": {
            "apiVersion": regarding.get("apiVersion", "v1"),
            "kind": regarding.get("kind", ""),
            "name": metadata["name"],
            "namespace": metadata.get("namespace", ""),
            "uid": metadata.get("uid", ""),
            "resourceVersion": metadata.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host,
    }
    try:
        await api.create(kind_of(api, "", "v1", "events"), namespace, event)
    except StatusError as error:  # e.g. the namespace is terminating
        log.debug("event %s on %s not recorded: %s", reason, metadata["name"], error)
