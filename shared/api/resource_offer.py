"""ResourceOffer: what a provider lends one consumer, published in its tenant namespace.

The provider writes it and the consumer takes it as it is: there is no negotiation, so the offer
has no status (Liqo's Pending/Accepted/Refused phases would always read Accepted)."""

from typing import ClassVar

from pydantic import Field

from shared.api.base import ApiModel
from shared.api.meta import ResourceList
from shared.api.resource import AGE_COLUMN, CustomResource, PrinterColumn, ResourceDefinition
from shared.wellknown import SHARING_GROUP, SHARING_VERSION

RESOURCE_OFFER = ResourceDefinition(
    group=SHARING_GROUP,
    version=SHARING_VERSION,
    kind="ResourceOffer",
    plural="resourceoffers",
    singular="resourceoffer",
    short_names=("ro",),
    printer_columns=(
        PrinterColumn("Provider", "string", ".spec.clusterId"),
        PrinterColumn("Consumer", "string", ".spec.consumerClusterId"),
        PrinterColumn("Arch", "string", ".spec.architecture"),
        AGE_COLUMN,
    ),
)


class ClassOffer(ApiModel):
    """A storage or ingress class the provider offers, and whether it is its default one."""

    name: str
    default: bool = False


class PoolOffer(ApiModel):
    """One pool of the provider's nodes (`--offer-pool`), offered on its own: the nodes whose
    labels hold every pair of `nodeSelector`. A ShadowPod naming it (`spec.pool`) runs there
    only."""

    name: str
    node_selector: dict[str, str] = Field(default={})
    resources: ResourceList = Field(default={})
    """What the pool's nodes lend, counted as the offer's `resources`."""
    max_pod_resources: ResourceList = Field(default={})
    """What one pod can get on the pool's nodes, as the offer's `maxPodResources`."""
    labels: dict[str, str] = Field(default={})
    """The offer's labels and the pool's node selector: its virtual node's labels."""
    architecture: str | None = None
    kubelet_version: str | None = None


class ResourceOfferSpec(ApiModel):
    cluster_id: str
    """The provider's cluster id."""
    consumer_cluster_id: str
    resources: ResourceList = Field(default={})
    """What the consumer may use in all: cpu, memory, pods, ephemeral-storage, and the extended
    resources and huge pages the provider lends (only those it lists, only where nodes have
    them)."""
    max_pod_resources: ResourceList = Field(default={})
    """What one pod can get: per resource of `resources` (but pods), the most one schedulable
    node has free, never above `resources`. A pod asking more stays Pending on the provider
    whatever the total; the virtual node tells it (annotation
    `offloading.liqo.io/max-pod-resources`)."""
    labels: dict[str, str] = Field(default={})
    """Labels for the consumer's virtual node (region, provider, ...)."""
    storage_classes: list[ClassOffer] = Field(default=[])
    ingress_classes: list[ClassOffer] = Field(default=[])
    architecture: str | None = None
    """The most common CPU architecture among the provider's schedulable nodes (amd64, arm64,
    ...): the virtual node's `kubernetes.io/arch`. Unset until a node reports one."""
    kubelet_version: str | None = None
    """The oldest kubelet version among those nodes: what every remote node offers at least, the
    virtual node's nodeInfo.kubeletVersion."""
    pools: list[PoolOffer] = Field(default=[])
    """The provider's pools, each offered on its own. Empty: the provider is one pool. Declared:
    only the pools' nodes are lent, and the fields above count those."""


class ResourceOffer(CustomResource):
    definition: ClassVar[ResourceDefinition] = RESOURCE_OFFER

    api_version: str = RESOURCE_OFFER.api_version
    kind: str = RESOURCE_OFFER.kind
    spec: ResourceOfferSpec
