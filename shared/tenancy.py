"""The provider-side objects of one consumer: its tenant namespace and the
confined identity its home agent authenticates as, and its Quota.

charts/remote-enforcer (templates/consumers.yaml) creates the same objects for each entry of
`consumers`, and `annexctl peer` creates them from these functions; a test renders the chart
and checks that both agree, so the definition lives here once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.api.base import ApiModel
from shared.api.quota import QUOTA, LimitsEnforcement, NamespacePolicy, PodPolicy, ServicePolicy
from shared.wellknown import (
    CONSUMER_IDENTITY_ANNOTATION,
    CONSUMER_SERVICE_ACCOUNT,
    REMOTE_CLUSTER_ID_LABEL,
    SHARING_GROUP,
    TENANT_NAMESPACE_LABEL,
    TWIN_NAMESPACE_ROLE,
    VIRTUALKUBELET_GROUP,
)

TENANT_NAMESPACE_PREFIX = "annex-tenant-"
NAMESPACE_NAME_MAX_LENGTH = 63

# What the consumer's identity may do in its tenant namespace: manage its NamespaceMaps, read
# its ResourceOffer and the Events about them, and renew its own token (a TokenRequest for its
# own ServiceAccount, no other). Nothing else, anywhere else (its twin-namespace rights are the
# chart's consumer ClusterRole, remote_enforcer/rbac.py TWIN_NAMESPACE_RULES, which the enforcer
# binds in each twin namespace).
TENANT_NAMESPACE_RULES: tuple[Mapping[str, Any], ...] = (
    {
        "apiGroups": [VIRTUALKUBELET_GROUP],
        "resources": ["namespacemaps"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": [SHARING_GROUP],
        "resources": ["resourceoffers"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": [""],
        "resources": ["serviceaccounts/token"],
        "resourceNames": [CONSUMER_SERVICE_ACCOUNT],
        "verbs": ["create"],
    },
)


def tenant_namespace_name(consumer_cluster_id: str, namespace: str | None = None) -> str:
    """The consumer's tenant namespace: `namespace`, or annex-tenant-<consumer id>, cut to 63
    characters as the chart does (`trunc 63 | trimSuffix "-"`)."""
    name = namespace or f"{TENANT_NAMESPACE_PREFIX}{consumer_cluster_id}"
    return name[:NAMESPACE_NAME_MAX_LENGTH].removesuffix("-")


def consumer_user_name(tenant_namespace: str) -> str:
    """The user the provider's API server authenticates the consumer's token as."""
    return f"system:serviceaccount:{tenant_namespace}:{CONSUMER_SERVICE_ACCOUNT}"


def consumer_identity(
    consumer_cluster_id: str,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The tenant Namespace, the `consumer` ServiceAccount, and its Role and RoleBinding there.

    `labels` are added to every object (the chart's release labels, annexctl's managed-by).
    """
    tenant = tenant_namespace_name(consumer_cluster_id, namespace)
    common = dict(labels or {})

    def metadata(name: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "namespace": tenant, "labels": dict(common), **extra}

    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": tenant,
                "labels": {
                    **common,
                    TENANT_NAMESPACE_LABEL: "true",
                    REMOTE_CLUSTER_ID_LABEL: consumer_cluster_id,
                },
                "annotations": {
                    CONSUMER_IDENTITY_ANNOTATION: f"serviceaccount:{CONSUMER_SERVICE_ACCOUNT}"
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(CONSUMER_SERVICE_ACCOUNT),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(TWIN_NAMESPACE_ROLE),
            "rules": [dict(rule) for rule in TENANT_NAMESPACE_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(TWIN_NAMESPACE_ROLE),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": TWIN_NAMESPACE_ROLE,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": CONSUMER_SERVICE_ACCOUNT, "namespace": tenant}
            ],
        },
    ]


def consumer_quota(
    consumer_cluster_id: str,
    namespace: str | None = None,
    *,
    limits_enforcement: LimitsEnforcement = LimitsEnforcement.NONE,
    resources: Mapping[str, str] | None = None,
    cordoned: bool = False,
    pod_policy: PodPolicy | None = None,
    namespace_policy: NamespacePolicy | None = None,
    service_policy: ServicePolicy | None = None,
    labels: Mapping[str, str] | None = None,
    pools: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The consumer's Quota, named after it, in its tenant namespace; `pod_policy` defaults to
    the baseline Pod Security level without host ports. `resources` empty (the default) is not
    unlimited: every resource the Quota does not list is limited by the consumer's offer.
    `pools`: the provider's pools the consumer is lent (None: every pool)."""
    # Each policy whole, as the chart writes it from its values: what a provider's admin reads
    # back is what is enforced.
    def whole(policy: ApiModel) -> dict[str, Any]:
        return policy.model_dump(by_alias=True, mode="json")
    return {
        "apiVersion": QUOTA.api_version,
        "kind": QUOTA.kind,
        "metadata": {
            "name": consumer_cluster_id,
            "namespace": tenant_namespace_name(consumer_cluster_id, namespace),
            "labels": dict(labels or {}),
        },
        "spec": {
            "consumerClusterId": consumer_cluster_id,
            "limitsEnforcement": LimitsEnforcement(limits_enforcement).value,
            "cordoned": cordoned,
            "resources": dict(resources or {}),
            "podPolicy": whole(pod_policy or PodPolicy()),
            "servicePolicy": whole(service_policy or ServicePolicy()),
            "namespacePolicy": whole(namespace_policy or NamespacePolicy()),
            **({} if pools is None else {"pools": list(pools)}),
        },
    }
