"""ConfigMaps, home → twin namespace (forge: `shared.forge.configmap`): verbatim, the home
`kube-root-ca.crt` under another name so that it never clashes with the remote one."""

from __future__ import annotations

from annex.api_paths import core_path
from home_agent.reflection.reflector import KindRules
from shared.api.builtin import CONFIGMAPS
from shared.forge.configmap import (
    is_reflectable_configmap,
    local_configmap_name,
    remote_configmap,
    remote_configmap_name,
)

CONFIGMAP_RULES = KindRules(
    kind=CONFIGMAPS.kind, resource=CONFIGMAPS.resource,
    path=lambda namespace, name: core_path("configmaps", namespace, name),
    forge=remote_configmap, remote_name=remote_configmap_name, local_name=local_configmap_name,
    reflectable=is_reflectable_configmap)
