"""The provider as the home agent sees it: a VirtualNode's kubeconfig Secret holds the consumer
identity `annexctl peer` minted (or the chart was given), confined to the tenant namespace its
context names. `status` and `explain` read the provider through it, so that a user needs only
the home kubeconfig."""

from __future__ import annotations

import base64
from typing import Any

import yaml

from annexctl.clusters import CliError, Cluster, connect
from annexctl.kubeconfigs import context_namespace
from shared.api.virtual_node import VirtualNode


def provider_of(home: Cluster, virtual_node: VirtualNode) -> tuple[Cluster, str | None]:
    """A client for the virtual node's provider, as its consumer identity, and the tenant
    namespace; CliError when the Secret is missing or unusable."""
    ref = virtual_node.spec.kubeconfig_secret_ref
    namespace = virtual_node.metadata.namespace
    if ref is None:
        raise CliError(f"VirtualNode {namespace}/{virtual_node.metadata.name} names no "
                       "kubeconfigSecretRef")
    secret = home.get("v1", "Secret", ref.name, namespace)
    encoded: Any = ((secret or {}).get("data") or {}).get("kubeconfig")
    if not encoded:
        raise CliError(f"{home.where}: Secret {namespace}/{ref.name} has no kubeconfig key")
    try:
        kubeconfig = yaml.safe_load(base64.b64decode(encoded))
    except (yaml.YAMLError, ValueError) as error:
        raise CliError(f"Secret {namespace}/{ref.name}: not a kubeconfig: {error}") from None
    if not isinstance(kubeconfig, dict):
        raise CliError(f"Secret {namespace}/{ref.name}: not a kubeconfig")
    provider = connect(f"provider {virtual_node.spec.cluster_id}", None, contents=kubeconfig)
    return provider, context_namespace(kubeconfig)
