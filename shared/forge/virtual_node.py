"""The VirtualNode's status: which node it made and whether the remote cluster is ready.

Its Ready condition says what the Node's does (`shared.forge.node.readiness`); the agent's
`virtual_node.py` writes what `virtual_node_status` computes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from shared.api.virtual_node import READY_CONDITION, VirtualNodeStatus
from shared.forge.node_status import Health, readiness
from shared.rfc3339 import rfc3339


def virtual_node_status(current: VirtualNodeStatus, node_name: str, health: Health,
                        now: datetime) -> dict[str, Any] | None:
    """The status to write (its node, the Ready condition, when it was checked), or None when
    `current` already names the node and says the same readiness: the VirtualNode is no
    heartbeat, nothing is written while nothing changes."""
    ready = next((c for c in current.conditions if c.type == READY_CONDITION), None)
    status, reason = readiness(health)
    if (current.node_name == node_name and ready is not None
            and ready.status == status and ready.reason == reason):
        return None
    stamp = rfc3339(now)
    condition = {"type": READY_CONDITION, "status": status, "reason": reason,
                 "message": health.message or reason, "lastTransitionTime": stamp}
    return {"nodeName": node_name, "conditions": [condition], "lastHealthCheck": stamp}
