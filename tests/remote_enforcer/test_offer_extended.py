"""The publisher's offer with lent devices, in both modes, and when a change of what one pod
can get is worth a write (no cluster: the picture is fed as the watches feed it)."""

from __future__ import annotations

from typing import Any

from annex.mirror import Mirror
from remote_enforcer.offer import OfferPublisher
from remote_enforcer.settings import parse
from shared.wellknown import ORIGIN_CLUSTER_LABEL
from tests.remote_enforcer.offer_writes import OfferApi, published


def _publisher(*flags: str) -> OfferPublisher:
    api: Any = OfferApi()
    publisher = OfferPublisher(api, parse(["--cluster-id", "p", *flags]), Mirror())
    for name, gpus in (("gpu-1", "4"), ("plain", None)):
        allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        if gpus:
            allocatable.update({"nvidia.com/gpu": gpus, "example.com/dongle": "2"})
        publisher.nodes.apply("ADDED", {"metadata": {"name": name}, "spec": {}, "status": {
            "allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}})
    return publisher


def _pod(uid: str, node: str, origin: str, **requests: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "labels": {ORIGIN_CLUSTER_LABEL: origin}},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": requests}}]},
            "status": {"phase": "Running"}}


def test_a_share_offer_lends_the_listed_devices_and_tells_what_one_pod_can_get() -> None:
    assert "nvidia.com/gpu" not in _publisher().spec_for("c")["resources"]
    publisher = _publisher("--offer-extended-resources", "nvidia.com/gpu")
    spec = publisher.spec_for("c")
    assert published(publisher) == [("create", spec)]
    assert spec["resources"]["nvidia.com/gpu"] == "2"
    assert "example.com/dongle" not in spec["resources"]
    assert spec["maxPodResources"] == {"cpu": "8", "memory": "32Gi",
                                       "ephemeral-storage": "0", "nvidia.com/gpu": "2"}
    # The consumer's own pod on the GPU node: its offer stays, one pod can get less cpu
    # there but the plain node still has 8.
    publisher.on_pod("ADDED", _pod("u1", "gpu-1", "c", cpu="6", **{"nvidia.com/gpu": "3"}))
    after = publisher.spec_for("c")
    assert after["resources"]["nvidia.com/gpu"] == "2"
    assert after["maxPodResources"]["nvidia.com/gpu"] == "1"
    assert after["maxPodResources"]["cpu"] == "8"
    assert published(publisher) == [("patch", after)]  # what one pod can get moved: rewritten


def test_a_fixed_offer_lends_the_listed_devices_the_nodes_have_unless_it_names_an_amount(
        ) -> None:
    fixed = ("--offer-mode", "fixed", "--offer-resources", "cpu=4,memory=8Gi")
    lent = _publisher(*fixed, "--offer-extended-resources", "nvidia.com/gpu,example.com/*")
    assert lent.resources_for("c") == {"cpu": "4", "memory": "8Gi", "pods": "220",
                                       "nvidia.com/gpu": "4", "example.com/dongle": "2"}
    named = _publisher("--offer-mode", "fixed", "--offer-resources", "cpu=4,nvidia.com/gpu=1",
                       "--offer-extended-resources", "nvidia.com/gpu")
    assert named.resources_for("c")["nvidia.com/gpu"] == "1"
