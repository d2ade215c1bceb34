"""The reflection as one piece: every enabled kind's reflector and the companions beside them
(remote Events home, the pods' tokens), started, resynced and stopped together, and the pods'
wait for the copies they need (`required`). Their routes: `home_agent.routes`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from annex.controller import Controller
from annex.mirror import Key
from home_agent.agent import Agent
from home_agent.reflection.reflector import KindRules, Reflector
from home_agent.reflection.required import RequiredCopies
from shared.reflection_policy import ReflectionType


class Companion(Protocol):
    """A reflector that is not one kind's (remote Events home, the pods' tokens): its routes
    come after the kinds' reflectors' (`home_agent.routes`), and it shares their life cycle."""

    controller: Controller[Key]
    """Its reconciles, named as metrics call the companion."""

    def resync(self, namespace: str | None = None) -> None:
        """Look at every key again, or those of one home `namespace`."""

    async def run(self) -> None:
        """Its controller's workers (and what must come before them), until `controller.stop`."""


CompanionFactory = Callable[[Agent, Mapping[str, Reflector]], "Companion | None"]
"""(agent, the enabled kinds' reflectors by plural) → a companion, or None when disabled."""

C = TypeVar("C")


class Reflection:
    """Every enabled kind's reflector and companion (their routes: `home_agent.routes`)."""

    def __init__(self, agent: Agent, kinds: list[KindRules],
                 companions: Sequence[CompanionFactory] = ()) -> None:
        self.agent = agent
        config = agent.config
        self.reflectors: dict[str, Reflector] = {}
        for rules in kinds:
            workers = config.reflection_workers.get(rules.flag, 0)
            if workers > 0:  # 0 disables the kind: not even watched
                policy = ReflectionType(config.reflection_types.get(
                    rules.flag, ReflectionType.DENY_LIST))
                make = rules.reflector or Reflector
                self.reflectors[rules.plural] = make(agent, rules, workers, policy, agent.events)
        made = (factory(agent, self.reflectors) for factory in companions)
        self.companions: list[Companion] = [c for c in made if c is not None]
        self.required = RequiredCopies(self.reflectors)
        """The pods waiting for copies of what they need to start (`home_agent.pod`)."""

    def companion(self, kind: type[C]) -> C | None:
        """The running companion of that class, if it is enabled."""
        return next((c for c in self.companions if isinstance(c, kind)), None)

    def controllers(self) -> list[Controller[Key]]:
        """One per kind (named as its plural) and per companion."""
        return [*(r.controller for r in self.reflectors.values()),
                *(c.controller for c in self.companions)]

    def resync(self, namespace: str | None = None) -> None:
        """A VirtualNode (the skip lists) or the NamespaceMap (which namespaces are extended)
        changed: every key's outcome may have; or one home `namespace` was listed: what its keys
        decided before is looked at again."""
        for reflector in self.reflectors.values():
            reflector.resync(namespace)
        for companion in self.companions:
            companion.resync(namespace)

    async def run(self) -> None:
        """Every controller's workers, until `stop`."""
        await asyncio.gather(*(r.controller.run() for r in self.reflectors.values()),
                             *(companion.run() for companion in self.companions))

    def stop(self) -> None:
        for controller in self.controllers():
            controller.stop()
