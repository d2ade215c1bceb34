"""The agents' NodeRestriction: a validating admission webhook, served by the home controller
(never by an agent: a compromised agent must not answer its own checks), that confines each
agent to its own virtual node as the NodeRestriction admission plugin confines a kubelet.

The chart's ValidatingWebhookConfiguration sends it the writes of the release namespace's
ServiceAccounts other than the controller's (matchConditions on the username, Kubernetes
1.28+): RBAC binds the agents' shared rights to that namespace's accounts group. An account is
an agent when a VirtualNode of the namespace makes it (`agent_name`); its node is that
VirtualNode's spec (never its status, which the agent writes). Then:

- Nodes (and their status): only its own, never without the virtual-node taint;
- Leases: in kube-node-lease only the one named after its node; in the release namespace only
  its election Lease;
- pods: status written (its labels left as they are) and deleted only for pods bound to its
  node;
- serviceaccounts/token: only bound to an existing pod (name and uid) bound to its node and
  running as that ServiceAccount;
- VirtualNodes' status: only its own VirtualNode's.

Any other account of the namespace is refused every write sent: it is nobody's agent. Until the
VirtualNodes are listed every write sent is refused (the API server's clients retry). The rules
are pure (`refusal`); the handler looks up the pod a token is bound to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from annex.kubeapi import ClusterApi, core_path
from annex.metrics import ServedRequests
from annex.webhooks import admission_application, admission_request, serve_tls
from shared.admission import review_response
from shared.api.virtual_node import VirtualNode
from shared.forge.agent import (
    AgentTemplate,
    agent_name,
    agent_name_refusal,
    election_lease_name,
)
from shared.wellknown import OFFLOADING_GROUP, VIRTUAL_NODE_TAINT_EFFECT, VIRTUAL_NODE_TAINT_KEY

log = logging.getLogger(__name__)

VALIDATE_AGENTS_PATH = "/validate-agents"
NODE_LEASE_NAMESPACE = "kube-node-lease"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Agent:
    """Who an agent account acts for."""

    account: str
    virtual_node: str
    cluster_id: str
    node: str


def account_of(username: str, namespace: str) -> str | None:
    """The ServiceAccount name of `username` when it is one of `namespace`'s, else None."""
    prefix = f"{SERVICE_ACCOUNT_PREFIX}{namespace}:"
    return username.removeprefix(prefix) if username.startswith(prefix) else None


def agent_of(account: str, template: AgentTemplate,
             virtual_nodes: Iterable[Mapping[str, Any]]) -> Agent | None:
    """The agent `account` is, from the VirtualNode that makes it; None when none does."""
    for obj in virtual_nodes:
        try:
            virtual_node = VirtualNode.model_validate(obj)
        except ValidationError:
            continue  # refused by the VirtualNode controller: it makes no agent
        if agent_name_refusal(template, virtual_node.spec.cluster_id) is not None:
            continue  # refused too: its name may be the release's or another agent's
        if agent_name(template, virtual_node.spec.cluster_id) == account:
            return Agent(account, str(virtual_node.metadata.name), virtual_node.spec.cluster_id,
                         virtual_node.spec.effective_node_name())
    return None


def _name(request: Mapping[str, Any]) -> str:
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


def bound_pod(request: Mapping[str, Any]) -> str | None:
    """The pod a token request is bound to (which the handler looks up), None when it is not a
    token request or names no pod."""
    if (request.get("resource") or {}).get("resource") != "serviceaccounts" or request.get(
            "subResource") != "token":
        return None
    ref = (((request.get("object") or {}).get("spec") or {}).get("boundObjectRef") or {})
    name = ref.get("name")
    return str(name) if ref.get("kind") == "Pod" and name else None


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
    if _pod_node(pod) != agent.node:
        return (f"agent of node {agent.node!r} requested a token bound to a pod scheduled on a "
                "different node")
    account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    if account != request.get("name"):
        return (f"agent of node {agent.node!r} requested a token for service account "
                f"{request.get('name')!r} bound to pod {ref['name']!r}, which runs as "
                f"{account!r}")
    return None


def refusal(request: Mapping[str, Any], agent: Agent | None, template: AgentTemplate,
            pod: Mapping[str, Any] | None = None) -> str | None:
    """Why an agent account's write is refused, None when it is its node's to make. `pod`:
    the pod a token request is bound to (`bound_pod`), None when there is none."""
    username = str((request.get("userInfo") or {}).get("username") or "")
    if agent is None:
        return (f"{username} is the agent of no VirtualNode of {template.namespace}: it may act "
                "for no virtual node")
    resource = request.get("resource") or {}
    group, plural = resource.get("group") or "", resource.get("resource") or ""
    subresource = request.get("subResource") or ""
    namespace, name = str(request.get("namespace") or ""), _name(request)
    if (group, plural) == ("", "nodes"):
        if name != agent.node:
            return f"agent of node {agent.node!r} is not allowed to modify node {name!r}"
        if not subresource and request.get("operation") in ("CREATE", "UPDATE") and not (
                _has_virtual_node_taint(request.get("object"))):
            return (f"agent of node {agent.node!r} may not remove the "
                    f"{VIRTUAL_NODE_TAINT_KEY}:{VIRTUAL_NODE_TAINT_EFFECT} taint from its node "
                    "(pods run on a virtual node only when they tolerate it)")
    elif (group, plural) == ("coordination.k8s.io", "leases"):
        if namespace == NODE_LEASE_NAMESPACE:
            if name != agent.node:
                return (f"agent of node {agent.node!r} can only access the node lease with the "
                        f"same name as its node, not {name!r}")
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
        if subresource == "status" and bound != agent.node:
            return (f"agent of node {agent.node!r} can only update pod status for pods with "
                    "spec.nodeName set to its node")
        if subresource == "status" and _labels(request.get("object")) != _labels(
                request.get("oldObject")):
            return f"agent of node {agent.node!r} cannot update labels through pod status"
        if not subresource and request.get("operation") == "DELETE" and bound != agent.node:
            return (f"agent of node {agent.node!r} can only delete pods with spec.nodeName set "
                    "to its node")
    elif (group, plural, subresource) == ("", "serviceaccounts", "token"):
        return token_refusal(request, agent, pod)
    elif (group, plural) == (OFFLOADING_GROUP, "virtualnodes"):
        if namespace != template.namespace or name != agent.virtual_node:
            return (f"agent of node {agent.node!r} can only write VirtualNode "
                    f"{template.namespace}/{agent.virtual_node}, not {namespace}/{name}")
    return None


class AgentAdmission:
    """The webhook's handler: `virtual_nodes()` lists the VirtualNodes of the release
    namespace (the controller's mirror), `synced()` says whether they are listed."""

    def __init__(self, api: ClusterApi, template: AgentTemplate,
                 virtual_nodes: Callable[[], Iterable[Mapping[str, Any]]],
                 synced: Callable[[], bool], served: ServedRequests | None = None) -> None:
        self.api = api
        self.served = served
        """What counts the webhook's requests (/metrics)."""
        self.template = template
        self.virtual_nodes = virtual_nodes
        self.synced = synced

    async def review(self, request: Mapping[str, Any]) -> str | None:
        """The refusal of an admission `request`, None when it is admitted."""
        username = str((request.get("userInfo") or {}).get("username") or "")
        account = account_of(username, self.template.namespace)
        if account is None:
            return None  # not the release's (an API server without matchConditions sent it)
        if not self.synced():
            return "the home controller has not listed the VirtualNodes yet: try again"
        agent = agent_of(account, self.template, self.virtual_nodes())
        pod = None
        pod_name = bound_pod(request) if agent is not None else None
        if pod_name is not None:
            pod = await self.api.find(core_path("pods", str(request.get("namespace") or ""),
                                                pod_name))
        denied = refusal(request, agent, self.template, pod)
        if denied is not None:
            log.warning("refused %s %s %s/%s%s of %s: %s", request.get("operation"),
                        (request.get("resource") or {}).get("resource"),
                        request.get("namespace") or "", _name(request),
                        f" ({request['subResource']})" if request.get("subResource") else "",
                        username, denied)
        return denied

    def application(self) -> web.Application:
        async def validate(request: web.Request) -> web.Response:
            admission = await admission_request(request)
            return web.json_response(review_response(str(admission.get("uid", "")),
                                                     denied=await self.review(admission)))

        app = admission_application([self.served.middleware] if self.served else [])
        app.router.add_post(VALIDATE_AGENTS_PATH, validate)
        return app

    async def serve(self, address: str, cert: str, key: str) -> web.AppRunner:
        runner = await serve_tls(self.application(), address, cert, key)
        log.info("agent admission webhook serving on https://%s%s", address,
                 VALIDATE_AGENTS_PATH)
        return runner
