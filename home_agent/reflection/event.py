"""Remote Events back home: the Events of the accepted twin
namespaces that are about our copies of home objects, copied into the home namespace and attached
to the home object (forge: `shared.forge.event`). The only kind that flows remote → home.

Which remote Events come home:
- about a pod: the home pod of the same name is bound to this agent's virtual node (the remote
  pod is its offloaded copy: the enforcer names it after the ShadowPod, named after the home pod);
- about a ConfigMap, Secret, Service, EndpointSlice or Ingress: that kind is reflected (its
  reflector runs), the remote object is our copy (ownership labels, and the Event's uid is the
  copy's) and its home object exists; the home name follows the kind's `local_name` rule (the
  renamed `kube-root-ca.crt`);
- never about anything else (ShadowPods, foreign objects, objects without a home counterpart),
  and never an Event that is itself a reflected copy (no loops).

One home copy per remote Event, named deterministically (`home_event_name`): a restart finds
the copies it made. Our copies at home are listed (a label selector on the ownership pair, their
metadata only: each carries the digest of what it says, `shared.forge.event`), a namespace at a
time as this agent starts watching it once its replica leads (the agent may read no other
namespace's Events), and are not watched: from then
on the answers to its own writes are all it needs to know of them, as Kubernetes' own Event
recorders never watch what they record. A watch would only echo those writes back, four Events
a pod (and the home API server would send each). So the reflector compares without reading and
writes nothing while nothing changed; a copy is updated when the remote Event changes (count,
lastTimestamp, series...) and deleted when the remote Event is gone (expired or deleted
remotely, also while the agent was down: the relist tells). A copy that expired at home
meanwhile is created again by its next update; one changed behind the agent's back is read
again when the write over it conflicts. A copy whose home object went is left alone: Events
outlive their objects at home too.

The Event may come before what it is about (watch streams of different kinds are not ordered):
Events are indexed by the object they are about, and a change of that object (home or remote)
looks at them again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from annex.api_errors import error_message, status_of
from annex.api_paths import core_path
from annex.controller import DONE, Controller, Result
from annex.informers import Change
from annex.kubeapi import JSON, METADATA_LIST
from annex.listwatch import list_objects
from annex.mirror import Key, Mirror, discard, key_of
from annex.writes import Foreign, create_or_refuse, delete_owned, replace_or_create
from home_agent.reflection.event_copies import Copies
from home_agent.reflection.peering import Peering
from home_agent.reflection.reflector import Reflector, namespace_of
from shared.api.builtin import EVENTS, PODS
from shared.forge.compare import updated_remote
from shared.forge.event import (
    event_needs_update,
    has_copy_digest,
    home_copy_summary,
    home_event,
    home_event_name,
    involved_kind,
    is_reflectable_event,
    object_reference,
    remote_event_name,
)
from shared.ownership import ownership_selector

log = logging.getLogger(__name__)


REFUSED = (400, 422)
"""The home API server's answers to a copy it will never take (e.g. an invalid remote Event)."""

About = tuple[str, str, str]
"""(remote namespace, involved kind, remote name): the object remote Events are about."""


class EventReflector:
    """Remote Events → their home copies. Keys are home copy keys (namespace, name)."""

    name = "events"

    def __init__(self, peering: Peering, reflectors: Mapping[str, Reflector], workers: int, *,
                 remote: Mirror, selected_namespaces: Callable[[], frozenset[str]]) -> None:
        self.peering = peering
        self.reflectors = reflectors
        """The kinds' reflectors: their mirrors tell which remote objects are our copies."""
        self.remote = remote
        """Events of the accepted twin namespaces, as `remote_event_kept`."""
        self.selected_namespaces = selected_namespaces
        """The home namespaces this agent offloads (their copies wait for their listing)."""
        self.home = Copies()
        """Our copies at home: as listed when their namespace's watch started, then as our
        writes' answers left them."""
        self.listed: set[str] = set()
        """The namespaces whose copies are listed: nothing is compared with a mirror still
        filling."""
        self._watched_changed = asyncio.Event()
        peering.offloaded.subscribe(self._watched_changed.set)
        self.controller: Controller[Key] = Controller(
            self.name, self.reconcile, workers=workers, synced=peering.synced,
            ready=self._copies_listed, gate=namespace_of)
        self._about: dict[About, set[str]] = {}
        """What remote Events are about → their names (in the namespace of what they are
        about: names rather than keys, the mirror keeps no key tuples)."""
        self._shortened: dict[Key, Key] = {}
        """Home copy key → remote Event key, for the few copies whose names were shortened (the
        others name their remote Event: `remote_event_name`)."""
        self._pod_uids: dict[str, dict[str, str]] = {}
        """Home namespace → name → uid of the pods bound to the virtual node, which a copy of
        their Events names: reading it from the pods' mirror decoded the whole pod, four times
        a pod."""

    # --- keyers (declared in `home_agent.routes`) -------------------------------------------

    def _home_key(self, remote_key: Key) -> Key | None:
        home_namespace = self.peering.twins.home_of(remote_key[0])
        if home_namespace is None:
            return None
        return (home_namespace,
                home_event_name(remote_key[1], self.peering.remote_cluster_id))

    def _source(self, home_key: Key) -> Key | None:
        """The key of the remote Event a home copy key stands for."""
        shortened = self._shortened.get(home_key)
        if shortened is not None:
            return shortened
        remote_namespace = self.peering.twins.mapped(home_key[0])
        name = remote_event_name(home_key[1], self.peering.remote_cluster_id)
        return None if remote_namespace is None or name is None else (remote_namespace, name)

    @staticmethod
    def _about_of(remote_event: Mapping[str, Any]) -> About:
        namespace, _ = key_of(dict(remote_event))
        involved = remote_event.get("involvedObject") or {}
        return (namespace, str(involved.get("kind") or ""), str(involved.get("name") or ""))

    def _index(self, remote_key: Key, home_key: Key, remote_event: Mapping[str, Any]) -> None:
        self._about.setdefault(self._about_of(remote_event), set()).add(remote_key[1])
        if remote_event_name(home_key[1], self.peering.remote_cluster_id) != remote_key[1]:
            self._shortened[home_key] = remote_key

    def _unindex(self, remote_key: Key, home_key: Key, remote_event: Mapping[str, Any]) -> None:
        about = self._about_of(remote_event)
        names = self._about.get(about, set())
        names.discard(remote_key[1])
        if not names:
            self._about.pop(about, None)
        if self._shortened.get(home_key) == remote_key:
            del self._shortened[home_key]

    def remote_keys(self, change: Change) -> Iterable[Key]:
        """A remote Event's home copy, indexed by what the Event is about (declared comparing:
        an update may change that, in the legacy Event API)."""
        home_key = self._home_key(change.key)
        if home_key is None:
            return ()
        if change.before is not None:
            self._unindex(change.key, home_key, change.before)
        if not change.deleted:
            self._index(change.key, home_key, change.obj)
        return (home_key,)

    def resync(self, namespace: str | None = None) -> None:
        """The namespace mapping or the skip lists changed: index and look at everything; or
        one home `namespace` was listed: look at its copies and remote Events again."""
        if namespace is not None:
            keys = {key for key in self.home.keys() if key[0] == namespace}
            for remote_key in self.remote.keys():
                home_key = self._home_key(remote_key)
                if home_key is not None and home_key[0] == namespace:
                    keys.add(home_key)
            for key in keys:
                self.controller.add(key)
            return
        self._about.clear()
        self._shortened.clear()
        keys = set(self.home.keys())
        for remote_key in self.remote.keys():
            home_key, remote_event = self._home_key(remote_key), self.remote.get(remote_key)
            if home_key is not None and remote_event is not None:
                self._index(remote_key, home_key, remote_event)
                keys.add(home_key)
        for key in keys:
            self.controller.add(key)

    def home_object_keys(self, kind: str, change: Change) -> Iterable[Key]:
        """A home object of `kind` came or went: its Events may now come home (or their copies
        be attached to a new home object). An update changes nothing a copy reads of it (its
        name and uid: an object entering or leaving a watch's selection is ADDED or DELETED),
        and a pod's status changes are most of the agent's events."""
        if kind == "Pod":
            self._note_pod_uid(change)
        if change.event_type == "MODIFIED":
            return []
        namespace, name = change.key
        reflector = self._reflector(kind)
        if reflector is not None:
            name = reflector.rules.remote_name(name)
        return self._about_keys(self.peering.twins.mapped(namespace), kind, name)

    def _note_pod_uid(self, change: Change) -> None:
        namespace, name = change.key
        if change.deleted:
            discard(self._pod_uids, change.key)
        else:
            uid = (change.obj.get("metadata") or {}).get("uid")
            self._pod_uids.setdefault(namespace, {})[name] = str(uid or "")

    def remote_object_keys(self, kind: str, change: Change) -> Iterable[Key]:
        """Our remote copy of a `kind` object changed: its Events may now come home."""
        return self._about_keys(change.key[0], kind, change.key[1])

    def _reflector(self, kind: str) -> Reflector | None:
        return next((r for r in self.reflectors.values() if r.rules.kind == kind), None)

    def _about_keys(self, remote_namespace: str | None, kind: str, name: str) -> list[Key]:
        if remote_namespace is None:
            return []
        names = self._about.get((remote_namespace, kind, name), ())
        keys = [self._home_key((remote_namespace, event_name)) for event_name in names]
        return [key for key in keys if key is not None]

    def _owned(self, obj: Mapping[str, Any]) -> bool:
        return self.peering.owns(obj)

    def home_reference(self, home_namespace: str, remote_event: Mapping[str, Any]
                       ) -> dict[str, Any] | None:
        """The home object `remote_event` is about, as an object reference; None when the
        Event stays remote (see the module docstring)."""
        if not is_reflectable_event(remote_event):
            return None
        remote_namespace, kind, name = self._about_of(remote_event)
        involved = remote_event.get("involvedObject") or {}
        if (involved.get("namespace") or remote_namespace) != remote_namespace:
            return None
        api_version, _ = involved_kind(remote_event)
        if (api_version, kind) == ("v1", "Pod"):  # bound to our virtual node
            uid = self._pod_uids.get(home_namespace, {}).get(name)
            return None if uid is None else object_reference(
                {**PODS.type_meta(),
                 "metadata": {"namespace": home_namespace, "name": name, "uid": uid or None}})
        reflector = next((r for r in self.reflectors.values() if r.rules.kind == kind
                          and r.rules.api_version == api_version), None)
        if reflector is None:
            return None
        copy = reflector.remote.get((remote_namespace, name))
        if copy is None or not self._owned(copy):
            return None
        if involved.get("uid") and involved["uid"] != (copy.get("metadata") or {}).get("uid"):
            return None  # about an earlier object of that name
        local = reflector.home.get((home_namespace, reflector.rules.local_name(name)))
        if local is None:
            return None
        return object_reference({**local, "apiVersion": api_version, "kind": kind})

    # --- the copies at home ----------------------------------------------------------------

    async def run(self) -> None:
        """List the copies of each namespace as it starts being watched, and reconcile, until
        `controller.stop` (a namespace's keys wait for its listing)."""
        listing = asyncio.create_task(self._follow_namespaces())
        try:
            await self.controller.run()
        finally:
            listing.cancel()

    def _copies_listed(self, key: Key) -> bool:
        """A copy's namespace is neither offloaded here nor watched, or its copies are
        listed."""
        namespace = key[0]
        return namespace in self.listed or not (
            self.peering.offloaded.watched(namespace)
            or namespace in self.selected_namespaces())

    async def _follow_namespaces(self) -> None:
        """The copies of every namespace watched listed (one listing a namespace: one still
        refused its reads holds back no other), those of the others forgotten."""
        listings: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                self._watched_changed.clear()
                watched = self.peering.offloaded.namespaces()
                for namespace in sorted(set(listings) - watched):
                    listings.pop(namespace).cancel()
                    self.listed.discard(namespace)
                    self.home.forget(namespace)
                for namespace in sorted(watched - set(listings)):
                    listings[namespace] = asyncio.create_task(
                        self.list_copies(namespace), name=f"event-copies-{namespace}")
                await self._watched_changed.wait()
        finally:
            for task in listings.values():
                task.cancel()
            await asyncio.gather(*listings.values(), return_exceptions=True)

    async def list_copies(self, namespace: str) -> None:
        """Our copies in `namespace` into `home`, again until it succeeds. Their metadata only
        (their digests are in their annotations), unless some carry none (made by an older
        agent): then once more whole, and those are judged by their content rather than
        rewritten."""
        query = {"labelSelector": ownership_selector(self.peering.home_cluster_id,
                                                     self.peering.remote_cluster_id)}
        accept, delay = METADATA_LIST, 0.5
        undigested = 0

        def forget() -> None:
            nonlocal undigested
            self.home.forget(namespace)
            undigested = 0

        def listed(copy: dict[str, Any]) -> None:
            nonlocal undigested
            undigested += not has_copy_digest(copy)
            self._known(key_of(copy), copy)

        while True:
            forget()
            try:
                await list_objects(self.peering.home, core_path(EVENTS.plural, namespace), query,
                                   listed, forget, accept=accept)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - listed again after a backoff
                log.warning("listing the home Event copies in %s failed (retry in %.1fs): %s",
                            namespace, delay, error_message(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                continue
            if accept == JSON or not undigested:
                break
            log.info("%d home Event copies in %s carry no digest: listing them whole",
                     undigested, namespace)
            accept = JSON
        self.listed.add(namespace)
        log.info("%d home Event copies listed in %s", sum(
            1 for key in self.home.keys() if key[0] == namespace), namespace)
        self.resync(namespace)  # a copy whose remote Event went meanwhile goes too

    def _known(self, key: Key, copy: Mapping[str, Any] | None) -> None:
        """What the home API server answered (or showed) of the copy at `key`: ours (None: it
        is not there, or not ours)."""
        self.home.set(key, None if copy is None else home_copy_summary(copy))

    # --- reconcile --------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result:
        try:
            await self._converge(key, self.home.get(key))
        except Exception as error:
            if status_of(error) not in REFUSED:
                raise
            # Retrying cannot help; the remote Event's next change tries again.
            log.warning("remote Event not reflected home as %s/%s: %s", key[0], key[1],
                        error_message(error))
            return Result(outcome="refused")
        return DONE

    async def _converge(self, key: Key, current: dict[str, Any] | None) -> None:
        home_namespace, _ = key
        remote_key = self._source(key)
        remote_event = self.remote.get(remote_key) if remote_key is not None else None
        remote_namespace = self.peering.twins.accepted(home_namespace)
        if remote_namespace is None or not self.peering.offloaded.watched(home_namespace):
            return  # not (or no longer) extended here: copies expire at home like any Event
        if remote_event is None or remote_key is None:
            if current is not None:  # ours: `Copies` holds no other
                await self._delete(current)
            return
        if remote_key[0] != remote_namespace:
            return
        reference = self.home_reference(home_namespace, remote_event)
        if reference is None:
            return
        desired = home_event(remote_event, reference, self.peering.reflection_config())
        if current is None:
            await self._create(desired)
        elif event_needs_update(current, desired):
            await self._replace(current, desired)

    async def _create(self, desired: dict[str, Any]) -> None:
        key = key_of(desired)
        try:
            existing, created = await create_or_refuse(
                self.peering.home, core_path("events", key[0]), core_path("events", *key),
                desired, self._owned)
        except Foreign:
            self._known(key, None)
            log.warning("home Event %s/%s exists and is not ours: left alone", *key)
            return
        self._known(key, existing)
        # Not created: our copy, made since the listing (by a replica that led before).
        if not created and event_needs_update(existing, desired):
            await self._replace(existing, desired)

    async def _replace(self, current: Mapping[str, Any], desired: dict[str, Any]) -> None:
        """`current`: the copy, or its summary (its metadata is what the write keeps)."""
        key = key_of(desired)
        path = core_path("events", *key)
        try:
            # Created anew if it expired at home meanwhile (Events live an hour there).
            answer = await replace_or_create(
                self.peering.home, path,
                updated_remote({"metadata": current.get("metadata") or {}}, desired),
                lambda: self._create(desired))
        except Exception as error:
            if status_of(error) != 409:
                raise
            # Changed behind our back: the controller's retry writes over what is there now.
            fresh = await self.peering.home.find(path)
            self._known(key, fresh if fresh is not None and self._owned(fresh) else None)
            raise
        if answer is not None:  # None: made anew, and known by `_create`
            self._known(key, answer)

    async def _delete(self, current: Mapping[str, Any]) -> None:
        key = key_of(dict(current))
        await delete_owned(self.peering.home, core_path("events", *key),
                           (current.get("metadata") or {}).get("uid"))
        self._known(key, None)
