"""PersistentVolumeClaims, home → twin namespace, and their volumes back home: the storage
fabric (forges: `shared.forge.persistentvolumeclaim` and
`shared.forge.persistentvolume`).

The agent is the dynamic provisioner of the virtual storage class for its virtual node, as an
external provisioner is for its class: a home claim is its own once the PV controller has handed
it to the virtual provisioner (`volume.kubernetes.io/storage-provisioner`) and the scheduler has
picked this virtual node for its first consumer (`volume.kubernetes.io/selected-node`). Then:
- the claim is reflected to the twin namespace with the provider's storage class (Provisioning
  Event); a refusal (a class not offered, the storage quota) is a ProvisioningFailed Warning on
  the home claim, retried with backoff;
- once the remote claim exists (bound, or waiting for its first consumer: the offloaded pod,
  which waits for this volume), the home volume pinned to the virtual node is created, pre-bound
  to the home claim (ProvisioningSucceeded); the home PV controller binds them and the scheduler
  binds the pod to the virtual node;
- a resize of the home claim (a class with allowVolumeExpansion) is propagated, and the agent
  writes what an external resizer writes: the remote claim's grown capacity on the home volume,
  then on the home claim's status (VolumeResizeSuccessful), the remote claim's resize
  conditions (Resizing, FileSystemResizePending...) on the home claim while it has them, and a
  refused expansion (the provider's quota) as a VolumeResizeFailed Warning with the
  ControllerResizeError condition; the PV controller's fields (phase, access modes, the
  capacity at binding) are never written;
- the remote claim is deleted only once the home claim is gone (confirmed by the home API
  server); its home volume, Released by the PV controller, is deleted with it (reclaim Delete);
  the remote reclaim policy decides the data;
- the remote claim's Events come home through the Event reflector.

A claim of the class whose first consumer is scheduled on a physical home node is provisioned at
home, as Liqo does, when `--home-storage-class` names a real home class: a real claim of that
class beside it (`real-<uid>`, owned by it, placed on that node), and once it is bound, a volume
of the virtual claim copying the real volume (its source and node affinity). One agent does it:
the one whose virtual node has the first name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from annex.api_errors import ApiError, error_message
from annex.api_paths import core_path
from annex.controller import RETRY, Result
from annex.informers import Change
from annex.mirror import Key, Mirror, key_of
from annex.writes import confirmed_gone, replace_or_create
from home_agent.reflection.peering import Peering
from home_agent.reflection.reflector import KindRules, Reflector
from shared.api.builtin import PERSISTENTVOLUMECLAIMS
from shared.api.resource_offer import ResourceOffer
from shared.forge.compare import needs_update, updated_remote
from shared.forge.persistentvolume import (
    expanded_capacity,
    home_volume,
    home_volume_name,
    is_local_volume,
    is_virtual_volume,
    local_volume,
    pinned_node,
)
from shared.forge.persistentvolumeclaim import (
    awaits_virtual_volume,
    capacity_of,
    current_class,
    home_claim_status,
    is_bound,
    real_claim,
    real_claim_name,
    real_claim_of,
    remote_claim,
    remote_storage_class,
    requested_storage,
)
from shared.quantity import parse_quantity
from shared.reflection_policy import ReflectionType
from shared.wellknown import (
    SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATION,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
    VIRTUAL_STORAGE_PROVISIONER,
)

"""The home volumes the agent provisions (the storage fabric's), watched cluster-wide."""

REFUSALS = (403, 422)  # the provider's admission (class, quota) or validation


def _is_virtual(node: Mapping[str, Any]) -> bool:
    return ((node.get("metadata") or {}).get("labels") or {}).get(TYPE_LABEL) == TYPE_VIRTUAL_NODE


def _claim_path(namespace: str, name: str) -> str:
    return core_path("persistentvolumeclaims", namespace, name)


def _volume_path(name: str) -> str:
    return core_path("persistentvolumes", name=name)


def _expands(local: Mapping[str, Any], remote: Mapping[str, Any]) -> bool:
    """The home claim asks for another size than its remote claim has."""
    return requested_storage(local) != requested_storage(remote)


def _selected_node(claim: Mapping[str, Any]) -> str:
    """The node the claim's first consumer was scheduled on (one of this agent's, for a claim
    it provisions): its home volume is pinned there."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(SELECTED_NODE_ANNOTATION) or "")


class PersistentVolumeClaimReflector(Reflector):
    def __init__(self, peering: Peering, rules: KindRules, workers: int, policy: ReflectionType,
                 home: Mirror, remote: Mirror, *, volumes: Mirror, nodes: Mirror,
                 node_names: Callable[[], Collection[str]], home_storage_class: str | None,
                 offer: Callable[[], ResourceOffer | None]) -> None:
        super().__init__(peering, rules, workers, policy, home, remote)
        self.volumes = volumes
        """The home volumes of the virtual provisioner (the mirror keeps no other)."""
        self.nodes = nodes
        """The home nodes: which virtual node provisions a claim at home."""
        self.node_names = node_names
        """This agent's virtual nodes' names (one, or one per pool)."""
        self.home_storage_class = home_storage_class
        """`--home-storage-class`: the real home class of claims provisioned at home."""
        self.offer = offer
        """The provider's ResourceOffer: its storage classes."""
        self._volumes_of: dict[Key, set[str]] = {}
        """Claim key → the names of the home volumes of ours whose claimRef names it."""

    # --- keyers (declared in `home_agent.routes`) -------------------------------------------

    @staticmethod
    def kept_volume(volume: dict[str, Any]) -> dict[str, Any] | None:
        return volume if is_virtual_volume(volume, VIRTUAL_STORAGE_PROVISIONER) else None

    def home_keys(self, change: Change) -> Iterable[Key]:
        """The claim; a real claim's virtual claim too."""
        served = real_claim_of(change.obj)
        if served is None:
            return (change.key,)
        return (change.key, (change.key[0], served))

    def volume_keys(self, change: Change) -> Iterable[Key]:
        """A home volume of ours: its claim's key (indexed by it)."""
        ref = (change.obj.get("spec") or {}).get("claimRef") or {}
        if not ref.get("name") or not is_virtual_volume(change.obj, VIRTUAL_STORAGE_PROVISIONER):
            return ()
        key = (str(ref.get("namespace") or ""), str(ref["name"]))
        names = self._volumes_of.setdefault(key, set())
        if change.deleted:
            names.discard(change.key[1])
            if not names:
                del self._volumes_of[key]
        else:
            names.add(change.key[1])
        return (key,)

    # --- which claims ------------------------------------------------------------------------

    def _ours(self, claim: Mapping[str, Any]) -> bool:
        """Handed to the virtual provisioner for this virtual node (bound since, or not)."""
        annotations = (claim.get("metadata") or {}).get("annotations") or {}
        return (annotations.get(STORAGE_PROVISIONER_ANNOTATION) == VIRTUAL_STORAGE_PROVISIONER
                and annotations.get(SELECTED_NODE_ANNOTATION) in self.node_names())

    def wanted(self, local: Mapping[str, Any] | None) -> bool:
        # A terminating claim keeps its remote copy: pods may still use it on both sides.
        return local is not None and self._ours(local) and self.decide(local)

    def _with_kind(self, claim: Mapping[str, Any]) -> dict[str, Any]:
        return {**claim, **PERSISTENTVOLUMECLAIMS.type_meta()}

    async def _event(self, claim: Mapping[str, Any], reason: str, message: str,
                     event_type: str = "Normal") -> None:
        await self.peering.events.record(self._with_kind(claim), reason, message, event_type)

    # --- reconcile ---------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result | None:
        namespace, name = key
        local = self.home.get(key)
        await self._delete_released_volumes(key)
        if local is not None and (node := self._physical_node(local)) is not None:
            await self._provision_locally(local, node)
            return None
        remote_namespace = self.peering.twins.accepted(namespace)
        if remote_namespace is None or not self.peering.offloaded.watched(namespace):
            return None
        current = self.remote.get((remote_namespace, name))
        if current is not None and not self._owned(current):
            if local is not None and self.wanted(local):
                await self._refuse(local, remote_namespace, name)
            return None
        if local is None:
            if current is not None and await confirmed_gone(self.peering.home, _claim_path(*key)):
                await self._delete(current)
            return None
        if not self.wanted(local):
            return None  # not the virtual node's: never a reason to delete a remote claim
        offer = self.offer()
        storage_class = current_class(current) if current is not None else remote_storage_class(
            local, offer.spec.storage_classes if offer is not None else [])
        desired = remote_claim(local, remote_namespace, self.config(), storage_class, current)
        if current is None:
            if not awaits_virtual_volume(local, VIRTUAL_STORAGE_PROVISIONER,
                                         _selected_node(local)):
                return None  # bound to a home volume whose remote claim is gone: left alone
            return await self._provision(local, desired)
        refusal = await self._update(local, current, desired) if needs_update(
            current, desired) else None
        await self._provide_home_volume(local, current,
                                        refusal if _expands(local, current) else None)
        return None if refusal is None else RETRY

    async def _update(self, local: Mapping[str, Any], current: Mapping[str, Any],
                      desired: dict[str, Any]) -> str | None:
        """Write the remote claim (an expansion, labels...) and return the provider's refusal
        (its quota, a class that does not expand), if any. A refused expansion shows on the
        home claim as an external resizer shows a failed one: a VolumeResizeFailed Warning here,
        the ControllerResizeError condition (`home_claim_status`); anything else refused is a
        FailedReflection."""
        namespace, name = key_of(desired)
        try:
            await replace_or_create(
                self.peering.remote, _claim_path(namespace, name),
                updated_remote(current, desired), lambda: self._create(local, desired))
        except ApiError as error:
            if error.status not in REFUSALS:
                raise
            if _expands(local, current):
                await self._event(local, "VolumeResizeFailed", error_message(error), "Warning")
            else:
                await self._report(local, f"the provider refused the update of its claim "
                                          f"{namespace}/{name}: {error_message(error)}")
            return error_message(error)
        return None

    def _physical_node(self, claim: Mapping[str, Any]) -> str | None:
        """The physical home node a claim handed to the virtual provisioner was scheduled
        for, when this agent is the one to provision it locally (a home class is configured,
        and of the virtual nodes it has the first name: one agent acts, the others leave it)."""
        annotations = (claim.get("metadata") or {}).get("annotations") or {}
        node_name = annotations.get(SELECTED_NODE_ANNOTATION)
        if (annotations.get(STORAGE_PROVISIONER_ANNOTATION) != VIRTUAL_STORAGE_PROVISIONER
                or not node_name or self.home_storage_class is None):
            return None
        nodes = self.nodes
        node = nodes.get(("", str(node_name)))
        if node is None or _is_virtual(node):
            return None
        virtual = sorted(str(obj["metadata"]["name"]) for obj in nodes.values()
                         if _is_virtual(obj))
        if virtual and virtual[0] not in self.node_names():
            return None
        return str(node_name)

    async def _provision_locally(self, claim: Mapping[str, Any], node: str) -> None:
        """As Liqo's storage provisioner: a real claim of the home class on that node, then a
        volume of the virtual claim copying the real one's."""
        meta = claim.get("metadata") or {}
        if (claim.get("spec") or {}).get("volumeName") or meta.get("deletionTimestamp"):
            return
        if self.volumes.get(("", home_volume_name(claim))) is not None:
            return  # made already: the PV controller binds it
        namespace = str(meta.get("namespace", ""))
        storage_class = str(self.home_storage_class)
        real = self.home.get((namespace, real_claim_name(claim)))
        if real is None:
            await self._event(claim, "Provisioning",
                              f'External provisioner is provisioning volume for claim '
                              f'"{namespace}/{meta.get("name")}" (home class '
                              f'"{storage_class}", node {node})')
            try:
                await self.peering.home.create(_claim_path(namespace, ""),
                                             real_claim(claim, storage_class, node))
            except ApiError as error:
                if error.status != 409:
                    raise
            return  # the real claim's events bring the key back
        real_volume_name = (real.get("spec") or {}).get("volumeName")
        if not real_volume_name or (real.get("status") or {}).get("phase") != "Bound":
            return
        real_volume = await self.peering.home.get(_volume_path(str(real_volume_name)))
        await self._create_volume(
            claim, local_volume(real_volume, claim, VIRTUAL_STORAGE_PROVISIONER),
            f"the home volume {real_volume_name} of claim {real_claim_name(claim)}")

    async def _create_volume(self, claim: Mapping[str, Any], volume: dict[str, Any],
                             source: str) -> None:
        """Create `claim`'s home volume, backed by `source`, and say so on the claim; one that
        exists already (409) was made by an earlier reconcile, whose event was posted."""
        try:
            await self.peering.home.create(_volume_path(""), volume)
        except ApiError as error:
            if error.status != 409:
                raise
            return
        await self._event(claim, "ProvisioningSucceeded",
                          f"Successfully provisioned volume {volume['metadata']['name']} "
                          f"({source})")

    async def _provision(self, local: Mapping[str, Any],
                         desired: dict[str, Any]) -> Result | None:
        meta = local.get("metadata") or {}
        await self._event(local, "Provisioning",
                          f'External provisioner is provisioning volume for claim '
                          f'"{meta.get("namespace")}/{meta.get("name")}"')
        try:
            await self._create(local, desired)
        except ApiError as error:
            if error.status not in REFUSALS:
                raise
            storage_class = (local.get("spec") or {}).get("storageClassName")
            await self._event(local, "ProvisioningFailed",
                              f'failed to provision volume with StorageClass "{storage_class}": '
                              f"{error_message(error)}", "Warning")
            return RETRY
        return None  # the remote claim's watch event brings the key back

    async def _provide_home_volume(self, local: Mapping[str, Any], remote: Mapping[str, Any],
                                   refusal: str | None) -> None:
        phase = (remote.get("status") or {}).get("phase")
        remote_meta = remote.get("metadata") or {}
        if phase == "Lost":
            await self._event(local, "ClaimLost",
                              f"the remote claim {remote_meta.get('namespace')}/"
                              f"{remote_meta.get('name')} has lost its volume", "Warning")
            return
        name = home_volume_name(local)
        existing = self.volumes.get(("", name))
        if existing is None:
            if (local.get("spec") or {}).get("volumeName"):
                return  # bound already (to this volume, since gone: the PV controller says Lost)
            await self._create_volume(
                local, home_volume(remote, local, _selected_node(local),
                                   self.peering.remote_cluster_id,
                                   VIRTUAL_STORAGE_PROVISIONER),
                f"remote claim {remote_meta.get('namespace')}/{remote_meta.get('name')}")
            return
        await self._show_status(local, existing, remote, refusal)

    async def _show_status(self, local: Mapping[str, Any], volume: Mapping[str, Any],
                           remote: Mapping[str, Any], refusal: str | None) -> None:
        """What an external resizer writes: the volume's capacity once the remote claim has
        grown, then the claim's status (its capacity, the resize conditions, and whether the
        remote claim is bound yet: `home_claim_status`); what the PV controller writes (phase,
        access modes, the capacity at binding) is left to it."""
        volume_name = volume["metadata"]["name"]
        if is_bound(remote) and (grown := expanded_capacity(volume, remote)) is not None:
            await self.peering.home.patch(_volume_path(volume_name),
                                        {"spec": {"capacity": {"storage": grown}}})
        status = home_claim_status(local, remote, refusal, datetime.now(UTC))
        if status is None:
            return
        meta = local.get("metadata") or {}
        try:  # pinned to the claim read: another writer's status is never overwritten
            await self.peering.home.patch(
                _claim_path(meta.get("namespace", ""), meta["name"]) + "/status",
                {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                 "status": status})
        except ApiError as error:
            if error.status != 409:
                raise
            return  # the claim changed meanwhile: its watch event brings the key back
        old = capacity_of(local)
        if "capacity" in status and (old is None or parse_quantity(
                requested_storage(local) or "0") > parse_quantity(old)):
            await self._event(local, "VolumeResizeSuccessful",
                              f"resize volume {volume_name} to {status['capacity']['storage']} "
                              f"succeeded")

    async def _delete_released_volumes(self, key: Key) -> None:
        """The home volumes of this claim key the PV controller released (their claim is gone):
        deleted, as their reclaim policy (Delete) says."""
        for name in list(self._volumes_of.get(key, ())):
            volume = self.volumes.get(("", name))
            if (volume is None or (pinned_node(volume) not in self.node_names()
                                   and not is_local_volume(volume))
                    or (volume.get("status") or {}).get("phase") != "Released"
                    or volume["metadata"].get("deletionTimestamp")):
                continue
            try:
                await self.peering.home.delete(_volume_path(volume["metadata"]["name"]),
                                             {"preconditions": {
                                                 "uid": volume["metadata"].get("uid")}})
            except ApiError as error:
                if error.status not in (404, 409):
                    raise


PERSISTENTVOLUMECLAIM_RULES = KindRules(
    kind=PERSISTENTVOLUMECLAIMS.kind, resource=PERSISTENTVOLUMECLAIMS.resource, path=_claim_path)
