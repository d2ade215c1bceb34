"""Pieces shared by every kind: object metadata, conditions and the wire type of quantities."""

from enum import StrEnum
from typing import Annotated, Any

from pydantic import AwareDatetime, BeforeValidator, Field, StringConstraints, WithJsonSchema

from shared.api.base import ApiModel

# The apiserver's own pattern for resource.Quantity (as emitted by controller-gen), so that the
# models refuse exactly what a real cluster refuses. Arithmetic lives in shared/quantity.py.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _integer_as_quantity_string(value: Any) -> Any:
    # A manifest may say `cpu: 2`; Kubernetes stores quantities as int-or-string, we keep strings.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_integer_as_quantity_string),
    StringConstraints(pattern=QUANTITY_PATTERN),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
"""A Kubernetes resource quantity ("500m", "2Gi", "3") in its string wire form."""

ResourceList = dict[str, Quantity]
"""Resource name (cpu, memory, pods, ephemeral-storage, ...) to quantity, like core/v1."""


class ObjectMeta(ApiModel):
    """The part of metav1.ObjectMeta annex reads; every other field (managedFields, ...) is kept."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: AwareDatetime | None = None
    deletion_timestamp: AwareDatetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[dict[str, Any]] | None = None


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """A status condition in the metav1.Condition style."""

    type: str
    status: ConditionStatus
    last_transition_time: AwareDatetime | None = None
    reason: str | None = None
    message: str | None = None


class LocalObjectReference(ApiModel):
    name: str = Field(min_length=1)
