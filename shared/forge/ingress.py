"""Ingress, home → remote: verbatim, with the ingress class cleared.

The home class may not exist remotely, so the remote cluster's default class takes over (seed
004). Like Liqo's forge, the legacy `kubernetes.io/ingress.class` annotation, which selects a
class the same way, is dropped too. Status (the home load balancer's address) is never copied.
"""

from collections.abc import Mapping
from typing import Any

from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, remote_metadata

LEGACY_INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"


def remote_ingress(
    local: Mapping[str, Any], remote_namespace: str, config: ReflectionConfig
) -> dict[str, Any]:
    """The desired remote copy of the home Ingress `local`."""
    spec: dict[str, Any] = copied(dict(local.get("spec") or {}))
    spec.pop("ingressClassName", None)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": remote_metadata(
            local,
            remote_namespace,
            config,
            skipped_annotations=(LEGACY_INGRESS_CLASS_ANNOTATION,),
        ),
        "spec": spec,
    }
