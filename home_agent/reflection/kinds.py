"""The reflected kinds and the companions beside them, in one place: what `Reflection` is built
from. The kinds are the agent's `REFLECTED_KINDS` (their flags), in that order: each has its
module here, named as its flag, whose `<FLAG>_RULES` tell the generic reflector what is
particular to it."""

from __future__ import annotations

from home_agent.agent import Agent
from home_agent.reflection.configmap import CONFIGMAP_RULES
from home_agent.reflection.endpointslice import ENDPOINTSLICE_RULES
from home_agent.reflection.event import event_reflector_for
from home_agent.reflection.ingress import INGRESS_RULES
from home_agent.reflection.manager import CompanionFactory, Reflection
from home_agent.reflection.persistentvolumeclaim import PERSISTENTVOLUMECLAIM_RULES
from home_agent.reflection.reflector import KindRules
from home_agent.reflection.secret import SECRET_RULES
from home_agent.reflection.service import SERVICE_RULES
from home_agent.reflection.token import token_reflector_for

KINDS: list[KindRules] = [CONFIGMAP_RULES, SECRET_RULES, SERVICE_RULES, ENDPOINTSLICE_RULES,
                          INGRESS_RULES, PERSISTENTVOLUMECLAIM_RULES]
COMPANIONS: list[CompanionFactory] = [
    event_reflector_for,  # remote Events back home (`home_agent.reflection.event`)
    token_reflector_for,  # the pods' service-account tokens (`home_agent.reflection.token`)
]


def reflection_for(agent: Agent) -> Reflection:
    return Reflection(agent, KINDS, COMPANIONS)
