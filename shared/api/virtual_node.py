"""VirtualNode: configures the home agent for one remote cluster (applied live)."""

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
        PrinterColumn("Phase", "string", ".status.phase"),
        PrinterColumn("Node", "string", ".status.nodeName"),
        PrinterColumn("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        PrinterColumn("Agents", "string", ".status.agent.ready",
                      "Agent replicas ready / wanted"),
        AGE_COLUMN,
    ),
)

READY_CONDITION = "Ready"
FINALIZER = f"virtualnode-controller.{OFFLOADING_GROUP}/finalizer"
"""The home controller's: a VirtualNode being deleted waits for its virtual node's drain."""


class VirtualNodePhase(StrEnum):
    """What the home controller is doing with the VirtualNode's agent."""

    CREATING = "Creating"
    """The agent's objects are made, its replicas not ready yet."""
    RUNNING = "Running"
    DRAINING = "Draining"
    """Deleted: the virtual node is cordoned and drained before the agent goes."""
    REFUSED = "Refused"
    """An object the agent needs has a name taken by someone else (an Event says which)."""


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
    """Defaults to `liqo-<clusterId>`: see `effective_node_name`. A provider whose offer declares
    pools is one node per pool, `<nodeName>-<pool>`."""
    labels: dict[str, str] = Field(default={})
    taints: list[Taint] = Field(default=[])
    resources: ResourceList | None = None
    """Overrides the capacity the ResourceOffer announces."""
    offloading_patch: OffloadingPatch = Field(default={}, validate_default=True)
    kubeconfig_secret_ref: LocalObjectReference | None = None
    tenant_namespace: str | None = None
    """The agent's tenant namespace on the provider (default `annex-tenant-<home cluster id>`).
    This and the CIDRs below are the agent's command line: the home controller rolls the agent
    when they change."""
    remote_pod_cidr: str | None = None
    """The provider's pod CIDR, with `remappedPodCidr`: where it is reachable from home."""
    remapped_pod_cidr: str | None = None
    remapped_home_pod_cidr: str | None = None
    """Where this provider reaches the home pod CIDR (the home chart's homePodCidr)."""
    delete_remote_claims: bool = False
    """Whether deleting this VirtualNode may delete the claims the twin namespaces of its
    offloaded namespaces hold on the provider (as each NamespaceOffloading's
    `spec.deleteRemoteClaims` does for its own). False: the drain waits while they hold claims,
    and `status.retainedRemoteClaims` names them."""
    not_ready_toleration_seconds: int | None = Field(default=None, ge=0)
    """How long pods of offloaded namespaces stay bound to this virtual node while it is
    not-ready or unreachable (the pod webhook's NoExecute tolerations of those taints). Unset:
    for the whole cut, so remote pods are never replaced because the link is down; a value
    restores Kubernetes' eviction after that many seconds. Applies to pods created afterwards."""

    def effective_node_name(self) -> str:
        return self.node_name or f"{VIRTUAL_NODE_NAME_PREFIX}{self.cluster_id}"


class AgentStatus(ApiModel):
    """The agent Deployment as the home controller sees it."""

    deployment: str | None = None
    ready: str | None = None
    """Ready replicas / wanted, e.g. "2/2"."""


class VirtualNodeStatus(ApiModel):
    phase: VirtualNodePhase | None = None
    """Written by the home controller (the agent writes the node, conditions, health check)."""
    agent: AgentStatus | None = None
    node_name: str | None = None
    """The agent's node name (its pools' nodes are `<nodeName>-<pool>`)."""
    conditions: list[Condition] = Field(default=[])
    last_health_check: AwareDatetime | None = None
    observed_generation: int | None = None
    retained_remote_claims: list[str] = Field(default=[])
    """While the VirtualNode is deleted: the provider's claims (`<home namespace>/<claim>`) its
    drain waits for (written by the home controller)."""


class VirtualNode(CustomResource):
    definition: ClassVar[ResourceDefinition] = VIRTUAL_NODE

    api_version: str = VIRTUAL_NODE.api_version
    kind: str = VIRTUAL_NODE.kind
    spec: VirtualNodeSpec
    status: VirtualNodeStatus = Field(default_factory=VirtualNodeStatus)
