"""The reflected kinds, in one list: what `Reflection` is built from."""

from __future__ import annotations

from home_agent.agent import Agent
from home_agent.reflection.configmap import CONFIGMAP_RULES
from home_agent.reflection.reflector import KindRules, Reflection
from home_agent.reflection.secret import SECRET_RULES

KINDS: list[KindRules] = [CONFIGMAP_RULES, SECRET_RULES]


def reflection_for(agent: Agent) -> Reflection:
    return Reflection(agent, KINDS)
