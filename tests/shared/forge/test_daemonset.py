"""shared.forge.daemonset: which pods are a DaemonSet's, and what their status says."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.forge.daemonset import (
    DAEMONSET_POD_REASON,
    daemon_set_object,
    daemon_set_of,
    not_offloaded_message,
)
from shared.forge.pod_status import offloading_backoff_status

SET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fluent-bit", "uid": "ds-1",
       "controller": True, "blockOwnerDeletion": True}


def pod(*owners: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "fluent-bit-x7k2p", "namespace": "logging",
                         "ownerReferences": list(owners)},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def test_a_pod_is_a_daemon_sets_when_a_daemon_set_controls_it() -> None:
    assert daemon_set_of(pod(SET)) == SET
    assert daemon_set_of(pod({**SET, "controller": False})) is None  # owned, not controlled
    assert daemon_set_of(pod({**SET, "kind": "ReplicaSet"})) is None
    assert daemon_set_of(pod({**SET, "apiVersion": "example.com/v1"})) is None  # another kind
    assert daemon_set_of(pod()) is None
    assert daemon_set_object(pod(SET), SET) == {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "fluent-bit", "uid": "ds-1", "namespace": "logging"}}


def test_its_status_says_why_it_stays_pending_and_how_to_keep_it_off() -> None:
    message = not_offloaded_message(SET, "liqo-remote")
    assert message == (
        "DaemonSet fluent-bit is not offloaded: liqo-remote is a virtual node standing for a "
        "remote cluster, whose nodes run their own daemons, so its pod stays Pending here. To "
        "keep the DaemonSet off virtual nodes, give its pod template the node affinity "
        "liqo.io/type NotIn [virtual-node], or no toleration of virtual-node.liqo.io/not-allowed")
    now = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    status = offloading_backoff_status(pod(SET), now, message, DAEMONSET_POD_REASON)
    assert (status["phase"], status["reason"], status["message"]) == (
        "Pending", DAEMONSET_POD_REASON, message)
    assert status["conditions"] == [{"type": "PodScheduled", "status": "False",
                                     "reason": DAEMONSET_POD_REASON,
                                     "lastTransitionTime": "2026-01-01T00:01:00Z"}]
