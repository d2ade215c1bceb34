"""Ingresses, home → twin namespace (forge: `shared.forge.ingress`): verbatim, the ingress class
cleared so that the remote cluster's default class serves it."""

from __future__ import annotations

from annex.api_paths import group_path
from home_agent.reflection.reflector import KindRules
from shared.api.builtin import INGRESSES
from shared.forge.ingress import remote_ingress

INGRESS_RULES = KindRules(
    kind=INGRESSES.kind, resource=INGRESSES.resource,
    path=lambda namespace, name: group_path(*INGRESSES.resource, namespace, name),
    forge=remote_ingress)
