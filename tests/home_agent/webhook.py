"""Serving the agent's pod webhook in tests: a certificate from a throwaway CA and the
MutatingWebhookConfiguration that points the home API server at it."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

from tests.helpers import free_port


@dataclass
class WebhookServing:
    port: int
    cert: Path
    key: Path
    ca_bundle: str

    @property
    def flags(self) -> tuple[str, ...]:
        return ("--webhook-address", f"127.0.0.1:{self.port}", "--webhook-cert", str(self.cert),
                "--webhook-key", str(self.key))

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate-pod"


def webhook_serving(directory: Path) -> WebhookServing:
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    cert, key = directory / "webhook.crt", directory / "webhook.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    return WebhookServing(free_port(), cert, key,
                          base64.b64encode(authority.cert_pem.bytes()).decode())


def mutating_webhook_configuration(name: str, serving: WebhookServing,
                                   namespace: str) -> dict[str, Any]:
    """Pods of offloaded namespaces, as the chart's (the agent labels them), and only of
    `namespace`, so that tests running meanwhile are not affected."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "pods.home-agent.annex.test",
            "clientConfig": {"url": serving.url, "caBundle": serving.ca_bundle},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace,
                                                  "liqo.io/scheduling-enabled": "true"}},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 5,
        }],
    }
