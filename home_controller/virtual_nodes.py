"""The VirtualNode controller: each VirtualNode of the controller's namespace gets its agent
(`shared.forge.agent`: its ServiceAccount, the Role and RoleBinding of its kubeconfig Secret,
the Deployment and its PodDisruptionBudget), owned by the VirtualNode, as Liqo's virtual-node
controller makes the virtual kubelet's.

- an object missing is created, one of ours that differs from what is forged (its hash
  annotation) is replaced, an unchanged one is not written; a name taken by an object the
  VirtualNode does not own is left alone and said in an Event (phase Refused);
- the status says the phase (Creating, Running, Draining, Refused) and the agent Deployment's
  ready replicas; the agent writes the rest (node, Ready, last health check);
- a finalizer holds a deleted VirtualNode until its virtual node is drained: cordoned, its pods
  evicted through the Eviction API, so their PodDisruptionBudgets hold (their controllers make
  them again at home; a pod without one is named in an Event, then gone), the agent's
  remote objects removed (the agent withdraws every offloaded namespace, the enforcer deletes the
  twins; done when no NamespaceOffloading holds this remote's finalizer any more), then the
  agent Deployment deleted and waited for (its election Lease released, its pods gone), then
  the Node and the Lease deleted and the finalizer removed. Each wait is bounded by
  `drain_timeout` from the deletion and said in an Event on the VirtualNode; past it, pods a
  budget still holds are deleted (the node goes: the pod garbage collector would delete them
  with it all the same) and the drain goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from annex.api_errors import ApiError
from annex.api_paths import core_path, custom_path, group_path
from annex.controller import DONE, RETRY, Controller, Result
from annex.events import EventRecorder
from annex.informers import Change, Informers
from annex.kubeapi import ClusterApi
from annex.mirror import Key
from annex.writes import Foreign, create_or_refuse, delete_owned, replace_or_create
from shared.api.builtin import (
    DEPLOYMENTS,
    LEASES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    BuiltinResource,
)
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.virtual_node import FINALIZER, VIRTUAL_NODE, VirtualNode
from shared.forge.agent import (
    AgentTemplate,
    InvalidVirtualNode,
    agent_name,
    agent_objects,
    agent_phase,
    election_lease_name,
    is_owned_by,
    lease_holder,
    needs_write,
    status_patch,
    with_spec_hash,
)
from shared.forge.namespace_offloading import finalizer_name
from shared.forge.node import agent_nodes, labels_by_name
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL, TYPE_LABEL, TYPE_VIRTUAL_NODE

log = logging.getLogger(__name__)

HOME = "home"
WAIT_SECONDS = 2.0
"""Between two looks at a drain that waits (the waits are on other components)."""


OWNED: dict[str, BuiltinResource] = {resource.kind: resource for resource in (
    SERVICE_ACCOUNTS, SERVICES, ROLES, ROLE_BINDINGS, DEPLOYMENTS, POD_DISRUPTION_BUDGETS)}
"""The kinds of object the controller makes per VirtualNode."""
VIRTUAL_NODES = VIRTUAL_NODE.resource


def _joined(first: str | None, second: str | None) -> str | None:
    """Two waits said as one (None: nothing to wait for)."""
    return "; ".join(each for each in (first, second) if each) or None


def _path(owned: BuiltinResource, namespace: str, name: str = "") -> str:
    return group_path(*owned.resource, namespace, name)


def pod_name(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def has_controller(pod: Mapping[str, Any]) -> bool:
    return any(reference.get("controller")
               for reference in pod["metadata"].get("ownerReferences") or [])


def _owner_key(change: Change) -> list[Key]:
    metadata = change.obj.get("metadata") or {}
    return [(str(metadata.get("namespace") or ""), str(reference["name"]))
            for reference in metadata.get("ownerReferences") or []
            if reference.get("kind") == VIRTUAL_NODE.kind and reference.get("controller")]


class VirtualNodes:
    def __init__(self, api: ClusterApi, informers: Informers, template: AgentTemplate,
                 events: EventRecorder, *, drain_timeout: float = 300.0,
                 workers: int = 2) -> None:
        self.api = api
        self.template = template
        self.events = events
        self.drain_timeout = drain_timeout
        self.controller: Controller[Key] = Controller(
            "virtualnodes", self.reconcile, workers=workers, synced=self.synced)
        self.listed: set[str] = set()
        self.virtual_nodes = informers.watch(HOME, VIRTUAL_NODES, by="namespace")
        self.owned = {kind: informers.watch(HOME, owned.resource, by="namespace",
                                            label_selector=REMOTE_CLUSTER_ID_LABEL)
                      for kind, owned in OWNED.items()}
        self.nodes = informers.watch(HOME, NODES.resource, by="cluster",
                                     label_selector=f"{TYPE_LABEL}={TYPE_VIRTUAL_NODE}")
        informers.keys(HOME, VIRTUAL_NODE.plural, lambda change: [change.key], self.controller)
        for owned in OWNED.values():
            informers.keys(HOME, owned.plural, _owner_key, self.controller)

    def synced(self) -> bool:
        return self.listed >= {VIRTUAL_NODE.plural, NODES.plural,
                               *(owned.plural for owned in OWNED.values())}

    def on_listed(self, resource: str) -> None:
        self.listed.add(resource)

    # --- the reconcile -------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result:
        obj = self.virtual_nodes.get(key)
        if obj is None:
            return DONE  # the garbage collector takes what it owned
        try:
            virtual_node = VirtualNode.model_validate(obj)
        except ValidationError as error:
            await self.events.record(obj, "InvalidVirtualNode", str(error))
            return DONE
        finalizers = list(virtual_node.metadata.finalizers or [])
        if virtual_node.metadata.deletion_timestamp is not None:
            if FINALIZER not in finalizers:
                return DONE  # not ours (any more) to drain
            return await self._drain(obj, virtual_node)
        if FINALIZER not in finalizers:
            await self._set_finalizers(key, obj, [*finalizers, FINALIZER])
            return DONE  # the patched object comes back through the watch
        try:
            wanted = agent_objects(virtual_node, self.template)
        except InvalidVirtualNode as error:
            await self.events.record(obj, "InvalidVirtualNode", str(error))
            await self._write_status(key, obj, virtual_node, refused=True)
            return DONE
        refused = False
        for desired in wanted:
            refused = not await self._converge(obj, virtual_node, with_spec_hash(desired)) or (
                refused)
        await self._delete_unwanted(virtual_node, wanted)
        await self._write_status(key, obj, virtual_node, refused=refused)
        return RETRY if refused else DONE  # a refused name may be freed

    async def _set_finalizers(self, key: Key, obj: Mapping[str, Any],
                              finalizers: list[str]) -> None:
        # The resourceVersion guards the write: finalizers another controller added since are
        # not lost (409: the next look sees them).
        await self.api.patch(custom_path(VIRTUAL_NODE, key[0], key[1]), {"metadata": {
            "finalizers": finalizers, "resourceVersion": obj["metadata"]["resourceVersion"]}})

    async def _converge(self, obj: Mapping[str, Any], virtual_node: VirtualNode,
                        desired: dict[str, Any]) -> bool:
        """Make `desired` so; False when its name is taken by an object we do not own."""
        owned = OWNED[desired["kind"]]
        namespace, name = desired["metadata"]["namespace"], desired["metadata"]["name"]
        uid = virtual_node.metadata.uid
        current = self.owned[desired["kind"]].get((namespace, name))
        try:
            if current is None:
                created, made = await create_or_refuse(
                    self.api, _path(owned, namespace), _path(owned, namespace, name), desired,
                    owned=lambda existing: is_owned_by(existing, uid))
                if made:
                    log.info("VirtualNode %s: %s %s/%s created", virtual_node.metadata.name,
                             desired["kind"], namespace, name)
                    return True
                current = created
            elif not is_owned_by(current, uid):
                raise Foreign(current)
        except Foreign:
            await self.events.record(obj, "AgentObjectNameTaken", (
                f"{desired['kind']} {namespace}/{name} exists and is not this VirtualNode's: "
                "left alone (delete it, or the release's agents, to let the controller make it)"))
            return False
        if needs_write(current, desired):
            body = {**desired, "metadata": {**desired["metadata"], "resourceVersion":
                                            current["metadata"]["resourceVersion"]}}
            await replace_or_create(self.api, _path(owned, namespace, name), body,
                                    lambda: self.api.create(_path(owned, namespace), desired))
            log.info("VirtualNode %s: %s %s/%s updated", virtual_node.metadata.name,
                     desired["kind"], namespace, name)
        return True

    async def _delete_unwanted(self, virtual_node: VirtualNode,
                               wanted: list[dict[str, Any]]) -> None:
        """What the VirtualNode owns and no longer needs (its budget, down to one replica)."""
        kept = {(obj["kind"], obj["metadata"]["name"]) for obj in wanted}
        for kind, mirror in self.owned.items():
            for obj in mirror.values():
                namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
                if (kind, name) not in kept and is_owned_by(obj, virtual_node.metadata.uid):
                    await delete_owned(self.api, _path(OWNED[kind], namespace, name),
                                       obj["metadata"].get("uid"))
                    log.info("VirtualNode %s: %s %s/%s deleted (no longer needed)",
                             virtual_node.metadata.name, kind, namespace, name)

    def _deployment(self, virtual_node: VirtualNode) -> tuple[str, dict[str, Any] | None]:
        name = agent_name(self.template, virtual_node.spec.cluster_id)
        found = self.owned["Deployment"].get((self.template.namespace, name))
        return name, found if found is not None and is_owned_by(
            found, virtual_node.metadata.uid) else None

    async def _write_status(self, key: Key, obj: dict[str, Any], virtual_node: VirtualNode,
                            refused: bool) -> dict[str, Any]:
        """The VirtualNode as it is once its status says what it should."""
        name, deployment = self._deployment(virtual_node)
        patch = status_patch(virtual_node, agent_phase(virtual_node, deployment, refused),
                             name if deployment is not None else None, deployment)
        if patch is None:
            return obj
        written = await self.api.patch(custom_path(VIRTUAL_NODE, key[0], key[1], "status"),
                                       patch)
        return written if isinstance(written, dict) else obj

    # --- the drain -----------------------------------------------------------------------------

    async def _drain(self, obj: dict[str, Any], virtual_node: VirtualNode) -> Result:
        key = (str(virtual_node.metadata.namespace), str(virtual_node.metadata.name))
        obj = await self._write_status(key, obj, virtual_node, refused=False)
        deleted_at = virtual_node.metadata.deletion_timestamp
        assert deleted_at is not None
        overdue = (datetime.now(UTC) - deleted_at).total_seconds() > self.drain_timeout
        cluster_id = virtual_node.spec.cluster_id
        node_name = virtual_node.status.node_name or virtual_node.spec.effective_node_name()
        nodes = self._virtual_nodes_of(node_name, cluster_id)

        waiting = None
        for node in nodes:  # every pool's node at once: each waits the same drain timeout
            waiting = _joined(waiting, await self._drain_pods(obj, node, overdue))
        kept = await self._retained_claims(obj, cluster_id)
        if waiting is None:
            waiting = await self._remote_objects_left(cluster_id)
        if waiting is None:
            waiting = await self._agent_left(obj, virtual_node)
        if waiting is not None and not overdue:
            await self.events.record(obj, "Draining", f"waiting for {waiting}", "Normal")
            return Result(requeue_after=WAIT_SECONDS, outcome="waiting")
        if waiting is not None:
            await self.events.record(obj, "DrainTimedOut", (
                f"still waiting for {waiting} {self.drain_timeout:g}s after the deletion: the "
                "agent goes all the same"))
            _, deployment = self._deployment(virtual_node)
            if deployment is not None:
                await delete_owned(self.api, _path(OWNED["Deployment"],
                    key[0], deployment["metadata"]["name"]), deployment["metadata"]["uid"])
        for node in nodes:
            await delete_owned(self.api, core_path("nodes", name=node["metadata"]["name"]),
                               node["metadata"].get("uid"))
        drained = ", ".join(node["metadata"]["name"] for node in nodes) or node_name
        await self.api.delete_if_exists(group_path(*LEASES.resource, self.template.namespace,
                                                   election_lease_name(cluster_id)))
        # Recorded before the finalizer goes, so whoever sees the VirtualNode gone finds it.
        await self.events.record(obj, "Drained", f"virtual node {drained} drained and deleted" + (
            f"; the provider keeps the claims {', '.join(kept)} with their data (set "
            "spec.deleteRemoteClaims before deleting a VirtualNode to delete them)"
            if kept else ""), "Normal")
        finalizers = [f for f in virtual_node.metadata.finalizers or [] if f != FINALIZER]
        await self._set_finalizers(key, obj, finalizers)
        log.info("VirtualNode %s/%s drained: its agent goes", *key)
        return DONE

    def _virtual_nodes_of(self, node_name: str, cluster_id: str) -> list[dict[str, Any]]:
        """The agent's Nodes: its node, or one per pool of its provider (`agent_nodes`)."""
        names = agent_nodes(node_name, cluster_id, labels_by_name(self.nodes.values()))
        return [node for name in sorted(names) if (node := self.nodes.get(("", name)))]

    async def _drain_pods(self, obj: Mapping[str, Any], node: dict[str, Any],
                          overdue: bool) -> str | None:
        """Cordon the node and evict its pods, as `kubectl drain` does: through the Eviction
        API, so their PodDisruptionBudgets hold (a refused eviction is tried again on the next
        look). Pods without a controller are named in an Event first (nothing makes them
        again). Past the drain timeout (`overdue`) the pods still there are deleted: the node
        goes, and the pod garbage collector would delete them with it whatever their budgets.
        What is still there, None once none is."""
        name = node["metadata"]["name"]
        if not (node.get("spec") or {}).get("unschedulable"):
            await self.api.patch(core_path("nodes", name=name), {"spec": {"unschedulable": True}})
            await self.events.record(obj, "Cordoned", f"virtual node {name} cordoned", "Normal")
        listed = await self.api.request("GET", core_path("pods"),
                                        query={"fieldSelector": f"spec.nodeName={name}"})
        pods = list((listed or {}).get("items") or [])
        going = [pod for pod in pods if pod["metadata"].get("deletionTimestamp") is None]
        if uncontrolled := [pod_name(pod) for pod in going if not has_controller(pod)]:
            await self.events.record(obj, "UncontrolledPods", (
                f"pods without a controller, evicted from {name}: nothing makes them again: "
                f"{', '.join(uncontrolled)}"))
        held = []
        for pod in going:
            path = core_path("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
            if overdue:
                await delete_owned(self.api, path, pod["metadata"].get("uid"))
            elif (refusal := await self._evict(path, pod)) is not None:
                held.append(f"{pod_name(pod)} ({refusal})")
        if not pods:
            return None
        waiting = f"{len(pods)} pod(s) on {name} to go"
        return f"{waiting}; evictions refused: {'; '.join(held)}" if held else waiting

    async def _evict(self, path: str, pod: Mapping[str, Any]) -> str | None:
        """Evict the pod (this one: its uid as precondition); why the API server refused, None
        once it is evicted or gone."""
        metadata = pod["metadata"]
        try:
            await self.api.create(f"{path}/eviction", {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": metadata["name"], "namespace": metadata["namespace"]},
                "deleteOptions": {"preconditions": {"uid": metadata.get("uid")}}})
        except ApiError as error:
            if error.status in (404, 409):  # gone, or another pod of that name
                return None
            if error.status != 429:
                raise
            causes = (error.body.get("details") or {}).get("causes") or []
            return "; ".join(str(c.get("message")) for c in causes) or str(
                error.body.get("message") or error)
        return None

    async def _retained_claims(self, obj: Mapping[str, Any], cluster_id: str) -> list[str]:
        """The claims kept with their data on the provider, as the agent reports them on the
        NamespaceOffloadings (it leaves such a twin to the provider and lets its
        NamespaceOffloading go), written in the VirtualNode's `status.retainedRemoteClaims`."""
        retained = sorted(
            f"{offloading['metadata']['namespace']}/{claim}"
            for offloading in await self.api.list(custom_path(NAMESPACE_OFFLOADING))
            for claim in ((offloading.get("status") or {}).get("retainedRemoteClaims") or {})
            .get(cluster_id) or [])
        if retained != ((obj.get("status") or {}).get("retainedRemoteClaims") or []):
            metadata = obj["metadata"]
            await self.api.patch(custom_path(VIRTUAL_NODE, metadata["namespace"],
                                             metadata["name"], "status"),
                                 {"status": {"retainedRemoteClaims": retained or None}})
        return retained

    async def _remote_objects_left(self, cluster_id: str) -> str | None:
        """The namespaces whose twin on the provider the agent has not seen removed yet."""
        finalizer = finalizer_name(cluster_id)
        held = [offloading for offloading in await self.api.list(custom_path(NAMESPACE_OFFLOADING))
                if finalizer in (offloading["metadata"].get("finalizers") or [])]
        if not held:
            return None
        namespaces = ", ".join(sorted(o["metadata"]["namespace"] for o in held))
        return f"the agent to remove the provider's namespaces of {namespaces}"

    async def _agent_left(self, obj: Mapping[str, Any], virtual_node: VirtualNode
                          ) -> str | None:
        """Delete the agent Deployment; what remains of the agent, None once it is gone."""
        key = (str(virtual_node.metadata.namespace), str(virtual_node.metadata.name))
        name, deployment = self._deployment(virtual_node)
        if deployment is not None:
            await delete_owned(self.api, _path(OWNED["Deployment"], key[0], name),
                               deployment["metadata"]["uid"])
            return f"agent Deployment {name} to go"
        selector = ",".join(f"{k}={v}" for k, v in {
            **self.template.selector_labels,
            REMOTE_CLUSTER_ID_LABEL: virtual_node.spec.cluster_id}.items())
        pods = await self.api.list(core_path("pods", self.template.namespace), selector)
        if pods:
            return f"{len(pods)} agent pod(s) to stop"
        lease = await self.api.find(group_path(*LEASES.resource, self.template.namespace,
                                               election_lease_name(virtual_node.spec.cluster_id)))
        return lease_holder(lease, datetime.now(UTC))

