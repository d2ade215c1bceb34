"""Services, home → twin namespace (forge: `shared.forge.service`): verbatim except the fields the
remote cluster allocates (clusterIPs, loadBalancerIP, nodePorts unless forced); never
`default/kubernetes`. What the remote API server fills in is left to it (`needs_update` ignores
those fields), so the copy is written once, not on every resync."""

from __future__ import annotations

from annex.api_paths import core_path
from home_agent.reflection.reflector import KindRules
from shared.api.builtin import SERVICES
from shared.forge.service import is_reflectable_service, remote_service

SERVICE_RULES = KindRules(
    kind=SERVICES.kind, resource=SERVICES.resource,
    path=lambda namespace, name: core_path("services", namespace, name),
    forge=remote_service, reflectable=is_reflectable_service)
