"""The resource kinds a simulated cluster serves: built-ins, plus those CRDs add at run time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# What every kind's field selector supports (the generic registry's DefaultNamespaceScopedAttr).
META_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class ResourceKind:
    """One served resource (group/version/plural), as discovery and the registry see it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    field_selectors: tuple[str, ...] = META_FIELDS
    # False where the registry strategy refuses an update without metadata.resourceVersion
    # (AllowUnconditionalUpdate() == false in the kind's strategy.go).
    unconditional_update: bool = True
    # True where PUT creates a missing object (AllowCreateOnUpdate() == true).
    create_on_update: bool = False
    # Custom resources: the CRD version's openAPIV3Schema (None for built-ins).
    schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    # Custom resources: the CRD version's subresources.scale (its replicas and selector paths)
    scale: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def group_resource(self) -> str:
        """How error messages name the resource: "pods", "deployments.apps"."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self) -> str:
        """How Invalid errors name the kind: "Pod", "Deployment.apps"."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def storage_key(self) -> tuple[str, str]:
        """All versions of one group/resource share storage."""
        return (self.group, self.plural)

    @property
    def has_status_subresource(self) -> bool:
        return "status" in self.subresources


def unsupported_field_label_message(kind: ResourceKind, label: str) -> str:
    """Why a field selector label is refused: kinds with a field label conversion function of
    their own (those selectable by more than metadata) say it their way, the others fall back to
    runtime.DefaultMetaV1FieldSelectorConversion."""
    if kind.field_selectors != META_FIELDS:
        return f"field label not supported: {label}"
    return (f'"{label}" is not a known field selector: only "metadata.name", '
            f'"metadata.namespace"')


def _kind(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    short: Iterable[str] = (),
    sub: Iterable[str] = (),
    fields: Iterable[str] = (),
    categories: Iterable[str] = (),
    verbs: Iterable[str] = ALL_VERBS,
    unconditional_update: bool = True,
    create_on_update: bool = False,
) -> ResourceKind:
    return ResourceKind(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        short_names=tuple(short),
        verbs=tuple(verbs),
        subresources=tuple(sub),
        categories=tuple(categories),
        field_selectors=META_FIELDS + tuple(fields),
        unconditional_update=unconditional_update,
        create_on_update=create_on_update,
    )


_POD_FIELDS = (
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
    "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
)
_NEW_EVENT_FIELDS = (
    "regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
    "regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath", "reason",
    "reportingController", "type",
)

BUILTIN_KINDS: tuple[ResourceKind, ...] = (
    # namespace storage deletes one namespace at a time: no deletecollection route
    _kind("", "v1", "namespaces", "Namespace", False, ("ns",), ("status", "finalize"),
          ("status.phase",), verbs=tuple(v for v in ALL_VERBS if v != "deletecollection")),
    _kind("", "v1", "nodes", "Node", False, ("no",), ("status", "proxy"),
          ("spec.unschedulable",)),
    _kind("", "v1", "pods", "Pod", True, ("po",),
          ("status", "binding", "log", "eviction", "ephemeralcontainers"), _POD_FIELDS, ("all",)),
    _kind("", "v1", "services", "Service", True, ("svc",), ("status", "proxy"),
          ("spec.clusterIP", "spec.type"), ("all",)),
    _kind("", "v1", "endpoints", "Endpoints", True, ("ep",), create_on_update=True),
    _kind("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    _kind("", "v1", "secrets", "Secret", True, (), (), ("type",)),
    _kind("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",), ("token",)),
    _kind("", "v1", "events", "Event", True, ("ev",), (), _EVENT_FIELDS, create_on_update=True),
    _kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",),
          ("status",), ("spec.volumeName",)),
    _kind("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",), ("status",)),
    _kind("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",), ("status",)),
    _kind("events.k8s.io", "v1", "events", "Event", True, ("ev",), (), _NEW_EVENT_FIELDS,
          create_on_update=True),
    _kind("coordination.k8s.io", "v1", "leases", "Lease", True, unconditional_update=False,
          create_on_update=True),
    _kind("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    _kind("networking.k8s.io", "v1", "ingresses", "Ingress", True, ("ing",), ("status",)),
    _kind("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    _kind("apps", "v1", "deployments", "Deployment", True, ("deploy",), ("status", "scale"), (),
          ("all",)),
    _kind("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), ("status", "scale"),
          ("status.replicas",), ("all",)),
    _kind("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("status", "scale"), (),
          ("all",)),
    _kind("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",), ("status",), (), ("all",)),
    _kind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",),
          ("status",)),
    _kind("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",)),
    _kind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    _kind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
          False, ("crd", "crds"), ("status",), (), ("api-extensions",),
          unconditional_update=False),
    _kind("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
          "MutatingWebhookConfiguration", False, (), (), (), ("api-extensions",),
          unconditional_update=False),
    _kind("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
          "ValidatingWebhookConfiguration", False, (), (), (), ("api-extensions",),
          unconditional_update=False),
    # GA (on by default) since v1.30 (kubesim.admission.PolicyAdmission evaluates them)
    _kind("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
          "ValidatingAdmissionPolicy", False, (), ("status",), (), ("api-extensions",),
          unconditional_update=False),
    _kind("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
          "ValidatingAdmissionPolicyBinding", False, (), (), (), ("api-extensions",),
          unconditional_update=False),
    _kind("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest",
          False, ("csr",), ("status", "approval"), ("spec.signerName",)),
    _kind("rbac.authorization.k8s.io", "v1", "roles", "Role", True,
          create_on_update=True),
    _kind("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True,
          create_on_update=True),
    _kind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False,
          create_on_update=True),
    _kind("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
          create_on_update=True),
)

# Subresources whose verbs differ from the parent's, for discovery.
SUBRESOURCE_VERBS: dict[str, tuple[str, ...]] = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "finalize": ("update",),
    "binding": ("create",),
    "eviction": ("create",),
    "token": ("create",),
    "log": ("get",),
    "proxy": ("create", "delete", "get", "patch", "update"),
    "ephemeralcontainers": ("get", "patch", "update"),
    "approval": ("get", "patch", "update"),
}
SUBRESOURCE_KINDS: dict[str, tuple[str, str, str]] = {
    # subresource -> (group, version, kind) of the object it takes, when not the parent's
    "binding": ("", "v1", "Binding"),
    "eviction": ("policy", "v1", "Eviction"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
    "scale": ("autoscaling", "v1", "Scale"),
}


class KindRegistry:
    """Lookup of served kinds by (group, version, plural) and (group, kind)."""

    def __init__(self, kinds: Iterable[ResourceKind] = BUILTIN_KINDS) -> None:
        self._by_resource: dict[tuple[str, str, str], ResourceKind] = {}
        # served by their own handlers, not the generic registry: only discovery lists them
        self._announced: dict[tuple[str, str, str], ResourceKind] = {}
        for kind in kinds:
            self.add(kind)

    def announce(self, kind: ResourceKind) -> None:
        """List in discovery a resource a handler of its own serves (the reviews, an
        aggregated API)."""
        self._announced[(kind.group, kind.version, kind.plural)] = kind

    def withdraw(self, group: str, version: str) -> None:
        for key in [k for k in self._announced if k[:2] == (group, version)]:
            del self._announced[key]

    def announced(self, group: str, version: str, plural: str) -> ResourceKind | None:
        return self._announced.get((group, version, plural))

    def add(self, kind: ResourceKind) -> None:
        self._by_resource[(kind.group, kind.version, kind.plural)] = kind

    def remove(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_resource if k[0] == group and k[2] == plural]:
            del self._by_resource[key]

    def get(self, group: str, version: str, plural: str) -> ResourceKind | None:
        return self._by_resource.get((group, version, plural))

    def by_kind(self, group: str, kind: str) -> ResourceKind | None:
        for candidate in self._by_resource.values():
            if candidate.group == group and candidate.kind == kind:
                return candidate
        return None

    def by_storage(self, storage_key: tuple[str, str]) -> ResourceKind | None:
        for candidate in self._by_resource.values():
            if candidate.storage_key == storage_key:
                return candidate
        return None

    def __iter__(self) -> Iterator[ResourceKind]:
        return iter(list(self._by_resource.values()))

    def _discoverable(self) -> list[ResourceKind]:
        return [*self._by_resource.values(), *self._announced.values()]

    def versions(self, group: str) -> list[str]:
        """Served versions of a group, the preferred (first registered) one first."""
        seen: list[str] = []
        for kind in self._discoverable():
            if kind.group == group and kind.version not in seen:
                seen.append(kind.version)
        return seen

    def groups(self) -> list[str]:
        seen: list[str] = []
        for kind in self._discoverable():
            if kind.group not in seen:
                seen.append(kind.group)
        return seen

    def in_group_version(self, group: str, version: str) -> list[ResourceKind]:
        return [k for k in self._discoverable() if k.group == group and k.version == version]
