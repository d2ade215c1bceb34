"""Ingresses, home → twin namespace (forge: `shared.forge.ingress`): verbatim, the ingress class
cleared so that the remote cluster's default class serves it."""

from __future__ import annotations

from annex.api_paths import group_path
from home_agent.reflection.reflector import KindRules
from shared.forge.ingress import remote_ingress

INGRESSES = ("networking.k8s.io", "v1", "ingresses")

INGRESS_RULES = KindRules(
    kind="Ingress", resource=INGRESSES,
    path=lambda namespace, name: group_path(*INGRESSES, namespace, name),
    forge=remote_ingress)
