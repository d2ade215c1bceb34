"""EndpointSlices, home → twin namespace (forge: `shared.forge.endpointslice`).

The home EndpointSlice controller sees every pod, the offloaded ones included (on the virtual
node, with their remapped IPs); the remote one sees only the pods running there. So each home
slice is copied with only the endpoints the remote cluster cannot see by itself (not on this
agent's virtual node), home pod addresses remapped into where the remote reaches them
(`--home-pod-cidr` → `--remapped-home-pod-cidr`), under a managed-by label of our own (the remote
controller leaves such slices alone) and the Service's name label (the remote kube-proxy joins
them to the remote copy of the Service).

Policy: a slice follows its Service — reflected when the Service is, under the
Service policy (`--service-reflection-type`) — unless the slice is annotated itself. A slice whose
Service is not known (no service-name label, or Service reflection disabled so Services are not
watched) is judged by itself under `--endpointslice-reflection-type`. Since the decision depends
on the Service, a Service event whose decision changes requeues its slices (`service_keys`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from annex.api_paths import group_path
from annex.informers import Change
from annex.mirror import Key, Mirror
from home_agent.reflection.peering import Peering
from home_agent.reflection.reflector import KindRules, Reflector
from shared.api.builtin import ENDPOINTSLICES
from shared.forge.endpointslice import (
    EndpointDestination,
    is_reflectable_endpointslice,
    remote_endpointslice,
)
from shared.ipremap import CidrRemap
from shared.reflection_policy import (
    ReflectionType,
    endpointslice_service_name,
    should_reflect,
    should_reflect_endpointslice,
)


class EndpointSliceReflector(Reflector):
    def __init__(self, peering: Peering, rules: KindRules, workers: int, policy: ReflectionType,
                 home: Mirror, remote: Mirror, *, services: Mirror, service_policy: ReflectionType,
                 remap: CidrRemap | None,
                 node_names: Callable[[], Collection[str]]) -> None:
        super().__init__(peering, rules, workers, policy, home, remote)
        self.service_policy = service_policy
        """`--service-reflection-type`: a slice follows its Service's decision."""
        self.remap = remap
        """Home pod addresses → where the remote reaches them (`--home-pod-cidr` →
        `--remapped-home-pod-cidr`), if they overlap the remote's."""
        self.services = services
        """The Service reflector's home mirror (empty when Services are not reflected)."""
        self.node_names = node_names
        """This agent's virtual nodes' names, whose endpoints run in the destination."""
        self._slices_of: dict[Key, set[str]] = {}
        """(namespace, Service name) → the names of its home slices."""
        self._service_of: dict[Key, Key] = {}

    # --- keyers (declared in `home_agent.routes`) -------------------------------------------

    def home_keys(self, change: Change) -> Iterable[Key]:
        """The slice, indexed by its Service."""
        key = change.key
        service = None if change.deleted else endpointslice_service_name(change.obj)
        old = self._service_of.pop(key, None)
        if old is not None:
            self._slices_of.get(old, set()).discard(key[1])
        if service is not None:
            owner = (key[0], service)
            self._service_of[key] = owner
            self._slices_of.setdefault(owner, set()).add(key[1])
        return (key,)

    def service_keys(self, change: Change) -> Iterable[Key]:
        """A Service's slices, when its change changes their decision (nothing else of the
        Service is read); reads `change.before`."""
        if self._service_decision(change.before) == self._service_decision(
                self.services.get(change.key)):
            return ()
        return [(change.key[0], name) for name in self._slices_of.get(change.key, ())]

    def _service_decision(self, service: Mapping[str, Any] | None) -> bool | None:
        return None if service is None else should_reflect(service, self.service_policy)

    # --- reconcile --------------------------------------------------------------------------

    def decide(self, local: Mapping[str, Any]) -> bool:
        name = endpointslice_service_name(local)
        namespace = (local.get("metadata") or {}).get("namespace") or ""
        service = self.services.get((namespace, name)) if name is not None else None
        policy = self.service_policy if service is not None else self.policy
        return should_reflect_endpointslice(local, service, policy)

    def desired(self, local: Mapping[str, Any], remote_namespace: str) -> dict[str, Any]:
        # Endpoints on this agent's virtual node run in the destination, which has its own.
        destination = EndpointDestination(
            virtual_node_names=frozenset(self.node_names()))
        return remote_endpointslice(local, remote_namespace, self.config(), destination,
                                    self.remap)


ENDPOINTSLICE_RULES = KindRules(
    kind=ENDPOINTSLICES.kind, resource=ENDPOINTSLICES.resource,
    path=lambda namespace, name: group_path(*ENDPOINTSLICES.resource, namespace, name),
    reflectable=is_reflectable_endpointslice)
