"""ForeignCluster: a provider the home cluster knows of, discovered (mDNS on the LAN,
DNS-SD records in ordinary DNS) or added by hand, with what it offers and how far peering went.

Cluster-scoped and named after the provider's cluster id, as Liqo's ForeignCluster is. Knowing
a cluster grants nothing: credentials only come from the provider's explicit consent (annexctl
peer, or a peering token it generated), and only an accepted ForeignCluster whose credentials
are at home becomes a VirtualNode.
"""

from enum import StrEnum
from typing import ClassVar

from pydantic import AwareDatetime, Field

from shared.api.base import ApiModel
from shared.api.meta import Condition, ResourceList
from shared.api.resource import (
    AGE_COLUMN,
    CustomResource,
    PrinterColumn,
    ResourceDefinition,
    Scope,
)

DISCOVERY_GROUP = "discovery.liqo.io"
DISCOVERY_VERSION = "v1alpha1"

FOREIGN_CLUSTER = ResourceDefinition(
    group=DISCOVERY_GROUP,
    version=DISCOVERY_VERSION,
    kind="ForeignCluster",
    plural="foreignclusters",
    singular="foreigncluster",
    short_names=("fc",),
    scope=Scope.CLUSTER,
    printer_columns=(
        PrinterColumn("Cluster", "string", ".spec.clusterId"),
        PrinterColumn("API", "string", ".spec.apiServerUrl"),
        PrinterColumn("Source", "string", ".status.discovery.source"),
        PrinterColumn("Offer", "string", ".status.offer.summary"),
        PrinterColumn("Phase", "string", ".status.phase"),
        AGE_COLUMN,
    ),
)


class DiscoverySource(StrEnum):
    MANUAL = "Manual"
    """Created by a user or by annexctl (peer, a peering token)."""
    MDNS = "mDNS"
    """Announced on the LAN (`_annex._tcp.local.`)."""
    DNS = "DNS"
    """Published as DNS-SD records (PTR, SRV, TXT) under a domain of ordinary DNS."""


class PeeringPhase(StrEnum):
    DISCOVERED = "Discovered"
    """Known (announced or added), no credentials at home: nothing is granted yet."""
    AUTHENTICATED = "Authenticated"
    """The provider consented: its consumer kubeconfig Secret is at home; not accepted yet."""
    PEERED = "Peered"
    """A VirtualNode serves the cluster."""


class ForeignClusterSpec(ApiModel):
    cluster_id: str = Field(min_length=1)
    """The provider's cluster id (the remote-enforcer's clusterId)."""
    api_server_url: str | None = None
    """The provider's API server as the home cluster reaches it (from its announcement, or
    given)."""
    accepted: bool = False
    """Accept the provider's offer: once its credentials are at home, a VirtualNode is
    created for it (in the home controller's namespace). Discovery alone never accepts."""


class Discovery(ApiModel):
    source: DiscoverySource
    instance: str | None = None
    """The DNS-SD service instance that announced the cluster (mDNS or DNS)."""
    announced: bool | None = None
    """False once the announcement went away (an mDNS goodbye, the DNS records removed); unset
    for a cluster added by hand."""
    announced_since: AwareDatetime | None = None
    """When the current announcement was first seen (kept across a controller's restart: a
    refreshed announcement writes nothing)."""


class OfferSummary(ApiModel):
    resources: ResourceList = Field(default={})
    summary: str = ""
    """One line for `kubectl get fc`: "cpu=4 memory=8Gi pods=110", or "none" for an empty
    offer."""


class ForeignClusterStatus(ApiModel):
    phase: PeeringPhase | None = None
    discovery: Discovery | None = None
    virtual_node: str | None = None
    """namespace/name of the VirtualNode serving the cluster."""
    offer: OfferSummary | None = None
    conditions: list[Condition] = Field(default=[])


class ForeignCluster(CustomResource):
    definition: ClassVar[ResourceDefinition] = FOREIGN_CLUSTER

    api_version: str = FOREIGN_CLUSTER.api_version
    kind: str = FOREIGN_CLUSTER.kind
    spec: ForeignClusterSpec
    status: ForeignClusterStatus = Field(default_factory=ForeignClusterStatus)
