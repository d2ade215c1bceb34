"""The kubeconfig `annexctl peer` mints for a consumer: the provider's server and CA (as the
admin's kubeconfig reaches it, or a server URL given for the home agent's point of view), the
consumer's token, and its tenant namespace as the context's namespace (so a reader of the
Secret — `annexctl status` — knows where the consumer's objects are)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from kubernetes import client


def ca_data(configuration: client.Configuration) -> str | None:
    """The CA certificate the configuration trusts, base64-encoded, or None (system CAs)."""
    if configuration.ssl_ca_cert:
        return base64.b64encode(Path(configuration.ssl_ca_cert).read_bytes()).decode()
    return None


def token_kubeconfig(configuration: client.Configuration, token: str, namespace: str,
                     cluster_name: str, user_name: str, server: str | None = None
                     ) -> dict[str, Any]:
    """A single-context kubeconfig for `token` against the server `configuration` reaches."""
    cluster: dict[str, Any] = {"server": server or configuration.host}
    authority = ca_data(configuration)
    if authority:
        cluster["certificate-authority-data"] = authority
    if not configuration.verify_ssl:
        cluster["insecure-skip-tls-verify"] = True
    if getattr(configuration, "tls_server_name", None):
        cluster["tls-server-name"] = configuration.tls_server_name
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user_name, "user": {"token": token}}],
        "contexts": [{"name": cluster_name, "context": {
            "cluster": cluster_name, "user": user_name, "namespace": namespace}}],
        "current-context": cluster_name,
    }


def context_namespace(kubeconfig: dict[str, Any]) -> str | None:
    """The namespace of the kubeconfig's current context, if it names one."""
    current = kubeconfig.get("current-context")
    for entry in kubeconfig.get("contexts") or []:
        if entry.get("name") == current:
            namespace = (entry.get("context") or {}).get("namespace")
            return str(namespace) if namespace else None
    return None
