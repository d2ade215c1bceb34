"""Ephemeral containers on the pods ShadowPods make: what `kubectl debug` adds to a home pod
reaches its ShadowPod (the agent adds it there, the ShadowPod webhook judges it against the
consumer's pod policy as any container), and the enforcer adds it to the pod through the pod's
`ephemeralcontainers` subresource, the only way a running pod takes one. Its status comes back
with the pod's (`ephemeralContainerStatuses`).

The provider's API server has the last word (the twin namespace's Pod Security level judges the
new container too): a refusal is an Event on the pod, which the agent reflects onto the home pod,
and nothing is retried until the ShadowPod changes again (the same container would be refused
again)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from annex.api_errors import ApiError
from annex.api_paths import core_path
from annex.events import EventRecorder
from annex.kubeapi import STRATEGIC_MERGE_PATCH, ClusterApi
from annex.retries import RETRIED_STATUSES

log = logging.getLogger(__name__)

FAILED_REASON = "FailedEphemeralContainer"
SUBRESOURCE = "ephemeralcontainers"


async def add(api: ClusterApi, events: EventRecorder, pod: Mapping[str, Any],
              patch: dict[str, Any]) -> None:
    """Add to `pod` the ephemeral containers of `patch` (`ephemeral_containers_patch`: those its
    ShadowPod lists and it lacks)."""
    metadata = pod["metadata"]
    try:
        await api.patch(core_path("pods", metadata["namespace"], metadata["name"], SUBRESOURCE),
                        patch, STRATEGIC_MERGE_PATCH)
    except ApiError as error:
        if error.status in RETRIED_STATUSES or error.status == 409:
            raise
        message = str(error.body.get("message") or error)
        log.warning("cannot add ephemeral containers to pod %s/%s: %s", metadata["namespace"],
                    metadata["name"], message)
        await events.record(pod, FAILED_REASON, f"cannot add ephemeral containers: {message}")
