"""`VirtualNode.spec.offloadingPatch`: what every pod offloaded through a virtual node gets added,
and the label/annotation keys never reflected through it."""

from typing import Any

from pydantic import Field

from shared.api.base import ApiModel


class OffloadingPatch(ApiModel):
    # Literal (copied) defaults rather than factories: they also become the CRD's defaults, so the
    # object the apiserver stores is the one this model writes.
    node_selector: dict[str, str] = Field(default={})
    # Tolerations and the affinity stay plain Kubernetes dicts: they are copied into a PodSpec.
    tolerations: list[dict[str, Any]] = Field(default=[])
    affinity: dict[str, Any] | None = None
    runtime_class_name: str | None = None
    labels_not_reflected: list[str] = Field(default=[])
    annotations_not_reflected: list[str] = Field(default=[])
