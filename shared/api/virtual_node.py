"""VirtualNode: configures the home agent for one remote cluster (applied live, seed 004)."""

from enum import StrEnum
from typing import ClassVar

from pydantic import AwareDatetime, Field

from shared.api.base import ApiModel
from shared.api.meta import Condition, LocalObjectReference, ResourceList
from shared.api.offloading_patch import OffloadingPatch
from shared.api.resource import AGE_COLUMN, CustomResource, PrinterColumn, ResourceDefinition
from shared.wellknown import OFFLOADING_GROUP, OFFLOADING_VERSION, VIRTUAL_NODE_NAME_PREFIX

VIRTUAL_NODE = ResourceDefinition(
    group=OFFLOADING_GROUP,
    version=OFFLOADING_VERSION,
    kind="VirtualNode",
    plural="virtualnodes",
    singular="virtualnode",
    short_names=("vn",),
    printer_columns=(
        PrinterColumn("Cluster", "string", ".spec.clusterId"),
        PrinterColumn("Node", "string", ".status.nodeName"),
        PrinterColumn("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        AGE_COLUMN,
    ),
)

READY_CONDITION = "Ready"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Taint(ApiModel):
    """A core/v1 Taint for the virtual node."""

    key: str
    value: str | None = None
    effect: TaintEffect


class VirtualNodeSpec(ApiModel):
    cluster_id: str
    """The remote cluster's id."""
    create_node: bool = True
    node_name: str | None = None
    """Defaults to `liqo-<clusterId>`: see `effective_node_name`."""
    labels: dict[str, str] = Field(default={})
    taints: list[Taint] = Field(default=[])
    resources: ResourceList | None = None
    """Overrides the capacity the ResourceOffer announces."""
    offloading_patch: OffloadingPatch = Field(default={}, validate_default=True)
    kubeconfig_secret_ref: LocalObjectReference | None = None
    not_ready_toleration_seconds: int | None = Field(default=None, ge=0)
    """How long pods of offloaded namespaces stay bound to this virtual node while it is
    not-ready or unreachable (the pod webhook's NoExecute tolerations of those taints). Unset:
    for the whole cut, so remote pods are never replaced because the link is down; a value
    restores Kubernetes' eviction after that many seconds. Applies to pods created afterwards."""

    def effective_node_name(self) -> str:
        return self.node_name or f"{VIRTUAL_NODE_NAME_PREFIX}{self.cluster_id}"


class VirtualNodeStatus(ApiModel):
    node_name: str | None = None
    conditions: list[Condition] = Field(default=[])
    last_health_check: AwareDatetime | None = None
    observed_generation: int | None = None


class VirtualNode(CustomResource):
    definition: ClassVar[ResourceDefinition] = VIRTUAL_NODE

    api_version: str = VIRTUAL_NODE.api_version
    kind: str = VIRTUAL_NODE.kind
    spec: VirtualNodeSpec
    status: VirtualNodeStatus = Field(default_factory=VirtualNodeStatus)
