"""The generic reflector: home objects of one kind, in extended namespaces → their copies in
the twin namespaces.

Per kind: a home mirror and a remote mirror (the agent's informers', fed by the watches on both
sides) and a `Controller` of home keys (namespace, name) with its own workers, so a slow or
failing kind never holds back another, and a failing object never holds back another (its key
backs off alone; the failure is reported as a FailedReflection Event on its home object). A kind
whose decisions need more than its rules (the agent's state, other kinds' objects) has a
subclass of its own (EndpointSlices, PersistentVolumeClaims).

One reconcile converges one home key from both mirrors:
- namespace not extended (mapping not Accepted), or not offloaded here (its home objects not
  watched: their reads are granted to the agents a NamespaceOffloading selects) → nothing:
  copies live in the twin namespace, which goes with the extension;
- remote object exists and is not ours (`is_owned`) → never touched; a FailedReflection Warning
  Event on the home object (when it should be reflected);
- home object gone (confirmed by the home API server), or not reflected (policy, annotations,
  kind rules) → our copy is deleted;
- otherwise the copy is created, recreated (`must_recreate`) or overwritten on any difference
  (`needs_update`), drift included.
The skip lists are read at each reconcile (flags merged with the VirtualNode's offloadingPatch),
so editing them takes effect live: a VirtualNode change requeues every key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from annex.api_errors import error_message
from annex.controller import Controller, Result
from annex.informers import Change, Resource
from annex.mirror import Key, Mirror, key_of
from annex.writes import Foreign, confirmed_gone, create_or_refuse, delete_owned, replace_or_create
from home_agent.reflection.peering import Peering
from shared.forge.compare import must_recreate, needs_update, updated_remote
from shared.forge.metadata import ReflectionConfig
from shared.reflection_policy import ReflectionType, should_reflect
from shared.wellknown import FAILED_REFLECTION_REASON

log = logging.getLogger(__name__)

FOREIGN_METADATA = frozenset({"namespace", "name", "uid", "resourceVersion", "labels",
                              "annotations"})
"""What a reflector keeps of a remote object that is not its own."""

Forge = Callable[[Mapping[str, Any], str, ReflectionConfig], dict[str, Any]]


def namespace_of(key: Key) -> str:
    return key[0]


@dataclass(frozen=True)
class KindRules:
    """What one kind's module tells the generic reflector."""

    kind: str
    """As in the objects' `kind` ("ConfigMap")."""
    resource: Resource
    path: Callable[[str, str], str]
    """(namespace, name) → API path; name "" for the collection."""
    forge: Forge | None = None
    """None only for a kind whose `Reflector` subclass forges by itself (`Reflector.desired`)."""
    remote_name: Callable[[str], str] = lambda name: name
    local_name: Callable[[str], str] = lambda name: name
    reflectable: Callable[[Mapping[str, Any]], bool] = lambda obj: True
    """Kind rules on top of the policy (e.g. no service-account-token Secrets)."""
    owned_elsewhere: Callable[[Mapping[str, Any]], bool] = lambda obj: False
    """Remote objects of this kind that another reflector writes (the pods' token Secrets):
    never touched here, as if foreign."""

    @property
    def flag(self) -> str:
        """The flag prefix (`--<flag>-reflection-workers`, `--<flag>-reflection-type`), as
        Liqo's: the kind in lower case."""
        return self.kind.lower()

    @property
    def plural(self) -> str:
        return self.resource[2]

    @property
    def api_version(self) -> str:
        group, version, _ = self.resource
        return f"{group}/{version}" if group else version


class Reflector:
    def __init__(self, peering: Peering, rules: KindRules, workers: int, policy: ReflectionType,
                 home: Mirror, remote: Mirror) -> None:
        self.peering = peering
        self.rules = rules
        self.policy = policy
        self.home = home
        """The kind's home objects, in the namespaces offloaded here."""
        self.remote = remote
        """The kind's objects in the twin namespaces, ours whole (`kept_remote`)."""
        self.controller: Controller[Key] = Controller(
            rules.plural, self.reconcile, workers=workers, synced=peering.synced,
            ready=peering.key_ready, gate=namespace_of, on_error=self._report_failure)

    # --- keyers (declared in `home_agent.routes`) -------------------------------------------

    def home_keys(self, change: Change) -> Iterable[Key]:
        return (change.key,)

    def kept_remote(self, obj: dict[str, Any]) -> dict[str, Any]:
        """What the remote mirror keeps: what is not ours is only ever left alone, which its
        metadata decides; the rest is not kept (the twin namespaces hold a token Secret per pod,
        the token reflector's)."""
        if self._owned(obj):
            return obj
        return {"metadata": {key: value for key, value in (obj.get("metadata") or {}).items()
                             if key in FOREIGN_METADATA}}

    def remote_keys(self, change: Change) -> Iterable[Key]:
        keys = self._home_keys(*change.key)
        if self.rules.owned_elsewhere(change.obj) and not any(map(self.home.has, keys)):
            # Another reflector's (a pod's token Secret, one a pod): it matters here only as a
            # name a home object of that name would find taken, and that object's own
            # changes look again.
            return ()
        return keys

    def _home_keys(self, namespace: str, name: str) -> tuple[Key, ...]:
        home_namespace = self.peering.twins.home_of(namespace)
        if home_namespace is None:
            return ()
        return ((home_namespace, self.rules.local_name(name)),)

    def resync(self, namespace: str | None = None) -> None:
        """Look at every known object again (namespace mappings or skip lists changed), or
        every object of one home `namespace` (its home objects are listed now)."""
        for key in self.home.keys():
            if namespace is None or key[0] == namespace:
                self.controller.add(key)
        for remote_key in self.remote.keys():
            for key in self._home_keys(*remote_key):
                if namespace is None or key[0] == namespace:
                    self.controller.add(key)

    # --- reconcile --------------------------------------------------------------------------

    def config(self) -> ReflectionConfig:
        return self.peering.reflection_config()

    def _owned(self, obj: Mapping[str, Any]) -> bool:
        return self.peering.owns(obj) and not self.rules.owned_elsewhere(obj)

    def wanted(self, local: Mapping[str, Any] | None) -> bool:
        return (local is not None and not (local.get("metadata") or {}).get("deletionTimestamp")
                and self.rules.reflectable(local) and self.decide(local))

    def decide(self, local: Mapping[str, Any]) -> bool:
        """The policy and the reflection annotations."""
        return should_reflect(local, self.policy)

    def copy_pending(self, key: Key, remote_namespace: str) -> bool:
        """The home object `key` is to be copied into `remote_namespace` (it exists and is
        wanted) and the remote mirror holds nothing of that name yet. A foreign object of that
        name counts as there: it is what a remote pod would use."""
        if self.remote.has((remote_namespace, self.rules.remote_name(key[1]))):
            return False
        return self.wanted(self.home.get(key))

    def desired(self, local: Mapping[str, Any], remote_namespace: str) -> dict[str, Any]:
        """The copy `local` should have in `remote_namespace`."""
        assert self.rules.forge is not None, f"{self.rules.kind}: no forge"
        return self.rules.forge(local, remote_namespace, self.config())

    async def reconcile(self, key: Key) -> Result | None:
        """Converge one home key; a kind may ask to be retried (`Result`)."""
        namespace, name = key
        remote_namespace = self.peering.twins.accepted(namespace)
        if remote_namespace is None or not self.peering.offloaded.watched(namespace):
            return None  # not offloaded here (any more): the copies go with the twin
        local = self.home.get(key)
        remote_name = self.rules.remote_name(name)
        current = self.remote.get((remote_namespace, remote_name))
        wanted = self.wanted(local)
        if current is not None and not self._owned(current):
            if wanted and local is not None:
                await self._refuse(local, remote_namespace, remote_name)
            return None
        if not wanted or local is None:
            # A mirror that missed the home object must never cost a copy a remote pod may be
            # using (as for ShadowPods, Liqo #2748): the home API server confirms it is gone.
            if current is not None and (local is not None or await confirmed_gone(
                    self.peering.home, self.rules.path(*key))):
                await self._delete(current)
            return None
        desired = self.desired(local, remote_namespace)
        if current is None:
            await self._create(local, desired)
        elif must_recreate(current, desired):
            await self._delete(current)
            await self._create(local, desired)
        elif needs_update(current, desired):
            await replace_or_create(
                self.peering.remote, self.rules.path(remote_namespace, remote_name),
                updated_remote(current, desired), lambda: self._create(local, desired))
        return None

    async def _create(self, local: Mapping[str, Any], desired: dict[str, Any]) -> None:
        namespace, name = key_of(desired)
        try:
            await create_or_refuse(self.peering.remote, self.rules.path(namespace, ""),
                                   self.rules.path(namespace, name), desired, self._owned)
        except Foreign:
            await self._refuse(local, namespace, name)

    async def _delete(self, current: Mapping[str, Any]) -> None:
        await delete_owned(self.peering.remote, self.rules.path(*key_of(dict(current))),
                           (current.get("metadata") or {}).get("uid"))

    async def _refuse(self, local: Mapping[str, Any], namespace: str, name: str) -> None:
        message = (f"remote {self.rules.kind} {namespace}/{name} exists and was not created by "
                   f"this cluster: left alone, not reflected")
        log.warning("%s", message)
        await self._report(local, message)

    async def _report(self, local: Mapping[str, Any], message: str) -> None:
        """A FailedReflection Warning Event on the home object (once per distinct message)."""
        await self.peering.events.record({**local, "apiVersion": self.rules.api_version,
                                  "kind": self.rules.kind},
                                 FAILED_REFLECTION_REASON, message)

    async def _report_failure(self, key: Key, error: Exception) -> None:
        """A failed reconcile (the controller logs it and backs the key off), on its object."""
        local = self.home.get(key)
        if local is not None:
            await self._report(local, f"reflection failed (retrying): {error_message(error)}")
