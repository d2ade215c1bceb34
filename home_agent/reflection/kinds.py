"""The reflected kinds and the companions beside them, in one place: what `Reflection` is built
from. The kinds are the agent's `REFLECTED_KINDS` (their flags): each has its module here, named
as its flag, whose `<FLAG>_RULES` tell the generic reflector what is particular to it."""

from __future__ import annotations

from importlib import import_module

from home_agent.agent import Agent
from home_agent.config import REFLECTED_KINDS
from home_agent.reflection.event import event_reflector_for
from home_agent.reflection.manager import CompanionFactory, Reflection
from home_agent.reflection.reflector import KindRules
from home_agent.reflection.token import token_reflector_for


def rules_of(flag: str) -> KindRules:
    """`<FLAG>_RULES` of module `home_agent.reflection.<flag>`."""
    name = f"{flag.upper()}_RULES"
    rules = getattr(import_module(f"{__package__}.{flag}"), name, None)
    if not isinstance(rules, KindRules) or rules.flag != flag:
        raise ImportError(f"home_agent.reflection.{flag} has no {name} for kind {flag}")
    return rules


KINDS: list[KindRules] = [rules_of(flag) for flag in REFLECTED_KINDS]
COMPANIONS: list[CompanionFactory] = [
    event_reflector_for,  # remote Events back home (`home_agent.reflection.event`)
    token_reflector_for,  # the pods' service-account tokens (`home_agent.reflection.token`)
]


def reflection_for(agent: Agent) -> Reflection:
    return Reflection(agent, KINDS, COMPANIONS)
