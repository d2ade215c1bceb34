"""The enforcer's admission webhooks as the API server must call them: each one's path on the
enforcer's webhook server, the requests it reviews and the namespaces it is called for. The
chart's ValidatingWebhookConfiguration is checked against this description, and tests register
the webhooks from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from remote_enforcer.admission import WEBHOOK_PATH as SHADOWPODS_PATH
from remote_enforcer.claim_admission import WEBHOOK_PATH as CLAIMS_PATH
from remote_enforcer.object_admission import WEBHOOK_PATH as NETWORK_PATH
from shared.api.shadowpod import SHADOWPOD
from shared.wellknown import ORIGIN_CLUSTER_LABEL

# Twin namespaces carry the origin label (shared.ownership): the webhooks that guard only what
# consumers write there are not called for the provider's other namespaces.
TWIN_NAMESPACE_SELECTOR: dict[str, Any] = {"matchExpressions": [
    {"key": ORIGIN_CLUSTER_LABEL, "operator": "Exists"}]}


def _rule(group: str, version: str, resources: list[str], operations: list[str]
          ) -> dict[str, Any]:
    return {"apiGroups": [group], "apiVersions": [version], "operations": operations,
            "resources": resources, "scope": "Namespaced"}


@dataclass(frozen=True)
class Webhook:
    name: str
    """The first label of the webhook's name (the chart's: `<name>.enforcer.annex.liqo.io`)."""
    path: str
    rules: tuple[dict[str, Any], ...]
    namespace_selector: dict[str, Any] | None = None
    """None: called for every namespace (a ShadowPod outside a twin namespace is refused)."""


WEBHOOKS: tuple[Webhook, ...] = (
    Webhook("shadowpods", SHADOWPODS_PATH, (_rule(
        SHADOWPOD.group, SHADOWPOD.version, [SHADOWPOD.plural], ["CREATE", "UPDATE"]),)),
    # reflected claims: offered classes, the storage quota, no volume of the provider's
    # choosing, and no deletion but by their consumer
    Webhook("persistentvolumeclaims", CLAIMS_PATH, (_rule(
        "", "v1", ["persistentvolumeclaims"], ["CREATE", "UPDATE", "DELETE"]),),
        TWIN_NAMESPACE_SELECTOR),
    # what a consumer exposes: Service types, endpoint addresses, ingress classes and hosts
    Webhook("network", NETWORK_PATH, (
        _rule("", "v1", ["services"], ["CREATE", "UPDATE"]),
        _rule("discovery.k8s.io", "v1", ["endpointslices"], ["CREATE", "UPDATE"]),
        _rule("networking.k8s.io", "v1", ["ingresses"], ["CREATE", "UPDATE"])),
        TWIN_NAMESPACE_SELECTOR),
)


def registrations(domain: str, client_config: dict[str, Any], failure_policy: str = "Fail",
                  timeout_seconds: int = 10) -> list[dict[str, Any]]:
    """The `webhooks` of a ValidatingWebhookConfiguration for an enforcer reached through
    `client_config` (its `url` or `service`, without the path), each named
    `<name>.<domain>`."""
    def config(path: str) -> dict[str, Any]:
        if "url" in client_config:
            return {**client_config, "url": client_config["url"].rstrip("/") + path}
        return {**client_config, "service": {**client_config["service"], "path": path}}

    return [{
        "name": f"{webhook.name}.{domain}",
        "clientConfig": config(webhook.path),
        "rules": [dict(rule) for rule in webhook.rules],
        **({"namespaceSelector": webhook.namespace_selector}
           if webhook.namespace_selector is not None else {}),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "NoneOnDryRun",
        "failurePolicy": failure_policy,
        "timeoutSeconds": timeout_seconds,
    } for webhook in WEBHOOKS]
