"""Every well-known label, annotation, taint, finalizer and API name annex uses, in one place.

The keys keep Liqo's spelling so that manifests and habits carry over.
"""

from typing import Final

# --- API groups and versions -------------------------------------------------------------------
OFFLOADING_GROUP: Final = "offloading.liqo.io"
OFFLOADING_VERSION: Final = "v1beta1"
VIRTUALKUBELET_GROUP: Final = "virtualkubelet.liqo.io"
VIRTUALKUBELET_VERSION: Final = "v1beta1"
SHARING_GROUP: Final = "sharing.liqo.io"
SHARING_VERSION: Final = "v1alpha1"

# --- ownership of everything annex creates remotely (the pair is the ownership test) -----------
ORIGIN_CLUSTER_LABEL: Final = "offloading.liqo.io/origin"
DESTINATION_CLUSTER_LABEL: Final = "offloading.liqo.io/destination"

# --- user-facing annotations -------------------------------------------------------
SKIP_REFLECTION_ANNOTATION: Final = "liqo.io/skip-reflection"
ALLOW_REFLECTION_ANNOTATION: Final = "liqo.io/allow-reflection"
ANTI_AFFINITY_PRESET_ANNOTATION: Final = "liqo.io/anti-affinity-preset"
ANTI_AFFINITY_LABELS_ANNOTATION: Final = "liqo.io/anti-affinity-labels"
FORCE_REMOTE_NODE_PORT_ANNOTATION: Final = "liqo.io/force-remote-node-port"
# On a home pod: which API server its remote copy reaches. Unset: the home one (the agent's
# default, --enable-apiserver-support); `disabled`: none is set up; `remote`: the provider's,
# as a ServiceAccount of the twin namespace (the pod's own name, or the one
# REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION names).
API_SERVER_SUPPORT_ANNOTATION: Final = "liqo.io/api-server-support"
API_SERVER_SUPPORT_DISABLED: Final = "disabled"
API_SERVER_SUPPORT_REMOTE: Final = "remote"
REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION: Final = "liqo.io/remote-service-account-name"
# On a home pod: the remote pod's runtimeClassName (the provider's podPolicy decides).
REMOTE_RUNTIME_CLASS_NAME_ANNOTATION: Final = "liqo.io/remote-runtime-class-name"

# --- the virtual node -------------------------------------------------------------------------
TYPE_LABEL: Final = "liqo.io/type"
TYPE_VIRTUAL_NODE: Final = "virtual-node"
REMOTE_CLUSTER_ID_LABEL: Final = "liqo.io/remote-cluster-id"
VIRTUAL_NODE_TAINT_KEY: Final = "virtual-node.liqo.io/not-allowed"
VIRTUAL_NODE_TAINT_VALUE: Final = "true"
VIRTUAL_NODE_TAINT_EFFECT: Final = "NoExecute"
VIRTUAL_NODE_NAME_PREFIX: Final = "liqo-"
# On the virtual node of one of the provider's pools (`liqo-<provider>-<pool>`): the pool's name.
POOL_LABEL: Final = "offloading.liqo.io/pool"
# On a home namespace with a NamespaceOffloading (the agent sets it): the pod webhook's
# namespaceSelector (charts/home-agent), so pods elsewhere never wait for an agent.
SCHEDULING_ENABLED_LABEL: Final = "liqo.io/scheduling-enabled"
NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
OS_LABEL: Final = "kubernetes.io/os"
ARCH_LABEL: Final = "kubernetes.io/arch"
REGION_LABEL: Final = "topology.kubernetes.io/region"
PROVIDER_LABEL: Final = "liqo.io/provider"

# --- tenancy on the provider ------------------------------------------------------------------
TENANT_NAMESPACE_LABEL: Final = "liqo.io/tenant-namespace"

# --- reflection bookkeeping --------------------------------------------------------------------
ENDPOINTSLICE_MANAGED_BY_LABEL: Final = "endpointslice.kubernetes.io/managed-by"
ENDPOINTSLICE_MANAGED_BY_VALUE: Final = "endpointslice.reflection.liqo.io"
SERVICE_NAME_LABEL: Final = "kubernetes.io/service-name"
KUBE_ROOT_CA_CONFIGMAP: Final = "kube-root-ca.crt"
# The remote name of the reflected kube-root-ca.crt: the remote cluster has its own under the
# original name. Offloaded pods' projected ca.crt sources are pointed at this name.
ROOT_CA_REMOTE_NAME: Final = "kube-root-ca.crt.annex"
# On a home copy of a remote Event: the digest of what it says (shared.forge.event).
COPY_DIGEST_ANNOTATION: Final = "offloading.liqo.io/copy-digest"
# The W3C traceparent of the agent's reconcile that last wrote a ShadowPod (tracing on): the
# enforcer continues that trace. Not copied to the pod.
TRACEPARENT_ANNOTATION: Final = "offloading.liqo.io/traceparent"
SERVICE_ACCOUNT_TOKEN_SECRET_TYPE: Final = "kubernetes.io/service-account-token"
# The remote Secret holding an offloaded pod's home service-account tokens (Liqo's keys): the
# labels mark it as the token reflector's (the Secret reflector leaves it alone); the annotations
# say for which pod it was issued and when its tokens expire / are due for a refresh.
TOKEN_SECRET_POD_LABEL: Final = "offloading.liqo.io/service-account-for-pod-name"
TOKEN_SECRET_SERVICE_ACCOUNT_LABEL: Final = "offloading.liqo.io/service-account-name"
TOKEN_SECRET_POD_ANNOTATION: Final = "offloading.liqo.io/service-account-for-pod"
TOKEN_SECRET_POD_UID_ANNOTATION: Final = "offloading.liqo.io/service-account-for-pod-uid"
TOKEN_SECRET_EXPIRATION_ANNOTATION: Final = "offloading.liqo.io/service-account-expiration"
TOKEN_SECRET_REFRESH_ANNOTATION: Final = "offloading.liqo.io/service-account-refresh"
TOKEN_SECRET_NAMESPACE_KEY: Final = "namespace"

# --- the storage fabric ("Persistent storage") ----------------------------------------
# The home cluster's virtual storage class (its default name; the chart may name it otherwise)
# and the provisioner it names: the agent of the virtual node a claim's first consumer is
# scheduled on provisions it (the remote claim, then the home volume pinned to that node).
VIRTUAL_STORAGE_CLASS: Final = "liqo"
VIRTUAL_STORAGE_PROVISIONER: Final = "offloading.liqo.io/virtual-storage"
# The CSI driver name in the home volumes' source (no kubelet ever mounts them: their pods run
# remotely; a volume must name one source, and a CSI driver name may hold no slash).
VIRTUAL_STORAGE_DRIVER: Final = "virtual-storage.offloading.liqo.io"
# On a home volume: the remote volume it stands for, "<remote cluster id>/<remote volume name>".
REMOTE_VOLUME_ANNOTATION: Final = "offloading.liqo.io/remote-volume"
# A claim of the virtual class whose first consumer runs on a physical home node gets its volume
# from a real home class: a "real" claim beside it (this label names the virtual claim), whose
# volume the virtual claim's volume copies (this annotation names it).
REAL_CLAIM_LABEL: Final = "offloading.liqo.io/real-storage-for"
REAL_VOLUME_ANNOTATION: Final = "offloading.liqo.io/real-volume"
# On a home claim of the virtual class: the provider's storage class wanted for it (one the
# offer lists); without it, the offer's default class. Liqo's name, and annex's own as an alias
# (Liqo's wins when both are set).
REMOTE_STORAGE_CLASS_ANNOTATION: Final = "liqo.io/remote-storage-class"
REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION: Final = "offloading.liqo.io/remote-storage-class"
# Kubernetes' own storage keys (the scheduler, the PV controller, external provisioners).
SELECTED_NODE_ANNOTATION: Final = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER_ANNOTATION: Final = "volume.kubernetes.io/storage-provisioner"
PROVISIONED_BY_ANNOTATION: Final = "pv.kubernetes.io/provisioned-by"
PVC_PROTECTION_FINALIZER: Final = "kubernetes.io/pvc-protection"
# The Quota resource names of storage (ResourceQuota's spelling).
REQUESTS_STORAGE: Final = "requests.storage"
PERSISTENT_VOLUME_CLAIMS: Final = "persistentvolumeclaims"

# --- pod offloading ---------------------------------------------------------------------------
# The pod phases after which a pod runs no more (its ShadowPod never gets another pod).
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
OFFLOADING_BACKOFF_REASON: Final = "OffloadingBackOff"
# Event on a pod the agent deleted for its controller to make again elsewhere
# (shared.forge.pod_fit).
RETURNED_TO_SCHEDULER_REASON: Final = "ReturnedToScheduler"
REMOTE_CREATION_FAILED_CONDITION: Final = "RemoteCreationFailed"
# ShadowPod status condition: False while the remote API server refuses the ShadowPod's pod.
POD_CREATED_CONDITION: Final = "PodCreated"
FAILED_REFLECTION_REASON: Final = "FailedReflection"
# The source component of each side's Events.
HOME_AGENT_COMPONENT: Final = "annex-home-agent"
REMOTE_ENFORCER_COMPONENT: Final = "annex-remote-enforcer"
LABELS_NOT_PROPAGATED_FROM_POD: Final = (
    "pod-template-hash",
    "controller-revision-hash",
    "statefulset.kubernetes.io/pod-name",
)

# --- provider side: tenant namespaces and the consumer identity (remote enforcer) --------------
# A tenant namespace carries TENANT_NAMESPACE_LABEL="true" and REMOTE_CLUSTER_ID_LABEL=<consumer>.
# Its CONSUMER_IDENTITY_ANNOTATION names the consumer's identity: "serviceaccount:<name>" (in the
# tenant namespace) or "user:<name>"; without it, the service account CONSUMER_SERVICE_ACCOUNT.
CONSUMER_IDENTITY_ANNOTATION: Final = "liqo.io/consumer-identity"
CONSUMER_SERVICE_ACCOUNT: Final = "consumer"
TWIN_NAMESPACE_ROLE: Final = "annex-consumer"
# The remote enforcer's finalizer on every NamespaceMap: its twin namespaces go before it does.
TWIN_NAMESPACES_FINALIZER: Final = "offloading.liqo.io/twin-namespaces"
RESOURCE_OFFER_NAME: Final = "offer"
