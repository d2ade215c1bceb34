"""The reflected kinds, in one list: what `Reflection` is built from."""

from __future__ import annotations

from home_agent.agent import Agent
from home_agent.reflection.configmap import CONFIGMAP_RULES
from home_agent.reflection.endpointslice import ENDPOINTSLICE_RULES
from home_agent.reflection.ingress import INGRESS_RULES
from home_agent.reflection.reflector import KindRules
from home_agent.reflection.secret import SECRET_RULES
from home_agent.reflection.service import SERVICE_RULES
from home_agent.reflection.tokens import ReflectionWithTokens

KINDS: list[KindRules] = [
    CONFIGMAP_RULES, SECRET_RULES, SERVICE_RULES, ENDPOINTSLICE_RULES, INGRESS_RULES]


def reflection_for(agent: Agent) -> ReflectionWithTokens:
    """The kinds' reflectors, remote Events back home (`home_agent.reflection.events`) and the
    pods' service-account tokens (`home_agent.reflection.tokens`)."""
    return ReflectionWithTokens(agent, KINDS)
