"""Where an offloaded pod may run on the provider: tolerations, the offloadingPatch and the
anti-affinity presets (through the whole forge: tests/shared/golden/pod)."""

from __future__ import annotations

from typing import Any

from shared.api.offloading_patch import OffloadingPatch
from shared.forge.pod_placement import (
    anti_affinity_labels,
    pod_anti_affinity,
    remote_pod_tolerations,
    remote_runtime_class,
)
from shared.wellknown import VIRTUAL_NODE_TAINT_KEY

VIRTUAL = {"key": VIRTUAL_NODE_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}
GPU = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_the_remote_pod_tolerates_neither_virtual_nodes_nor_home_node_health() -> None:
    patch = OffloadingPatch(tolerations=[VIRTUAL, GPU, {"key": "spot", "operator": "Exists"}])
    assert remote_pod_tolerations({"tolerations": [VIRTUAL, NOT_READY, GPU]}, patch) == [
        GPU, {"key": "spot", "operator": "Exists"}]
    assert remote_pod_tolerations({}, None) == []


def test_anti_affinity_selects_on_the_labels_replicas_share_or_those_listed() -> None:
    labels = {"app": "web", "pod-template-hash": "abc", "tier": "front"}
    assert anti_affinity_labels(labels, None) == ({"app": "web", "tier": "front"}, [])
    assert anti_affinity_labels(labels, "app, ,zone") == (
        {"app": "web"}, ["liqo.io/anti-affinity-labels: the pod has no label 'zone'"])


def pod(preset: str | None, **spec: Any) -> dict[str, Any]:
    annotations = {} if preset is None else {"liqo.io/anti-affinity-preset": preset}
    return {"metadata": {"annotations": annotations}, "spec": spec}


def test_a_preset_becomes_the_remote_pod_anti_affinity() -> None:
    labels = {"app": "web"}
    term = {"topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"app": "web"}}}
    assert pod_anti_affinity(pod("hard"), labels) == (
        {"requiredDuringSchedulingIgnoredDuringExecution": [term]}, [])
    assert pod_anti_affinity(pod("soft"), labels) == (
        {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": term}]}, [])
    own = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    assert pod_anti_affinity(pod("propagate", affinity={"podAntiAffinity": own}), {}) == (own, [])
    assert pod_anti_affinity(pod(None), labels) == (None, [])
    assert pod_anti_affinity(pod("hard"), {}) == (
        None, ["liqo.io/anti-affinity-preset=hard not applied: no pod label to select on"])
    assert pod_anti_affinity(pod("strict"), labels)[1] == [
        "unknown liqo.io/anti-affinity-preset value 'strict' ignored (expected propagate, soft "
        "or hard)"]


def test_the_runtime_class_is_the_pods_annotation_else_the_patchs() -> None:
    annotated = {"metadata": {"annotations": {"liqo.io/remote-runtime-class-name": "gvisor"}}}
    patch = OffloadingPatch(runtime_class_name="kata")
    assert remote_runtime_class(annotated, patch) == "gvisor"
    assert remote_runtime_class({}, patch) == "kata"
    assert remote_runtime_class({}, None) is None
