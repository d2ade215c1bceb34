"""ConfigMaps, home → twin namespace (forge: `shared.forge.configmap`): verbatim, the home
`kube-root-ca.crt` under another name so that it never clashes with the remote one."""

from __future__ import annotations

from annex.api_paths import core_path
from annex.informers import Resource
from home_agent.reflection.reflector import KindRules
from shared.forge.configmap import (
    is_reflectable_configmap,
    local_configmap_name,
    remote_configmap,
    remote_configmap_name,
)

CONFIGMAPS: Resource = ("", "v1", "configmaps")

CONFIGMAP_RULES = KindRules(
    kind="ConfigMap", resource=CONFIGMAPS,
    path=lambda namespace, name: core_path("configmaps", namespace, name),
    forge=remote_configmap, remote_name=remote_configmap_name, local_name=local_configmap_name,
    reflectable=is_reflectable_configmap)
