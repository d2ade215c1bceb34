"""The home pod status comparison against an API server that does not keep every field written
(status.hostIPs before Kubernetes 1.28): a field the server's answer lacks is left out of every
later comparison, so an unchanged remote status writes nothing."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.forge.pod_status import (
    StatusForgeConfig,
    local_pod_status,
    merged_status,
    remote_creation_failed_condition,
    unkept_status_fields,
    with_condition,
)

CONFIG = StatusForgeConfig(node_ip="10.0.0.9")


def _remote_status() -> dict[str, Any]:
    return {
        "phase": "Running", "podIP": "10.200.0.5", "podIPs": [{"ip": "10.200.0.5"}],
        "hostIP": "10.1.0.7", "hostIPs": [{"ip": "10.1.0.7"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "main", "ready": True, "restartCount": 0, "user": {"linux": {"uid": 0}},
             "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}},
            {"name": "side", "ready": True, "restartCount": 0, "user": {"linux": {"uid": 1}},
             "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}},
        ],
    }


def _as_a_1_24_server_keeps(status: dict[str, Any]) -> dict[str, Any]:
    """What kube-apiserver v1.24 stores of a pod status: no hostIPs, no container `user`."""
    stored = copy.deepcopy(status)
    stored.pop("hostIPs", None)
    for container in stored.get("containerStatuses") or []:
        container.pop("user", None)
    return stored


def test_what_the_answer_lacks_is_not_kept_and_no_longer_differs() -> None:
    wanted = local_pod_status(_remote_status(), {}, CONFIG)
    written = merged_status({"phase": "Pending"}, wanted)
    assert written is not None and written["hostIPs"] == [{"ip": "10.0.0.9"}]
    stored = _as_a_1_24_server_keeps(written)

    # Without what the answer taught, the next comparison differs again: a write per resync.
    assert merged_status(stored, wanted) is not None
    unkept = unkept_status_fields(written, stored)
    assert unkept == {("hostIPs",), ("containerStatuses", "*", "user")}
    assert merged_status(stored, wanted, unkept) is None


def test_a_change_the_server_keeps_is_still_written() -> None:
    wanted = local_pod_status(_remote_status(), {}, CONFIG)
    stored = _as_a_1_24_server_keeps(merged_status({}, wanted) or {})
    unkept = {("hostIPs",), ("containerStatuses", "*", "user")}
    changed = _remote_status()
    changed["containerStatuses"][1]["ready"] = False
    merged = merged_status(stored, local_pod_status(changed, {}, CONFIG), unkept)
    assert merged is not None
    assert merged == {**stored, "containerStatuses": [
        stored["containerStatuses"][0], {**stored["containerStatuses"][1], "ready": False}]}


def test_empty_values_the_answer_omits_are_not_taken_for_unkept_fields() -> None:
    sent = {"phase": "Running", "message": "", "podIPs": [], "hostIPs": [{"ip": "10.0.0.9"}]}
    assert unkept_status_fields(sent, {"phase": "Running", "hostIPs": [{"ip": "10.0.0.9"}]}) == (
        set())


def test_a_server_that_keeps_everything_teaches_nothing() -> None:
    written = merged_status({}, local_pod_status(_remote_status(), {}, CONFIG)) or {}
    assert unkept_status_fields(written, copy.deepcopy(written)) == set()


def test_a_condition_reported_again_over_the_servers_copy_changes_nothing() -> None:
    """kube-apiserver answers a PodCondition sent without lastProbeTime with it null: the same
    refusal reported at the next retry is no new status to write."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    first = with_condition({"phase": "Pending"},
                           remote_creation_failed_condition("Forbidden", "refused", now))
    stored = {**first, "conditions": [{**c, "lastProbeTime": None} for c in first["conditions"]]}
    again = with_condition(stored, remote_creation_failed_condition(
        "Forbidden", "refused", now + timedelta(seconds=30)))
    assert merged_status(stored, again) is None
