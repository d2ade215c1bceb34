"""Quota: per-consumer limits the provider's admission webhook enforces on ShadowPods."""

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from shared.api.base import ApiModel
from shared.api.meta import ResourceList
from shared.api.resource import AGE_COLUMN, CustomResource, PrinterColumn, ResourceDefinition
from shared.wellknown import OFFLOADING_GROUP, OFFLOADING_VERSION

QUOTA = ResourceDefinition(
    group=OFFLOADING_GROUP,
    version=OFFLOADING_VERSION,
    kind="Quota",
    plural="quotas",
    singular="quota",
    printer_columns=(
        PrinterColumn("Consumer", "string", ".spec.consumerClusterId"),
        PrinterColumn("Enforcement", "string", ".spec.limitsEnforcement"),
        PrinterColumn("Cordoned", "boolean", ".spec.cordoned"),
        AGE_COLUMN,
    ),
)


class LimitsEnforcement(StrEnum):
    NONE = "None"
    """Requests are not checked."""
    SOFT = "Soft"
    """cpu and memory requests are required and must fit."""
    HARD = "Hard"
    """As Soft, and requests must equal limits."""


class QuotaSpec(ApiModel):
    consumer_cluster_id: str
    limits_enforcement: LimitsEnforcement = LimitsEnforcement.NONE
    resources: ResourceList = Field(default={})
    cordoned: bool = False
    """A cordoned consumer gets no new ShadowPods."""


class QuotaStatus(ApiModel):
    used: ResourceList = Field(default={})


class Quota(CustomResource):
    definition: ClassVar[ResourceDefinition] = QUOTA

    api_version: str = QUOTA.api_version
    kind: str = QUOTA.kind
    spec: QuotaSpec
    status: QuotaStatus = Field(default_factory=QuotaStatus)
