"""The Kubernetes built-in resources annex reads and writes, in one table: where each is served
(group, version, plural: how the clients and informers name it) and how its objects and the
references to them name it (apiVersion, kind). annex's own kinds declare the same in their
`ResourceDefinition`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinResource:
    group: str
    """"" for the core API."""
    version: str
    plural: str
    kind: str

    @property
    def resource(self) -> tuple[str, str, str]:
        """(group, version, plural): how the clients and informers name what they watch."""
        return (self.group, self.version, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def type_meta(self) -> dict[str, str]:
        """apiVersion and kind, as an object or a reference to one begins."""
        return {"apiVersion": self.api_version, "kind": self.kind}


PODS = BuiltinResource("", "v1", "pods", "Pod")
NODES = BuiltinResource("", "v1", "nodes", "Node")
NAMESPACES = BuiltinResource("", "v1", "namespaces", "Namespace")
SECRETS = BuiltinResource("", "v1", "secrets", "Secret")
CONFIGMAPS = BuiltinResource("", "v1", "configmaps", "ConfigMap")
SERVICES = BuiltinResource("", "v1", "services", "Service")
SERVICE_ACCOUNTS = BuiltinResource("", "v1", "serviceaccounts", "ServiceAccount")
EVENTS = BuiltinResource("", "v1", "events", "Event")
PERSISTENTVOLUMECLAIMS = BuiltinResource("", "v1", "persistentvolumeclaims",
                                         "PersistentVolumeClaim")
PERSISTENTVOLUMES = BuiltinResource("", "v1", "persistentvolumes", "PersistentVolume")
RESOURCE_QUOTAS = BuiltinResource("", "v1", "resourcequotas", "ResourceQuota")
ENDPOINTSLICES = BuiltinResource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
INGRESSES = BuiltinResource("networking.k8s.io", "v1", "ingresses", "Ingress")
LEASES = BuiltinResource("coordination.k8s.io", "v1", "leases", "Lease")
ROLES = BuiltinResource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = BuiltinResource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
DEPLOYMENTS = BuiltinResource("apps", "v1", "deployments", "Deployment")
POD_DISRUPTION_BUDGETS = BuiltinResource("policy", "v1", "poddisruptionbudgets",
                                         "PodDisruptionBudget")
STORAGE_CLASSES = BuiltinResource("storage.k8s.io", "v1", "storageclasses", "StorageClass")
