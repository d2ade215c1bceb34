"""The reflection as one piece: every enabled kind's reflector and the companions beside them
(remote Events home, the pods' tokens), started, resynced and stopped together, and the pods'
wait for the copies they need (`required`). Their routes: `home_agent.routes`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from annex.controller import Controller
from annex.mirror import Key
from home_agent.reflection.reflector import Reflector
from home_agent.reflection.required import RequiredCopies


class Companion(Protocol):
    """A reflector that is not one kind's (remote Events home, the pods' tokens): its routes
    come after the kinds' reflectors' (`home_agent.routes`), and it shares their life cycle."""

    controller: Controller[Key]
    """Its reconciles, named as metrics call the companion."""

    def resync(self, namespace: str | None = None) -> None:
        """Look at every key again, or those of one home `namespace`."""

    async def run(self) -> None:
        """Its controller's workers (and what must come before them), until `controller.stop`."""


C = TypeVar("C")


class Reflection:
    """Every enabled kind's reflector and companion (their routes: `home_agent.routes`)."""

    def __init__(self, reflectors: Mapping[str, Reflector],
                 companions: Sequence[Companion] = ()) -> None:
        self.reflectors = dict(reflectors)
        """The enabled kinds' reflectors, by plural."""
        self.companions = list(companions)
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
