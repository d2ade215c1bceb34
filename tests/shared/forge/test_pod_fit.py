"""shared.forge.pod_fit: a pod no provider node can run is given back to its controller only when
its replacement will be kept off the node, else held saying why."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.forge.pod_fit import misfit, return_time

NODE = "liqo-remote"
SHORT = ["cpu 3 > 1500m"]
REPLICA_SET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c", "uid": "rs-1",
               "controller": True}
RETURNED = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def pod(created: str = "2026-01-01T11:59:59Z", owners: list[dict[str, Any]] | None = None,
        volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "web-5d9c-x2", "namespace": "shop", "creationTimestamp": created,
                         "ownerReferences": [REPLICA_SET] if owners is None else owners},
            "spec": {"containers": [{"name": "app"}], "volumes": volumes or []}}


def test_a_controlled_pod_is_returned_when_the_webhook_keeps_its_replacement_off() -> None:
    verdict = misfit(pod(), NODE, SHORT, webhook_serves=True, returned_since=None)
    assert verdict.returned
    assert verdict.message == (
        "no node of liqo-remote's cluster has room for this pod (cpu 3 > 1500m: requested > "
        "what one pod can get there): returned to the scheduler (deleted), its ReplicaSet "
        "web-5d9c makes another, which the pod webhook keeps off liqo-remote")


def test_a_sibling_made_before_the_first_return_is_returned_too() -> None:
    assert misfit(pod("2026-01-01T11:59:59Z"), NODE, SHORT, webhook_serves=True,
                  returned_since=RETURNED).returned


def test_a_pod_made_after_a_return_and_bound_here_again_is_held_not_looped() -> None:
    for created in ("2026-01-01T12:00:00Z", "2026-01-01T12:00:05Z"):
        verdict = misfit(pod(created), NODE, SHORT, webhook_serves=True, returned_since=RETURNED)
        assert not verdict.returned
        assert "ReplicaSet web-5d9c had a pod given back at 2026-01-01T12:00:00Z" in (
            verdict.message)
        assert "is the webhook configured for this namespace?" in verdict.message


def test_held_the_bare_pod_the_claim_holder_and_without_the_webhook() -> None:
    cases = {
        "it has no controller to make it again": (pod(owners=[]), True),
        "it mounts claims": (pod(volumes=[{"name": "d", "persistentVolumeClaim": {
            "claimName": "data"}}]), True),
        "without the agent's pod webhook nothing would keep its replacement off": (pod(), False),
    }
    for why, (held, webhook) in cases.items():
        verdict = misfit(held, NODE, SHORT, webhook_serves=webhook, returned_since=None)
        assert not verdict.returned
        assert why in verdict.message
        assert verdict.message.startswith("no node of liqo-remote's cluster has room for this "
                                          "pod (cpu 3 > 1500m")
        assert verdict.message.endswith("delete it to place it elsewhere")


def test_the_return_time_is_the_servers_deletion_less_the_grace_period() -> None:
    fallback = datetime(2000, 1, 1, tzinfo=UTC)
    answer = {"metadata": {"deletionTimestamp": "2026-01-01T12:00:30Z",
                           "deletionGracePeriodSeconds": 30}}
    assert return_time(answer, fallback) == RETURNED
    assert return_time({"kind": "Status"}, fallback) == fallback
    assert return_time(None, fallback) == fallback
