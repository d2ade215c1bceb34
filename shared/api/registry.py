"""Every custom resource kind annex defines, for crdgen and the components."""

from typing import Final

from shared.api.foreign_cluster import ForeignCluster
from shared.api.namespace_map import NamespaceMap
from shared.api.namespace_offloading import NamespaceOffloading
from shared.api.quota import Quota
from shared.api.resource import CustomResource
from shared.api.resource_offer import ResourceOffer
from shared.api.shadowpod import ShadowPod
from shared.api.virtual_node import VirtualNode

RESOURCE_MODELS: Final[tuple[type[CustomResource], ...]] = (
    ShadowPod,
    NamespaceOffloading,
    NamespaceMap,
    ResourceOffer,
    Quota,
    VirtualNode,
    ForeignCluster,
)

MODELS_BY_KIND: Final[dict[str, type[CustomResource]]] = {
    model.definition.kind: model for model in RESOURCE_MODELS
}

CHART_MODELS: Final[dict[str, tuple[type[CustomResource], ...]]] = {
    # The kinds each chart installs: what its cluster serves. Disjoint, so that one cluster may
    # run both charts, each release owning its CRDs (a CRD has one Helm owner).
    "home-agent": (NamespaceOffloading, VirtualNode, ForeignCluster),
    "remote-enforcer": (ShadowPod, NamespaceMap, ResourceOffer, Quota),
}
"""Chart name -> the custom resource kinds its templates install (charts/<chart>/files/crds/,
generated with crds/)."""
