"""What every custom resource kind declares about itself, in one record per kind.

crdgen and the components read group, version, plural, ... from the kind's `ResourceDefinition`
instead of repeating the strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Self

from pydantic import Field, model_validator

from shared.api.base import ApiModel
from shared.api.meta import ObjectMeta


class Scope(StrEnum):
    NAMESPACED = "Namespaced"
    CLUSTER = "Cluster"


@dataclass(frozen=True)
class PrinterColumn:
    """One `additionalPrinterColumns` entry (what `kubectl get` shows)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0


AGE_COLUMN = PrinterColumn("Age", "date", ".metadata.creationTimestamp")


@dataclass(frozen=True)
class ResourceDefinition:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...] = ()
    scope: Scope = Scope.NAMESPACED
    printer_columns: tuple[PrinterColumn, ...] = ()
    categories: tuple[str, ...] = ("liqo",)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def type_meta(self) -> dict[str, str]:
        """apiVersion and kind, as an object or a reference to one begins."""
        return {"apiVersion": self.api_version, "kind": self.kind}

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def resource(self) -> tuple[str, str, str]:
        """(group, version, plural): how the clients and informers name what they watch."""
        return (self.group, self.version, self.plural)


class CustomResource(ApiModel):
    """A top-level object of one of annex's kinds: apiVersion, kind, metadata, spec, status.

    Subclasses set `definition` and default `api_version`/`kind` from it; an object of another
    kind or version is refused rather than silently read as this one.
    """

    definition: ClassVar[ResourceDefinition]

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="after")
    def _is_this_kind(self) -> Self:
        expected = (self.definition.api_version, self.definition.kind)
        if (self.api_version, self.kind) != expected:
            raise ValueError(
                f"expected apiVersion {expected[0]!r} kind {expected[1]!r}, "
                f"got {self.api_version!r} {self.kind!r}"
            )
        return self
