"""ShadowPod: the home agent's request for one pod in the remote twin namespace."""

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field, WithJsonSchema

from shared.api.base import ApiModel
from shared.api.meta import Condition
from shared.api.resource import AGE_COLUMN, CustomResource, PrinterColumn, ResourceDefinition
from shared.wellknown import OFFLOADING_GROUP, OFFLOADING_VERSION

SHADOWPOD = ResourceDefinition(
    group=OFFLOADING_GROUP,
    version=OFFLOADING_VERSION,
    kind="ShadowPod",
    plural="shadowpods",
    singular="shadowpod",
    short_names=("shp",),
    printer_columns=(
        PrinterColumn("Phase", "string", ".status.phase"),
        PrinterColumn("Node", "string", ".status.nodeName"),
        AGE_COLUMN,
    ),
)

# An embedded Kubernetes structure kept as a plain dict and accepted in full by the CRD: the
# apiserver validates it when the enforcer creates the real pod.
EmbeddedObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class ShadowPodSpec(ApiModel):
    pod: EmbeddedObject
    """The remote pod's PodSpec, already translated for the remote cluster."""
    pool: str | None = None
    """The provider's pool (its offer's `pools[].name`) the pod runs in: the enforcer ANDs the
    pool's node selector into the pod's required node affinity. Unset while the provider
    declares pools: one of its pools' nodes. Cannot change."""


class ShadowPodStatus(ApiModel):
    phase: PodPhase | None = None
    node_name: str | None = None
    """The node the remote pod runs on."""
    pod_status: EmbeddedObject | None = None
    """The remote pod's full status."""
    recreations: int = Field(default=0, ge=0)
    """How often the enforcer recreated the remote pod."""
    carried_restarts: dict[str, int] | None = None
    """Per container name: the restarts of the remote pods the enforcer replaced, each
    replacement counting as one more. The home agent adds it to the remote restart count: kept
    here, the figure survives agent restarts, is never counted twice and never goes down."""
    observed_generation: int | None = None
    conditions: list[Condition] | None = None
    """`PodCreated` False (reason: the API server's, e.g. Forbidden) while the remote API server
    refuses the pod (ResourceQuota, Pod Security, RuntimeClass, invalid spec), with its message;
    removed once the pod exists. The home agent shows it on the home pod."""


class ShadowPod(CustomResource):
    definition: ClassVar[ResourceDefinition] = SHADOWPOD

    api_version: str = SHADOWPOD.api_version
    kind: str = SHADOWPOD.kind
    spec: ShadowPodSpec
    status: ShadowPodStatus = Field(default_factory=ShadowPodStatus)
