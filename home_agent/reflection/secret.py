"""Secrets, home → twin namespace (forge: `shared.forge.secret`): verbatim, except
service-account-token Secrets, which are never copied. The pods' token Secrets in the twin
namespaces are the token reflector's (`home_agent.reflection.token`) and are left alone."""

from __future__ import annotations

from annex.api_paths import core_path
from home_agent.reflection.reflector import KindRules
from shared.api.builtin import SECRETS
from shared.forge.secret import is_reflectable_secret, remote_secret
from shared.forge.token import is_token_secret

SECRET_RULES = KindRules(
    kind=SECRETS.kind, resource=SECRETS.resource,
    path=lambda namespace, name: core_path("secrets", namespace, name),
    forge=remote_secret, reflectable=is_reflectable_secret, owned_elsewhere=is_token_secret)
