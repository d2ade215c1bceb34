"""NamespaceMap: in the remote tenant namespace, the twin namespaces a consumer asks for."""

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from shared.api.base import ApiModel
from shared.api.resource import AGE_COLUMN, CustomResource, ResourceDefinition
from shared.wellknown import VIRTUALKUBELET_GROUP, VIRTUALKUBELET_VERSION

NAMESPACE_MAP = ResourceDefinition(
    group=VIRTUALKUBELET_GROUP,
    version=VIRTUALKUBELET_VERSION,
    kind="NamespaceMap",
    plural="namespacemaps",
    singular="namespacemap",
    short_names=("nm",),
    printer_columns=(AGE_COLUMN,),
)


class MappingPhase(StrEnum):
    ACCEPTED = "Accepted"
    CREATION_LOOP_BACK_OFF = "CreationLoopBackOff"
    TERMINATING = "Terminating"


class RemoteNamespaceStatus(ApiModel):
    remote_namespace: str
    phase: MappingPhase
    message: str | None = None


class NamespaceMapSpec(ApiModel):
    desired_mapping: dict[str, str] = Field(default={})
    """Home namespace to the remote namespace requested for it (written by the home agent)."""


class NamespaceMapStatus(ApiModel):
    current_mapping: dict[str, RemoteNamespaceStatus] = Field(default={})
    """Home namespace to what the enforcer did about it."""


class NamespaceMap(CustomResource):
    definition: ClassVar[ResourceDefinition] = NAMESPACE_MAP

    api_version: str = NAMESPACE_MAP.api_version
    kind: str = NAMESPACE_MAP.kind
    spec: NamespaceMapSpec = Field(default_factory=NamespaceMapSpec)
    status: NamespaceMapStatus = Field(default_factory=NamespaceMapStatus)
