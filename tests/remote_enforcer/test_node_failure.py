"""The node-failure rules: which Terminating pods of a NotReady node are force-deleted, and
when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from remote_enforcer.node_failure import claims_of, force_delete_in, not_ready_since

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node(status: str | None, since: datetime = NOW) -> dict[str, Any]:
    conditions = [] if status is None else [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": status, "lastTransitionTime": stamp(since)}]
    return {"metadata": {"name": "n", "creationTimestamp": stamp(since - timedelta(hours=1))},
            "status": {"conditions": conditions}}


def pod(terminating: bool = True, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "uid": "u"}
    if terminating:
        metadata["deletionTimestamp"] = stamp(NOW)
    return {"metadata": metadata, "spec": {"nodeName": "n", **spec}}


def test_a_node_is_not_ready_since_its_ready_condition_changed() -> None:
    assert not_ready_since(node("True")) is None
    assert not_ready_since(node("False")) == NOW
    assert not_ready_since(node("Unknown", NOW - timedelta(minutes=5))) == NOW - timedelta(
        minutes=5)
    assert not_ready_since(node(None)) == NOW - timedelta(hours=1)  # never posted: since made


def test_a_terminating_pod_goes_once_its_node_is_not_ready_for_the_grace() -> None:
    assert force_delete_in(pod(), node("Unknown", NOW - timedelta(seconds=20)), NOW, 60) == 40
    assert force_delete_in(pod(), node("False", NOW - timedelta(seconds=90)), NOW, 60) == 0
    assert force_delete_in(pod(), node("Unknown", NOW), NOW, 0) == 0


def test_no_pod_goes_from_a_ready_or_deleted_node_and_none_that_is_not_being_deleted() -> None:
    assert force_delete_in(pod(), node("True"), NOW, 60) is None
    assert force_delete_in(pod(), None, NOW, 60) is None  # the pod garbage collector's
    assert force_delete_in(pod(terminating=False), node("Unknown", NOW - timedelta(hours=1)),
                           NOW, 60) is None


def test_the_claims_a_pod_mounts_hold_it() -> None:
    assert claims_of(pod(volumes=[{"name": "config", "configMap": {"name": "c"}}])) == []
    assert claims_of(pod(volumes=[
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "tmp", "emptyDir": {}}])) == ["data-0", "p-scratch"]
