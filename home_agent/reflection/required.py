"""A pod's ShadowPod waits for the remote copies of the ConfigMaps and Secrets the pod cannot
start without, those its volumes mount and its containers' environment reads
(`shared.forge.required.required_objects`), as it waits for its token Secret (`home_agent.pod`). A
remote pod made first would wait for the kubelet's next try: a volume in ContainerCreating with
FailedMount warnings (copied home), tried again after a backoff doubling up to about 2 min; an
environment in CreateContainerConfigError, tried again at the pod's next sync 10 to 15 s later.
The first pod of a namespace just extended races the copy of its `kube-root-ca.crt`; a
Deployment's pods race the ConfigMap applied with them.

Only a copy the agent is about to make is waited for: its kind is reflected, the home object
exists and is wanted (`Reflector.copy_pending`). An object missing at home would be missing for
a home kubelet too: the remote kubelet waits for it as the home one would. A copy that does not
come (the remote cluster refuses it: a quota on ConfigMaps, an invalid object; its reflector
reports that on the home object) is waited for `COPY_WAIT` seconds at most
(`shared.forge.pod_plan`, which decides the wait): then the pod is offloaded, and the remote
kubelet's warnings tell its user what is missing.

The copy's watch event brings the pods that wait for it back (`waiting_pods`, routed by
`home_agent.routes`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from annex.informers import Change
from annex.mirror import Key
from home_agent.reflection.reflector import Reflector
from shared.forge.pod_inputs import Copy
from shared.forge.required import required_objects

KINDS = frozenset({"ConfigMap", "Secret"})


class RequiredCopies:
    """The copies the pods need that are still to come (read from the kinds' reflectors), and the
    pods waiting for them, by copy. Used on the agent's one event loop."""

    def __init__(self, reflectors: Mapping[str, Reflector]) -> None:
        self._reflectors = {r.rules.kind: r for r in reflectors.values() if r.rules.kind in KINDS}
        self._waiting: dict[Copy, set[Key]] = {}
        """Each copy → the home pods waiting for it."""
        self._pods: dict[Key, tuple[float, list[Copy]]] = {}
        """Each waiting home pod → since when (the loop's clock), and for which copies."""

    @property
    def plurals(self) -> list[str]:
        """The remote kinds whose events bring waiting pods back."""
        return [r.rules.plural for r in self._reflectors.values()]

    def pending(self, key: Key, pod: Mapping[str, Any], remote_namespace: str) -> list[Copy]:
        """The copies the pod `pod` (home key `key`) needs that are still to be made in
        `remote_namespace`."""
        return [copy for kind, name in required_objects(pod)
                if (copy := self._pending(kind, key[0], name, remote_namespace)) is not None]

    def since(self, key: Key) -> float | None:
        """Since when (the loop's clock) the pod waits, if it does."""
        waiting = self._pods.get(key)
        return None if waiting is None else waiting[0]

    def wait_for(self, key: Key, since: float, copies: Iterable[Copy]) -> None:
        """The pod waits for `copies` (since `since`): their events bring it back."""
        pending = list(copies)
        self._pods[key] = (since, pending)
        for copy in pending:
            self._waiting.setdefault(copy, set()).add(key)

    def _pending(self, kind: str, namespace: str, name: str, remote_namespace: str
                 ) -> Copy | None:
        reflector = self._reflectors.get(kind)
        if reflector is None or not reflector.copy_pending((namespace, name), remote_namespace):
            return None
        return (reflector.rules.plural, remote_namespace, reflector.rules.remote_name(name))

    def forget(self, key: Key) -> None:
        """The pod waits no more (offloaded, deleted)."""
        _, copies = self._pods.pop(key, (0.0, []))
        for copy in copies:
            keys = self._waiting.get(copy)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._waiting[copy]

    def waiting_pods(self, plural: str, change: Change) -> Iterator[Key]:
        """A remote object of `plural` came: the home pods that waited for it."""
        if change.deleted or not self._waiting:
            return
        yield from self._waiting.pop((plural, *change.key), ())
