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
    """Requests need not be set; what pods do request still counts against the limits."""
    SOFT = "Soft"
    """cpu and memory requests are required and must fit."""
    HARD = "Hard"
    """As Soft, and requests must equal limits."""


class PodSecurityLevel(StrEnum):
    """The levels of the Kubernetes Pod Security Standards."""

    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"


# The tolerations every pod carries (the DefaultTolerationSeconds admission plugin adds them):
# how long a pod stays on a node that stops answering.
NODE_HEALTH_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
)
# Node labels that describe a node without singling one out (well-known labels).
DEFAULT_NODE_LABELS: tuple[str, ...] = (
    "kubernetes.io/arch", "kubernetes.io/os", "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type")
# The volume sources the Pod Security Standards' restricted level allows, less `csi`: inline CSI
# volumes (an NFS or SMB driver's among them) are mounted by the provider's nodes from whatever
# the pod names.
DEFAULT_VOLUME_TYPES: tuple[str, ...] = (
    "configMap", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret")


class Toleration(ApiModel):
    """A toleration the provider lets consumer pods carry: it covers a pod's toleration of the
    same key (an empty key with `Exists` covers every key), effect (empty: every effect) and,
    for `Equal`, value."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class PodPolicy(ApiModel):
    """What the provider lets this consumer's pods do (shared.pod_policy). Host namespaces and a
    consumer-chosen nodeName are refused at every level; every list below is closed by default:
    what it does not name is refused."""

    pod_security: PodSecurityLevel = PodSecurityLevel.BASELINE
    """Checked at ShadowPod admission and set as `pod-security.kubernetes.io/enforce` on the
    consumer's twin namespaces."""
    allow_host_ports: bool = False
    """Host ports are refused unless allowed here (and the level allows them: only
    `privileged` does)."""
    allowed_tolerations: list[Toleration] = Field(
        default=[Toleration.model_validate(t) for t in NODE_HEALTH_TOLERATIONS])
    """Tolerations the pods may carry (default: the node health ones every pod has). A pod
    tolerating what is not covered here is refused: tainted nodes stay the provider's."""
    allowed_node_labels: list[str] = Field(default=list(DEFAULT_NODE_LABELS))
    """Node label keys the pods may select in nodeSelector and node affinity (`matchFields`,
    which names nodes, is refused): never the labels of dedicated or control-plane nodes."""
    allowed_priority_classes: list[str] = Field(default=[])
    """PriorityClasses the pods may name (default: none; a pod names no class and runs at the
    provider's default priority, preempting nothing of the provider's)."""
    allowed_runtime_classes: list[str] = Field(default=[])
    """RuntimeClasses the pods may name (default: none: the provider's default runtime)."""
    allowed_scheduler_names: list[str] = Field(default=["default-scheduler"])
    """Schedulers the pods may name."""
    allowed_volume_types: list[str] = Field(default=list(DEFAULT_VOLUME_TYPES))
    """Volume sources the pods may use, whatever the Pod Security level allows: inline network
    volumes (nfs, iscsi, rbd, cephfs, glusterfs, cloud disks by id, flexVolume, inline csi)
    are mounted by the provider's nodes on the consumer's behalf and are refused unless named
    here."""


class ServiceType(StrEnum):
    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"
    EXTERNAL_NAME = "ExternalName"


class ServicePolicy(ApiModel):
    """What the provider lets this consumer expose through the Services, EndpointSlices and
    Ingresses it writes in its twin namespaces (remote_enforcer.object_admission). Closed by
    default. `externalIPs` are refused whatever this says (traffic to such an address is
    intercepted cluster-wide)."""

    allowed_service_types: list[ServiceType] = Field(default=[ServiceType.CLUSTER_IP])
    """Service types the consumer may create (default: ClusterIP only: no port opened on every
    provider node, no load balancer billed to the provider, no DNS alias to anywhere)."""
    allowed_endpoint_cidrs: list[str] = Field(default=[], alias="allowedEndpointCIDRs")
    """Where the consumer's EndpointSlices may point besides the pods of its own twin
    namespaces: the CIDRs through which the provider reaches the consumer's pods (its remapped
    pod CIDR). Any other address is refused: a Service must not front the provider's own
    network."""
    allowed_ingress_classes: list[str] = Field(default=[])
    """IngressClasses the consumer's Ingresses may name (default: none: no Ingress)."""
    allowed_ingress_hosts: list[str] = Field(default=[])
    """Host names the consumer's Ingresses may claim; `*.example.com` allows one label in its
    place. Default: none."""


# Per twin namespace: what a consumer may store in the provider's etcd (a ResourceQuota the
# enforcer keeps in each twin namespace). Each object may be up to 1.5 MiB. Secrets: 100 of the
# consumer's own, and one service-account token Secret for each of the 500 ShadowPods' pods (the
# agent reflects a pod's token as a Secret of the twin namespace).
DEFAULT_NAMESPACE_OBJECT_COUNTS: dict[str, str] = {
    "configmaps": "100", "secrets": "600", "services": "50", "persistentvolumeclaims": "50",
    "count/shadowpods.offloading.liqo.io": "500",
    "count/endpointslices.discovery.k8s.io": "100",
    "count/ingresses.networking.k8s.io": "20",
}
DEFAULT_MAX_TWIN_NAMESPACES = 20


class NamespacePolicy(ApiModel):
    """Which twin namespaces a consumer may have (remote_enforcer.namespaces): names carrying
    its cluster id (`<home namespace>-<consumer id>`, as the DefaultName mapping strategy makes
    them), or named here; never a namespace the enforcer did not create; at most
    `maxTwinNamespaces`; each with `objectCounts` as its ResourceQuota."""

    allowed_names: list[str] = Field(default=[])
    """Names the consumer may use without its cluster id (EnforceSameName or SelectedName
    mappings); a trailing `*` allows a prefix."""
    max_twin_namespaces: int = Field(default=DEFAULT_MAX_TWIN_NAMESPACES, ge=0)
    """How many twin namespaces the consumer may have."""
    object_counts: ResourceList = Field(
        default=dict(DEFAULT_NAMESPACE_OBJECT_COUNTS))
    """The `hard` of each twin namespace's ResourceQuota (object counts, as ResourceQuota names
    them)."""


class QuotaSpec(ApiModel):
    consumer_cluster_id: str
    limits_enforcement: LimitsEnforcement = LimitsEnforcement.NONE
    resources: ResourceList = Field(default={})
    """Limits on what the consumer's pods request. Resources not listed are limited by what the
    provider offers the consumer (its ResourceOffer): a Quota never means unlimited."""
    cordoned: bool = False
    """A cordoned consumer gets no new ShadowPods."""
    pools: list[str] | None = Field(default=None, min_length=1)
    """The provider's pools (its `--offer-pool` names) this consumer is lent; unset: every
    pool. Its ResourceOffer lists only these, and its ShadowPods run in these only (one naming
    another pool is refused). A name the provider does not declare lends nothing: an Event on
    the Quota (reason UndeclaredPools) says so."""
    pod_policy: PodPolicy = Field(default={}, validate_default=True)
    service_policy: ServicePolicy = Field(default={}, validate_default=True)
    namespace_policy: NamespacePolicy = Field(default={}, validate_default=True)


class QuotaStatus(ApiModel):
    used: ResourceList = Field(default={})


class Quota(CustomResource):
    definition: ClassVar[ResourceDefinition] = QUOTA

    api_version: str = QUOTA.api_version
    kind: str = QUOTA.kind
    spec: QuotaSpec
    status: QuotaStatus = Field(default_factory=QuotaStatus)
