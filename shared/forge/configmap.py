"""ConfigMap, home → remote: verbatim, except that `kube-root-ca.crt` is renamed.

Every namespace of the remote cluster already has its own `kube-root-ca.crt` (published by its
root-CA controller), so the home cluster's copy goes to `ROOT_CA_REMOTE_NAME`, and offloaded pods'
projected `ca.crt` sources are pointed there (the pod forge uses `remote_configmap_name`). One
constant suffices: a twin namespace belongs to exactly one home cluster (the enforcer refuses a
namespace that is not its own). A home ConfigMap that is itself called `ROOT_CA_REMOTE_NAME`
would collide with the renamed one, so it is not reflected.
"""

from collections.abc import Mapping
from typing import Any

from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, remote_metadata
from shared.wellknown import KUBE_ROOT_CA_CONFIGMAP, ROOT_CA_REMOTE_NAME

_CONTENT_FIELDS = ("data", "binaryData", "immutable")


def remote_configmap_name(local_name: str) -> str:
    """The remote name of a home ConfigMap (only `kube-root-ca.crt` changes)."""
    return ROOT_CA_REMOTE_NAME if local_name == KUBE_ROOT_CA_CONFIGMAP else local_name


def local_configmap_name(remote_name: str) -> str:
    """The home name of a reflected ConfigMap: `remote_configmap_name` undone."""
    return KUBE_ROOT_CA_CONFIGMAP if remote_name == ROOT_CA_REMOTE_NAME else remote_name


def is_reflectable_configmap(configmap: Mapping[str, Any]) -> bool:
    """False for a home ConfigMap whose name is taken by the renamed root CA remotely."""
    return (configmap.get("metadata") or {}).get("name") != ROOT_CA_REMOTE_NAME


def remote_configmap(
    local: Mapping[str, Any], remote_namespace: str, config: ReflectionConfig
) -> dict[str, Any]:
    """The desired remote copy of the home ConfigMap `local`."""
    name = remote_configmap_name((local.get("metadata") or {}).get("name", ""))
    remote: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": remote_metadata(local, remote_namespace, config, name=name),
    }
    for field in _CONTENT_FIELDS:
        if local.get(field) is not None:
            remote[field] = copied(local[field])
    return remote
