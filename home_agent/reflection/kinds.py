"""The reflected kinds, in one list: what `Reflection` is built from."""

from __future__ import annotations

from home_agent.agent import Agent
from home_agent.reflection.configmap import CONFIGMAP_RULES
from home_agent.reflection.endpointslice import ENDPOINTSLICE_RULES
from home_agent.reflection.events import ReflectionWithEvents
from home_agent.reflection.ingress import INGRESS_RULES
from home_agent.reflection.reflector import KindRules
from home_agent.reflection.secret import SECRET_RULES
from home_agent.reflection.service import SERVICE_RULES

KINDS: list[KindRules] = [
    CONFIGMAP_RULES, SECRET_RULES, SERVICE_RULES, ENDPOINTSLICE_RULES, INGRESS_RULES]


def reflection_for(agent: Agent) -> ReflectionWithEvents:
    """The kinds' reflectors, and remote Events back home (`home_agent.reflection.events`)."""
    return ReflectionWithEvents(agent, KINDS)
