"""ResourceOffer: what a provider lends one consumer, published in its tenant namespace."""

from enum import StrEnum
from typing import ClassVar

from pydantic import AwareDatetime, Field

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
        PrinterColumn("Phase", "string", ".status.phase"),
        AGE_COLUMN,
    ),
)


class OfferPhase(StrEnum):
    """Liqo's offer phases: the consumer accepts or refuses what the provider published."""

    PENDING = "Pending"
    MANUAL_ACTION_REQUIRED = "ManualActionRequired"
    ACCEPTED = "Accepted"
    REFUSED = "Refused"


class ClassOffer(ApiModel):
    """A storage or ingress class the provider offers, and whether it is its default one."""

    name: str
    default: bool = False


class ResourceOfferSpec(ApiModel):
    cluster_id: str
    """The provider's cluster id."""
    consumer_cluster_id: str
    resources: ResourceList = Field(default={})
    labels: dict[str, str] = Field(default={})
    """Labels for the consumer's virtual node (region, provider, ...)."""
    storage_classes: list[ClassOffer] = Field(default=[])
    ingress_classes: list[ClassOffer] = Field(default=[])


class ResourceOfferStatus(ApiModel):
    phase: OfferPhase | None = None
    observed_generation: int | None = None
    last_update_time: AwareDatetime | None = None


class ResourceOffer(CustomResource):
    definition: ClassVar[ResourceDefinition] = RESOURCE_OFFER

    api_version: str = RESOURCE_OFFER.api_version
    kind: str = RESOURCE_OFFER.kind
    spec: ResourceOfferSpec
    status: ResourceOfferStatus = Field(default_factory=ResourceOfferStatus)
