"""shared.forge.node_status: the virtual Node's status, written only when it changes, never
telling what the agent cannot know yet, and never leaving advertised what is no longer lent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.forge.node_status import Health, node_status, node_status_patch, status_as_known

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_node_status_is_written_only_when_it_changes_and_keeps_transition_times() -> None:
    ready = node_status({"cpu": "2"}, Health(True, ""), "r", "1.2.3.4", "liqo-r", 10250)
    first = node_status_patch({}, ready, NOW)
    assert first is not None
    assert node_status_patch(first, ready, NOW + timedelta(minutes=5)) is None
    grown = node_status({"cpu": "4"}, Health(True, ""), "r", "1.2.3.4", "liqo-r", 10250)
    second = node_status_patch(first, grown, NOW + timedelta(minutes=5))
    assert second is not None
    assert second["conditions"] == first["conditions"]  # capacity changed, readiness did not
    down = node_status({"cpu": "4"}, Health(False, "refused"), "r", "1.2.3.4", "liqo-r", 10250)
    third = node_status_patch(second, down, NOW + timedelta(minutes=6))
    assert third is not None
    [condition] = [c for c in third["conditions"] if c["type"] == "Ready"]
    assert (condition["status"], condition["reason"]) == ("False", "RemoteClusterUnreachable")
    assert "remote cluster r" in condition["message"]
    assert condition["lastTransitionTime"] == "2026-01-01T00:06:00Z"


def _written(status: dict[str, Any]) -> dict[str, Any]:
    written = node_status_patch({}, status, NOW)
    assert written is not None
    return written


PLATFORM = {"architecture": "arm64", "kubeletVersion": "v1.30.2"}


@pytest.mark.parametrize("offer_known", [True, False])
def test_a_restarted_agent_writes_nothing_over_a_node_that_says_it_all(offer_known: bool) -> None:
    """Not checked yet, and perhaps the remote side not listed yet either: what the agent cannot
    tell stays as the node says it."""
    node = _written(node_status({"cpu": "2"}, Health(True, ""), "r", "1.2.3.4", "liqo-r", 10250,
                                PLATFORM))
    capacity, platform = ({"cpu": "2"}, PLATFORM) if offer_known else ({}, None)
    desired = node_status(capacity, Health(None, ""), "r", "1.2.3.4", "liqo-r", 10250, platform)
    known = status_as_known(desired, node, Health(None, ""), offer_known)
    assert node_status_patch(node, known, NOW + timedelta(minutes=1)) is None


def test_an_unreachable_remote_is_told_before_the_offer_is_listed() -> None:
    node = _written(node_status({"cpu": "2"}, Health(True, ""), "r", "1.2.3.4", "liqo-r", 10250,
                                PLATFORM))
    desired = node_status({}, Health(False, "refused"), "r", "1.2.3.4", "liqo-r", 10250)
    known = status_as_known(desired, node, Health(False, "refused"), offer_known=False)
    written = node_status_patch(node, known, NOW + timedelta(minutes=1))
    assert written is not None
    assert (written["capacity"], written["nodeInfo"]) == (node["capacity"], node["nodeInfo"])
    [ready] = [c for c in written["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "RemoteClusterUnreachable")


def test_the_node_advertises_only_the_agent_address_and_its_kubelet_port() -> None:
    status = node_status({}, Health(True, ""), "r", "10.1.2.3", "liqo-r", 10443)
    # No Hostname: kube-apiserver prefers it by default and nothing resolves a virtual node.
    assert status["addresses"] == [{"type": "InternalIP", "address": "10.1.2.3"}]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10443}}


def test_a_resource_the_offer_no_longer_lends_is_zeroed_once_not_left_advertised() -> None:
    health = Health(True, "")
    with_gpus = _written(node_status({"cpu": "4", "nvidia.com/gpu": "2"}, health, "r",
                                     "1.2.3.4", "liqo-r", 10250))
    without = node_status({"cpu": "4"}, health, "r", "1.2.3.4", "liqo-r", 10250)
    zeroed = node_status_patch(with_gpus, without, NOW)
    assert zeroed is not None
    assert zeroed["capacity"] == zeroed["allocatable"] == {"cpu": "4", "nvidia.com/gpu": "0"}
    assert node_status_patch(zeroed, without, NOW) is None  # written once
    nothing = node_status({}, health, "r", "1.2.3.4", "liqo-r", 10250)
    emptied = node_status_patch(zeroed, nothing, NOW)
    assert emptied is not None and emptied["capacity"] == {"cpu": "0", "nvidia.com/gpu": "0"}
    assert node_status_patch(emptied, nothing, NOW) is None
