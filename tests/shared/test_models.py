"""The API models: Kubernetes names on the wire, defaults, enums, and unknown fields kept.

Defaults of each kind are golden cases in tests/shared/golden/api/.
"""

import datetime
from typing import Any

import pytest
from pydantic import ValidationError

from shared.api.meta import ConditionStatus, ObjectMeta
from shared.api.namespace_map import MappingPhase, NamespaceMap
from shared.api.namespace_offloading import (
    NAMESPACE_OFFLOADING_NAME,
    NamespaceOffloading,
    OffloadingPhase,
)
from shared.api.quota import LimitsEnforcement, Quota
from shared.api.registry import MODELS_BY_KIND, RESOURCE_MODELS
from shared.api.resource import Scope
from shared.api.resource_offer import ResourceOffer
from shared.api.shadowpod import PodPhase, ShadowPod
from shared.api.virtual_node import TaintEffect, VirtualNode, VirtualNodeSpec

# Group/version, plural and short names of every kind.
EXPECTED_NAMES = {
    "ShadowPod": ("offloading.liqo.io/v1beta1", "shadowpods", ("shp",)),
    "NamespaceOffloading": ("offloading.liqo.io/v1beta1", "namespaceoffloadings", ("nsof",)),
    "NamespaceMap": ("virtualkubelet.liqo.io/v1beta1", "namespacemaps", ("nm",)),
    "ResourceOffer": ("sharing.liqo.io/v1alpha1", "resourceoffers", ("ro",)),
    "Quota": ("offloading.liqo.io/v1beta1", "quotas", ()),
    "VirtualNode": ("offloading.liqo.io/v1beta1", "virtualnodes", ("vn",)),
    "ForeignCluster": ("discovery.liqo.io/v1alpha1", "foreignclusters", ("fc",)),
}
CLUSTER_SCOPED = {"ForeignCluster"}  # one per provider, named after its id, as in Liqo


@pytest.mark.parametrize("kind", sorted(EXPECTED_NAMES))
def test_each_kind_is_registered_with_the_names_of_the_design(kind: str) -> None:
    definition = MODELS_BY_KIND[kind].definition
    api_version, plural, short_names = EXPECTED_NAMES[kind]
    assert definition.api_version == api_version
    assert definition.plural == plural
    assert definition.singular == kind.lower()
    assert definition.short_names == short_names
    assert definition.scope is (
        Scope.CLUSTER if kind in CLUSTER_SCOPED else Scope.NAMESPACED)
    assert definition.categories == ("liqo",)


def test_the_registry_lists_exactly_the_kinds_of_the_design() -> None:
    assert {model.definition.kind for model in RESOURCE_MODELS} == set(EXPECTED_NAMES)


def test_fields_are_camel_case_on_the_wire_and_either_spelling_is_accepted() -> None:
    by_wire = VirtualNodeSpec.model_validate(
        {"clusterId": "remote", "createNode": False, "kubeconfigSecretRef": {"name": "kc"}}
    )
    by_python = VirtualNodeSpec(
        cluster_id="remote", create_node=False, kubeconfig_secret_ref={"name": "kc"}
    )
    assert by_wire == by_python
    wire = by_wire.to_wire()
    assert wire["clusterId"] == "remote"
    assert wire["createNode"] is False
    assert wire["kubeconfigSecretRef"] == {"name": "kc"}
    assert "offloadingPatch" in wire and "cluster_id" not in wire


def test_a_shadowpod_keeps_the_whole_pod_spec_and_status_it_is_given() -> None:
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}],
        "someFutureField": {"nested": [1, 2]},
    }
    pod_status = {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": []}
    shadowpod = ShadowPod.model_validate(
        {
            "metadata": {"name": "web"},
            "spec": {"pod": pod_spec},
            "status": {"phase": "Running", "nodeName": "worker-1", "podStatus": pod_status},
        }
    )
    wire = shadowpod.to_wire()
    assert wire["spec"]["pod"] == pod_spec
    assert wire["status"] == {
        "phase": "Running",
        "nodeName": "worker-1",
        "podStatus": pod_status,
        "recreations": 0,
    }


def test_unknown_fields_survive_a_read_modify_write() -> None:
    raw = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "Quota",
        "metadata": {"name": "home", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"consumerClusterId": "home", "addedByANewerAnnex": True},
        "status": {"used": {"cpu": "1"}, "lastSeen": "yesterday"},
    }
    quota = Quota.model_validate(raw)
    quota.spec.cordoned = True
    wire = quota.to_wire()
    assert wire["metadata"]["managedFields"] == [{"manager": "kubectl"}]
    assert wire["spec"]["addedByANewerAnnex"] is True
    assert wire["spec"]["cordoned"] is True
    assert wire["status"]["lastSeen"] == "yesterday"


@pytest.mark.parametrize(
    ("model", "raw", "field"),
    [
        (ShadowPod, {"spec": {"pod": {}}, "status": {"phase": "Sleeping"}}, "phase"),
        (
            NamespaceOffloading,
            {"spec": {"namespaceMappingStrategy": "AnyName"}},
            "namespaceMapping",
        ),
        (NamespaceOffloading, {"status": {"offloadingPhase": "Done"}}, "offloadingPhase"),
        (
            NamespaceMap,
            {"status": {"currentMapping": {"a": {"remoteNamespace": "b", "phase": "Ok"}}}},
            "phase",
        ),
        (Quota, {"spec": {"consumerClusterId": "c", "limitsEnforcement": "hard"}}, "limits"),
        (
            VirtualNode,
            {"spec": {"clusterId": "r", "taints": [{"key": "k", "effect": "NoRun"}]}},
            "effect",
        ),
        (
            VirtualNode,
            {
                "status": {"conditions": [{"type": "Ready", "status": "Yes"}]},
                "spec": {"clusterId": "r"},
            },
            "status",
        ),
    ],
)
def test_enum_fields_refuse_values_outside_the_enum(
    model: type[Any], raw: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError, match=field):
        model.model_validate(raw)


def test_enum_values_are_the_strings_kubernetes_users_write() -> None:
    assert [p.value for p in PodPhase] == ["Pending", "Running", "Succeeded", "Failed", "Unknown"]
    assert [p.value for p in OffloadingPhase] == [
        "Ready",
        "NoClusterSelected",
        "InProgress",
        "SomeFailed",
        "AllFailed",
        "Terminating",
    ]
    assert [p.value for p in MappingPhase] == ["Accepted", "CreationLoopBackOff", "Terminating"]
    assert [e.value for e in LimitsEnforcement] == ["None", "Soft", "Hard"]
    assert [e.value for e in TaintEffect] == ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def test_an_object_of_another_kind_or_version_is_refused() -> None:
    with pytest.raises(ValidationError, match="expected apiVersion 'offloading.liqo.io/v1beta1'"):
        Quota.model_validate(
            {
                "apiVersion": "offloading.liqo.io/v1alpha1",
                "kind": "Quota",
                "spec": {"consumerClusterId": "home"},
            }
        )
    with pytest.raises(ValidationError, match="kind 'ShadowPod'"):
        ShadowPod.model_validate({"kind": "Pod", "spec": {"pod": {}}})


def test_quantities_accept_integers_and_keep_strings() -> None:
    offer = ResourceOffer.model_validate(
        {
            "spec": {
                "clusterId": "r",
                "consumerClusterId": "h",
                "resources": {"cpu": 2, "memory": "1.5Gi", "nvidia.com/gpu": "1"},
            }
        }
    )
    assert offer.spec.resources == {"cpu": "2", "memory": "1.5Gi", "nvidia.com/gpu": "1"}


@pytest.mark.parametrize("bad", ["two", "1.5 Gi", "", "1GB", True])
def test_quantities_refuse_what_the_apiserver_refuses(bad: object) -> None:
    with pytest.raises(ValidationError, match="resources"):
        Quota.model_validate({"spec": {"consumerClusterId": "h", "resources": {"cpu": bad}}})


def test_timestamps_must_carry_a_timezone() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        ObjectMeta.model_validate({"creationTimestamp": datetime.datetime(2024, 1, 1)})
    meta = ObjectMeta.model_validate({"creationTimestamp": "2024-05-01T10:00:00Z"})
    assert meta.creation_timestamp == datetime.datetime(2024, 5, 1, 10, tzinfo=datetime.UTC)
    assert meta.to_wire() == {"creationTimestamp": "2024-05-01T10:00:00Z"}


def test_the_virtual_node_is_named_after_the_remote_cluster_unless_named_explicitly() -> None:
    assert VirtualNodeSpec(cluster_id="remote-1").effective_node_name() == "liqo-remote-1"
    named = VirtualNodeSpec(cluster_id="remote-1", node_name="edge")
    assert named.effective_node_name() == "edge"


def test_namespace_offloading_conditions_are_kept_per_remote_cluster() -> None:
    offloading = NamespaceOffloading.model_validate(
        {
            "metadata": {"name": NAMESPACE_OFFLOADING_NAME},
            "status": {
                "offloadingPhase": "Ready",
                "remoteNamespacesConditions": {
                    "remote-1": [
                        {
                            "type": "NamespaceReady",
                            "status": "True",
                            "lastTransitionTime": "2024-01-01T00:00:00Z",
                        }
                    ]
                },
            },
        }
    )
    (condition,) = offloading.status.remote_namespaces_conditions["remote-1"]
    assert condition.status is ConditionStatus.TRUE
    assert NAMESPACE_OFFLOADING_NAME == "offloading"
