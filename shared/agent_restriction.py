"""The agents' NodeRestriction, as pure rules: what the home controller's admission webhook
(home_controller/agent_admission.py) lets each agent write, as the NodeRestriction admission
plugin and the Node authorizer confine a kubelet to its node. An account is an agent when a
VirtualNode of the release namespace makes it (`agent_name`); its node is that VirtualNode's
spec (never its status, which the agent writes). Then:

- Nodes (and their status): only its own (its node, and its provider's pools' nodes named
  `<node>-<pool>`), never without the virtual-node taint; a pool's node is created, and made
  schedulable, only for a pool its provider's ResourceOffer declares (a node of a pool withdrawn
  since is kept cordoned until it goes);
- Leases: in kube-node-lease only those named after its nodes; in the release namespace only
  its election Lease;
- pods: status written (its labels left as they are) and deleted only for pods bound to its
  node;
- serviceaccounts/token: only bound to an existing pod (name and uid) bound to its node and
  running as that ServiceAccount;
- VirtualNodes' status: only its own VirtualNode's;
- namespaces: only the scheduling label of the pod webhook (`SCHEDULING_ENABLED_LABEL`);
- NamespaceOffloadings: only its own finalizer, and only its own cluster's entries of the
  status;
- PersistentVolumes: only the virtual provisioner's, pinned to its node, with the virtual
  driver as source (or, for a claim provisioned at home, the real volume's source copied as it
  is).

Any other account of the namespace is refused every write sent: it is nobody's agent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from shared.api.virtual_node import VirtualNode
from shared.forge.agent import (
    AgentTemplate,
    agent_name,
    agent_name_refusal,
    election_lease_name,
)
from shared.forge.namespace_offloading import finalizer_name
from shared.forge.persistentvolume import pinned_node
from shared.pools import is_pool_name
from shared.wellknown import (
    OFFLOADING_GROUP,
    PROVISIONED_BY_ANNOTATION,
    REAL_VOLUME_ANNOTATION,
    SCHEDULING_ENABLED_LABEL,
    VIRTUAL_NODE_TAINT_EFFECT,
    VIRTUAL_NODE_TAINT_KEY,
    VIRTUAL_STORAGE_DRIVER,
    VIRTUAL_STORAGE_PROVISIONER,
)

NODE_LEASE_NAMESPACE = "kube-node-lease"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Agent:
    """Who an agent account acts for: its node, and its provider's pools' nodes
    (`<node>-<pool>`) but those of another agent whose node is named `<node>-<something>`
    (`nested`): the longest node name a Node's name extends says whose it is."""

    account: str
    virtual_node: str
    cluster_id: str
    node: str
    nested: frozenset[str] = frozenset()
    offered_pools: frozenset[str] | None = None
    """The pools its provider's ResourceOffer declares, as the home controller reads it (None:
    not known yet)."""

    def serves(self, node_name: str) -> bool:
        """Whether `node_name` is one of the agent's nodes."""
        if node_name == self.node:
            return True
        pool = node_name.removeprefix(f"{self.node}-")
        return (pool != node_name and is_pool_name(pool)
                and not any(node_name == other or node_name.startswith(f"{other}-")
                            for other in self.nested))


def account_of(username: str, namespace: str) -> str | None:
    """The ServiceAccount name of `username` when it is one of `namespace`'s, else None."""
    prefix = f"{SERVICE_ACCOUNT_PREFIX}{namespace}:"
    return username.removeprefix(prefix) if username.startswith(prefix) else None


def agents_by_account(template: AgentTemplate,
                      virtual_nodes: Iterable[Mapping[str, Any]]) -> dict[str, Agent]:
    """Who each agent account acts for, from the VirtualNodes that make agents (the first one,
    should two name the same cluster)."""
    agents: dict[str, Agent] = {}
    for obj in virtual_nodes:
        try:
            virtual_node = VirtualNode.model_validate(obj)
        except ValidationError:
            continue  # refused by the VirtualNode controller: it makes no agent
        cluster_id = virtual_node.spec.cluster_id
        if agent_name_refusal(template, cluster_id) is not None:
            continue  # refused too: its name may be the release's or another agent's
        account = agent_name(template, cluster_id)
        agents.setdefault(account, Agent(account, str(virtual_node.metadata.name), cluster_id,
                                         virtual_node.spec.effective_node_name()))
    nodes = {agent.node for agent in agents.values()}
    return {account: dataclasses.replace(agent, nested=frozenset(
                other for other in nodes if other.startswith(f"{agent.node}-")))
            for account, agent in agents.items()}


def request_name(request: Mapping[str, Any]) -> str:
    obj = request.get("object") or request.get("oldObject") or {}
    return str(request.get("name") or (obj.get("metadata") or {}).get("name") or "")


def _pod_node(pod: Mapping[str, Any] | None) -> str:
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


def _has_virtual_node_taint(node: Mapping[str, Any] | None) -> bool:
    """NodeRestriction keeps a kubelet from changing its taints; an agent keeps at least the
    one every virtual node carries."""
    return any(taint.get("key") == VIRTUAL_NODE_TAINT_KEY
               and taint.get("effect") == VIRTUAL_NODE_TAINT_EFFECT
               for taint in ((node or {}).get("spec") or {}).get("taints") or [])


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


BOOKKEEPING = frozenset({"resourceVersion", "managedFields", "generation"})
"""What the API server itself changes on every write: never compared."""


def _without(obj: Mapping[str, Any] | None, *, labels: Iterable[str] = (),
             finalizers: Iterable[str] = (), status: bool = True) -> dict[str, Any]:
    """`obj` as compared: without the server's bookkeeping, the named labels and finalizers
    (and its status, unless `status`)."""
    kept = {key: value for key, value in (obj or {}).items() if status or key != "status"}
    metadata = {key: value for key, value in dict(kept.get("metadata") or {}).items()
                if key not in BOOKKEEPING}
    dropped_labels, dropped_finalizers = set(labels), set(finalizers)
    if dropped_labels:
        metadata["labels"] = {key: value for key, value in _labels(obj).items()
                              if key not in dropped_labels}
    if dropped_finalizers:
        metadata["finalizers"] = [name for name in metadata.get("finalizers") or []
                                  if name not in dropped_finalizers]
    for key in ("labels", "annotations", "finalizers"):
        if not metadata.get(key):
            metadata.pop(key, None)
    kept["metadata"] = metadata
    return kept


def pool_node_refusal(request: Mapping[str, Any], agent: Agent, name: str) -> str | None:
    """A pool's node is created, or left schedulable by an update, only for a pool the
    provider's offer declares: a node of another pool would draw pods the provider does not
    take. A pool withdrawn keeps its node cordoned until the agent deletes it."""
    operation = request.get("operation")
    if name == agent.node or operation not in ("CREATE", "UPDATE"):
        return None
    if operation == "UPDATE" and ((request.get("object") or {}).get("spec") or {}).get(
            "unschedulable"):
        return None
    pool = name.removeprefix(f"{agent.node}-")
    doing = "create" if operation == "CREATE" else "make schedulable"
    if agent.offered_pools is None:
        return (f"agent of node {agent.node!r} may not {doing} node {name!r} yet: the home "
                f"controller has not read {agent.cluster_id}'s ResourceOffer (try again)")
    if pool not in agent.offered_pools:
        declared = ", ".join(sorted(agent.offered_pools)) or "none"
        return (f"agent of node {agent.node!r} may not {doing} node {name!r}: "
                f"{agent.cluster_id}'s ResourceOffer declares no pool {pool!r} (its pools: "
                f"{declared})")
    return None


def needed_object(request: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """What a rule needs to read beyond `request` (plural, namespace, name), which the handler
    looks up: the pod a token request is bound to, the real volume a volume provisioned at home
    copies. None when the rule needs nothing."""
    resource = (request.get("resource") or {}).get("resource")
    obj = request.get("object") or {}
    if resource == "serviceaccounts" and request.get("subResource") == "token":
        ref = ((obj.get("spec") or {}).get("boundObjectRef") or {})
        name = ref.get("name")
        if ref.get("kind") == "Pod" and name:
            return "pods", str(request.get("namespace") or ""), str(name)
    elif resource == "persistentvolumes" and request.get("operation") in ("CREATE", "UPDATE"):
        real = _annotations(obj).get(REAL_VOLUME_ANNOTATION)
        if real:
            return "persistentvolumes", "", str(real)
    return None


def token_refusal(request: Mapping[str, Any], agent: Agent,
                  pod: Mapping[str, Any] | None) -> str | None:
    """NodeRestriction's admitServiceAccount, and the Node authorizer's pod → ServiceAccount
    edge: a token only for a pod bound to the agent's node, running as that account."""
    if request.get("operation") != "CREATE":
        return None
    ref = ((request.get("object") or {}).get("spec") or {}).get("boundObjectRef") or {}
    if ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
        return f"agent of node {agent.node!r} requested a token not bound to a pod"
    if not ref.get("uid"):
        return (f"agent of node {agent.node!r} requested a token with a pod binding without "
                "a uid")
    if pod is None:
        return f"pods {ref['name']!r} not found"
    uid = (pod.get("metadata") or {}).get("uid")
    if ref["uid"] != uid:
        return (f"the UID in the bound object reference ({ref['uid']}) does not match the UID "
                "in record. The object might have been deleted and then recreated")
    if not agent.serves(_pod_node(pod)):
        return (f"agent of node {agent.node!r} requested a token bound to a pod scheduled on a "
                "different node")
    account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    if account != request.get("name"):
        return (f"agent of node {agent.node!r} requested a token for service account "
                f"{request.get('name')!r} bound to pod {ref['name']!r}, which runs as "
                f"{account!r}")
    return None


def refusal(request: Mapping[str, Any], agent: Agent | None, template: AgentTemplate,
            found: Mapping[str, Any] | None = None) -> str | None:
    """Why an agent account's write is refused, None when it is its node's to make. `found`:
    what `needed_object` names, as the API server has it (None: there is none)."""
    username = str((request.get("userInfo") or {}).get("username") or "")
    if agent is None:
        return (f"{username} is the agent of no VirtualNode of {template.namespace}: it may act "
                "for no virtual node")
    resource = request.get("resource") or {}
    group, plural = resource.get("group") or "", resource.get("resource") or ""
    subresource = request.get("subResource") or ""
    namespace, name = str(request.get("namespace") or ""), request_name(request)
    if (group, plural) == ("", "nodes"):
        if not agent.serves(name):
            return f"agent of node {agent.node!r} is not allowed to modify node {name!r}"
        if not subresource and request.get("operation") in ("CREATE", "UPDATE") and not (
                _has_virtual_node_taint(request.get("object"))):
            return (f"agent of node {agent.node!r} may not remove the "
                    f"{VIRTUAL_NODE_TAINT_KEY}:{VIRTUAL_NODE_TAINT_EFFECT} taint from its node "
                    "(pods run on a virtual node only when they tolerate it)")
        if not subresource:
            return pool_node_refusal(request, agent, name)
    elif (group, plural) == ("coordination.k8s.io", "leases"):
        if namespace == NODE_LEASE_NAMESPACE:
            if not agent.serves(name):
                return (f"agent of node {agent.node!r} can only access the node lease with the "
                        f"same name as its node (or one of its pools' nodes), not {name!r}")
        elif namespace == template.namespace:
            if name != election_lease_name(agent.cluster_id):
                return (f"agent of node {agent.node!r} can only access its election lease "
                        f"{election_lease_name(agent.cluster_id)!r} in {namespace}, not "
                        f"{name!r}")
        else:
            return (f"agent of node {agent.node!r} can only access leases in "
                    f"{NODE_LEASE_NAMESPACE} and its election lease")
    elif (group, plural) == ("", "pods"):
        bound = _pod_node(request.get("oldObject"))
        if subresource == "status" and not agent.serves(bound):
            return (f"agent of node {agent.node!r} can only update pod status for pods with "
                    "spec.nodeName set to its node")
        if subresource == "status" and _labels(request.get("object")) != _labels(
                request.get("oldObject")):
            return f"agent of node {agent.node!r} cannot update labels through pod status"
        if not subresource and request.get("operation") == "DELETE" and not agent.serves(bound):
            return (f"agent of node {agent.node!r} can only delete pods with spec.nodeName set "
                    "to its node")
    elif (group, plural, subresource) == ("", "serviceaccounts", "token"):
        return token_refusal(request, agent, found)
    elif (group, plural) == ("", "namespaces"):
        return namespace_refusal(request, agent)
    elif (group, plural) == (OFFLOADING_GROUP, "namespaceoffloadings"):
        return offloading_refusal(request, agent, subresource)
    elif (group, plural) == ("", "persistentvolumes"):
        return volume_refusal(request, agent, found)
    elif (group, plural) == (OFFLOADING_GROUP, "virtualnodes"):
        if namespace != template.namespace or name != agent.virtual_node:
            return (f"agent of node {agent.node!r} can only write VirtualNode "
                    f"{template.namespace}/{agent.virtual_node}, not {namespace}/{name}")
    return None




def namespace_refusal(request: Mapping[str, Any], agent: Agent) -> str | None:
    """An agent labels the namespaces it offloads for the pod webhook, and changes nothing
    else of any namespace."""
    name = request_name(request)
    if request.get("operation") != "UPDATE":  # RBAC grants no other: never sent
        return f"agent of node {agent.node!r} may not {_verb(request)} namespace {name!r}"
    old, new = request.get("oldObject"), request.get("object")
    if _without(old, labels=[SCHEDULING_ENABLED_LABEL]) != _without(
            new, labels=[SCHEDULING_ENABLED_LABEL]):
        return (f"agent of node {agent.node!r} may change only the {SCHEDULING_ENABLED_LABEL} "
                f"label of namespace {name!r}")
    return None


def offloading_refusal(request: Mapping[str, Any], agent: Agent,
                       subresource: str) -> str | None:
    """An agent adds and removes its own finalizer on a NamespaceOffloading, and writes its own
    cluster's entries of the status; the user's spec, the other clusters' finalizers and
    entries are not its to change."""
    where = f"{request.get('namespace') or ''}/{request_name(request)}"
    if request.get("operation") != "UPDATE":
        return f"agent of node {agent.node!r} may not {_verb(request)} NamespaceOffloading {where}"
    old, new = request.get("oldObject") or {}, request.get("object") or {}
    own = finalizer_name(agent.cluster_id)
    if subresource == "status":
        for field in ("remoteNamespacesConditions", "retainedRemoteClaims"):
            before = dict((old.get("status") or {}).get(field) or {})
            after = dict((new.get("status") or {}).get(field) or {})
            before.pop(agent.cluster_id, None)
            after.pop(agent.cluster_id, None)
            if before != after:
                return (f"agent of node {agent.node!r} may write only its cluster's entries "
                        f"({agent.cluster_id!r}) of status.{field} of NamespaceOffloading "
                        f"{where}")
        return None
    if subresource:
        return f"agent of node {agent.node!r} may not write {subresource} of {where}"
    if _without(old, finalizers=[own], status=False) != _without(new, finalizers=[own],
                                                                  status=False):
        return (f"agent of node {agent.node!r} may change only its own finalizer ({own}) of "
                f"NamespaceOffloading {where}")
    return None


def copied_volume(volume: Mapping[str, Any]) -> dict[str, Any]:
    """What a volume provisioned at home copies of the real volume (`local_volume`): its
    spec but the claim, the class and the reclaim policy."""
    return {key: value for key, value in (volume.get("spec") or {}).items()
            if key not in ("claimRef", "storageClassName", "persistentVolumeReclaimPolicy")}


def _volume_problem(volume: Mapping[str, Any], agent: Agent,
                    real: Mapping[str, Any] | None) -> str | None:
    """Why `volume` is not one the agent provisions, None when it is: the virtual
    provisioner's, and either the virtual driver's pinned to its node, or the copy of an
    existing real volume bound to the real claim made for the volume's claim."""
    name = str((volume.get("metadata") or {}).get("name") or "")
    if _annotations(volume).get(PROVISIONED_BY_ANNOTATION) != VIRTUAL_STORAGE_PROVISIONER:
        return (f"persistentvolume {name!r} is not provisioned by "
                f"{VIRTUAL_STORAGE_PROVISIONER}")
    spec = volume.get("spec") or {}
    real_name = _annotations(volume).get(REAL_VOLUME_ANNOTATION)
    if not real_name:
        if (spec.get("csi") or {}).get("driver") != VIRTUAL_STORAGE_DRIVER or any(
                key not in VIRTUAL_VOLUME_SPEC for key in spec):
            return (f"persistentvolume {name!r} has a source other than the "
                    f"{VIRTUAL_STORAGE_DRIVER} driver")
        if not agent.serves(str(pinned_node(volume) or "")):
            return f"persistentvolume {name!r} is not pinned to node {agent.node!r}"
        return None
    if real is None:
        return f"persistentvolume {name!r} copies {real_name!r}, which does not exist"
    claim = spec.get("claimRef") or {}
    real_claim = (real.get("spec") or {}).get("claimRef") or {}
    if (real_claim.get("namespace"), real_claim.get("name")) != (
            claim.get("namespace"), f"real-{claim.get('uid') or ''}"):
        return (f"persistentvolume {name!r} copies {real_name!r}, which is not bound to the "
                "real claim of its claim")
    if copied_volume(volume) != copied_volume(real):
        return f"persistentvolume {name!r} is not a copy of {real_name!r}"
    return None


VIRTUAL_VOLUME_SPEC = frozenset({
    "capacity", "accessModes", "volumeMode", "persistentVolumeReclaimPolicy",
    "storageClassName", "claimRef", "nodeAffinity", "csi", "mountOptions"})
"""The fields of a volume the agent provisions for a remote claim (`home_volume`)."""


def volume_refusal(request: Mapping[str, Any], agent: Agent,
                   real: Mapping[str, Any] | None) -> str | None:
    """An agent writes and deletes only the volumes it provisions (`_volume_problem`): never a
    volume of another node, a host path or a network share pre-bound to someone's claim."""
    operation = request.get("operation")
    old, new = request.get("oldObject"), request.get("object")
    if operation == "DELETE":
        old_volume = old or {}
        if _annotations(old_volume).get(REAL_VOLUME_ANNOTATION) and _annotations(
                old_volume).get(PROVISIONED_BY_ANNOTATION) == VIRTUAL_STORAGE_PROVISIONER:
            return None  # a copy of a real volume: the real one keeps the data
        problem = _volume_problem(old_volume, agent, None)
    else:
        problem = _volume_problem(new or {}, agent, real)
        if problem is None and operation == "UPDATE":
            problem = _volume_problem(old or {}, agent, real)
    if problem is not None:
        return f"agent of node {agent.node!r} may not {_verb(request)}: {problem}"
    return None


def _verb(request: Mapping[str, Any]) -> str:
    return str(request.get("operation") or "write").lower()
