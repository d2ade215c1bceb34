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
        PrinterColumn("Pod Security", "string", ".spec.podPolicy.podSecurity"),
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


class PodSecurityLevel(StrEnum):
    """The levels of the Kubernetes Pod Security Standards."""

    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"


class PodPolicy(ApiModel):
    """What the provider lets this consumer's pods do (shared.pod_policy). Host namespaces and a
    consumer-chosen nodeName are refused at every level."""

    pod_security: PodSecurityLevel = PodSecurityLevel.BASELINE
    """Checked at ShadowPod admission and set as `pod-security.kubernetes.io/enforce` on the
    consumer's twin namespaces."""
    allow_host_ports: bool = False
    """Host ports are refused unless allowed here (and the level allows them: only
    `privileged` does)."""


class QuotaSpec(ApiModel):
    consumer_cluster_id: str
    limits_enforcement: LimitsEnforcement = LimitsEnforcement.NONE
    resources: ResourceList = Field(default={})
    cordoned: bool = False
    """A cordoned consumer gets no new ShadowPods."""
    pod_policy: PodPolicy = Field(default={}, validate_default=True)


class QuotaStatus(ApiModel):
    used: ResourceList = Field(default={})


class Quota(CustomResource):
    definition: ClassVar[ResourceDefinition] = QUOTA

    api_version: str = QUOTA.api_version
    kind: str = QUOTA.kind
    spec: QuotaSpec
    status: QuotaStatus = Field(default_factory=QuotaStatus)
