"""NamespaceOffloading: a user's request to extend one home namespace to remote clusters."""

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final

from pydantic import Field, WithJsonSchema

from shared.api.base import ApiModel
from shared.api.meta import Condition
from shared.api.resource import AGE_COLUMN, CustomResource, PrinterColumn, ResourceDefinition
from shared.wellknown import OFFLOADING_GROUP, OFFLOADING_VERSION

NAMESPACE_OFFLOADING = ResourceDefinition(
    group=OFFLOADING_GROUP,
    version=OFFLOADING_VERSION,
    kind="NamespaceOffloading",
    plural="namespaceoffloadings",
    singular="namespaceoffloading",
    short_names=("nsof",),
    printer_columns=(
        PrinterColumn("NamespaceMappingStrategy", "string", ".spec.namespaceMappingStrategy"),
        PrinterColumn("PodOffloadingStrategy", "string", ".spec.podOffloadingStrategy"),
        PrinterColumn("OffloadingPhase", "string", ".status.offloadingPhase"),
        PrinterColumn("RemoteNamespaceName", "string", ".status.remoteNamespaceName", priority=10),
        AGE_COLUMN,
    ),
)

NAMESPACE_OFFLOADING_NAME: Final = "offloading"
"""The only name a NamespaceOffloading may have (one per namespace)."""


class NamespaceMappingStrategy(StrEnum):
    DEFAULT_NAME = "DefaultName"
    ENFORCE_SAME_NAME = "EnforceSameName"
    SELECTED_NAME = "SelectedName"


class PodOffloadingStrategy(StrEnum):
    LOCAL = "Local"
    REMOTE = "Remote"
    LOCAL_AND_REMOTE = "LocalAndRemote"


class OffloadingPhase(StrEnum):
    READY = "Ready"
    NO_CLUSTER_SELECTED = "NoClusterSelected"
    IN_PROGRESS = "InProgress"
    SOME_FAILED = "SomeFailed"
    ALL_FAILED = "AllFailed"
    TERMINATING = "Terminating"


_NODE_SELECTOR_REQUIREMENTS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["key", "operator"],
        "properties": {
            "key": {"type": "string"},
            "operator": {"type": "string"},
            "values": {"type": "array", "items": {"type": "string"}},
        },
    },
}

# A core/v1 NodeSelector kept as a dict (the forge matches it against virtual-node labels); the
# CRD still describes its shape so the apiserver rejects malformed selectors.
NodeSelector = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "properties": {
                "nodeSelectorTerms": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "matchExpressions": _NODE_SELECTOR_REQUIREMENTS,
                            "matchFields": _NODE_SELECTOR_REQUIREMENTS,
                        },
                    },
                }
            },
        }
    ),
]


class NamespaceOffloadingSpec(ApiModel):
    namespace_mapping_strategy: NamespaceMappingStrategy = NamespaceMappingStrategy.DEFAULT_NAME
    remote_namespace_name: str | None = None
    """The remote name, with the SelectedName strategy."""
    pod_offloading_strategy: PodOffloadingStrategy = PodOffloadingStrategy.LOCAL_AND_REMOTE
    cluster_selector: NodeSelector = Field(default={})
    """Which remote clusters (virtual nodes, by label) to extend to; empty means all of them."""
    delete_remote_claims: bool = False
    """Whether withdrawing the namespace from a remote cluster (this object deleted, the
    cluster no longer selected, its VirtualNode deleted) may delete the claims its twin
    namespace holds there, with their data. False: the withdrawal waits while the twin holds
    claims, and `status.retainedRemoteClaims` names them."""


class NamespaceOffloadingStatus(ApiModel):
    observed_generation: int | None = None
    offloading_phase: OffloadingPhase | None = None
    remote_namespace_name: str | None = None
    remote_namespaces_conditions: dict[str, list[Condition]] = Field(default={})
    """Per remote cluster id, the conditions of its twin namespace."""
    retained_remote_claims: dict[str, list[str]] = Field(default={})
    """Per remote cluster id, the claims a withdrawal keeps there (`spec.deleteRemoteClaims`
    false): the twin namespace stays until they are deleted or deletion is asked for."""


class NamespaceOffloading(CustomResource):
    definition: ClassVar[ResourceDefinition] = NAMESPACE_OFFLOADING

    api_version: str = NAMESPACE_OFFLOADING.api_version
    kind: str = NAMESPACE_OFFLOADING.kind
    spec: NamespaceOffloadingSpec = Field(default_factory=NamespaceOffloadingSpec)
    status: NamespaceOffloadingStatus = Field(default_factory=NamespaceOffloadingStatus)
