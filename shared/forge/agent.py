"""The agent of one VirtualNode, as the home controller makes it: the objects the home chart's
`remotes` render for one remote (charts/home-agent/templates/remotes.yaml; a chart test proves
them equal), each owned by the VirtualNode so that the garbage collector takes them with it.

- the agent Deployment: active/passive replicas electing a leader on a Lease (`--leader-elect`),
  this remote's flags then the release's (`AgentTemplate.args`, the chart's
  `home-agent.agentArgs`), the kubeconfig Secret `spec.kubeconfigSecretRef` names mounted;
- its PodDisruptionBudget (one replica kept through a drain) when it runs more than one;
- its own ServiceAccount, and the Role and RoleBinding that let that account alone follow
  that Secret and write its renewed token back into it, and read its Service (the rights every
  agent shares are the chart's, bound to the release namespace's ServiceAccounts);
- its Service, of the agent's name, in front of every replica's kubelet API: its ClusterIP is
  the offloaded pods' hostIP (`--kubelet-service`), which a takeover leaves as it is.

Names and labels are the chart's, so a release that moves from the chart's agents to the
controller's finds the same names (the controller refuses, never takes, one it does not own).
A cluster id whose agent would bear a name of the release's own objects or another agent's
makes no agent (`agent_name_refusal`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import Field

from shared.api.base import ApiModel
from shared.api.builtin import (
    DEPLOYMENTS,
    POD_DISRUPTION_BUDGETS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
)
from shared.api.virtual_node import AgentStatus, VirtualNode, VirtualNodePhase
from shared.forge.node import agent_nodes
from shared.node_selector import selects_a_node
from shared.rfc3339 import parse_rfc3339
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL

SPEC_HASH_ANNOTATION = "offloading.liqo.io/agent-spec-hash"
"""On each object the controller writes: the hash of what it forged, so that an unchanged
object is never written again whatever the API server defaulted in it."""
KUBECONFIG_KEY = "kubeconfig"
REMOTE_KUBECONFIG_DIR = "/etc/annex/remote"
MAX_NAME = 63


class AgentTemplate(ApiModel):
    """What the home chart gives every agent (its ConfigMap `<release>-agent-template`, read
    by the home controller's `--agent-template`): the release's part of each agent."""

    name_prefix: str
    """The release's full name: an agent is `<namePrefix>-<cluster id>`."""
    namespace: str
    labels: dict[str, str] = Field(default={})
    selector_labels: dict[str, str] = Field(default={})
    replicas: int = Field(default=2, ge=1)
    image: str
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: list[dict[str, Any]] = Field(default=[])
    pod_annotations: dict[str, str] = Field(default={})
    args: list[str] = Field(default=[])
    """The release's flags, after each agent's own."""
    resources: dict[str, Any] = Field(default={})
    webhook_port: int = 9443
    metrics_port: int = 8080
    kubelet_port: int = 10250
    webhook_cert_secret: str
    kubelet_cert_secret: str = ""
    node_selector: dict[str, str] = Field(default={})
    tolerations: list[dict[str, Any]] = Field(default=[])
    affinity: dict[str, Any] = Field(default={})
    namespace_role: str = ""
    """The ClusterRole of what the agents do in an offloaded namespace (read what they reflect,
    the storage fabric's claims, the reflected Events, the pods' tokens), which the controller
    binds there for the agents that serve it (`namespace_grant`)."""


class InvalidVirtualNode(ValueError):
    """The VirtualNode cannot make an agent (said in an Event on it)."""


def _truncated(name: str) -> str:
    """Helm's `trunc 63 | trimSuffix "-"`."""
    return name[:MAX_NAME].removesuffix("-")


def election_lease_name(cluster_id: str) -> str:
    """The Lease an agent's replicas elect their leader on (`--leader-elect`): one agent per
    remote cluster."""
    return f"annex-home-agent-{cluster_id}"


def agent_name(template: AgentTemplate, cluster_id: str) -> str:
    """The chart's `home-agent.remoteName`."""
    return _truncated(f"{template.name_prefix}-{cluster_id}")


KUBECONFIG_SUFFIX = "-kubeconfig"
"""What an agent's name takes for its kubeconfig Role and RoleBinding (and the chart's Secret):
the one name derived from an agent's."""
RELEASE_NAME_SUFFIXES = frozenset({
    "agent-template", "agents", "apiserver-address", "controller", "controller-metrics",
    "controller-metrics-auth", "controller-webhook", "controller-webhook-tls", "dashboard",
    "leader-election", "metrics", "namespace-grants", "node-lease", "offloaded-namespaces",
    "uninstall", "webhook", "webhook-tls"})
"""What the home chart and controller append to the release's full name for the release's own
objects (the controller's and the uninstall hook's accounts, the webhooks' Services and
Secrets, ...): `<full name>-<suffix>` is never an agent's name."""


def agent_name_refusal(template: AgentTemplate, cluster_id: str) -> str | None:
    """Why `cluster_id` may not name an agent, None when it may. A cluster id comes from the
    provider (discovery, peering): its agent, `<full name>-<cluster id>`, and the names derived
    from it must never be the release's own objects' (an agent running as the controller's
    account) nor another agent's. The rule, the chart's `home-agent.clusterIdRefusal` too: a
    cluster id is none of RELEASE_NAME_SUFFIXES, does not end with KUBECONFIG_SUFFIX, and
    its agent's name is shorter than 63 characters (never truncated, so no two cluster ids
    share it, nor a truncated derived name)."""
    name = f"{template.name_prefix}-{cluster_id}"
    if cluster_id in RELEASE_NAME_SUFFIXES:
        return (f"cluster id {cluster_id!r} would name its agent {name}, a name of the "
                "release's own objects")
    if cluster_id.endswith(KUBECONFIG_SUFFIX):
        return (f"cluster id {cluster_id!r} ends with {KUBECONFIG_SUFFIX!r}: its agent {name} "
                "would bear the name of the kubeconfig Role and Secret of the agent of cluster "
                f"{cluster_id.removesuffix(KUBECONFIG_SUFFIX)!r}")
    if len(name) >= MAX_NAME:
        return (f"cluster id {cluster_id!r} would name its agent {name}, {len(name)} "
                f"characters: at most {MAX_NAME - 1}, so that no name of it is truncated into "
                "another agent's")
    return None


def kubeconfig_role_name(template: AgentTemplate, cluster_id: str) -> str:
    return f"{agent_name(template, cluster_id)}{KUBECONFIG_SUFFIX}"


def owner_reference(virtual_node: VirtualNode) -> dict[str, Any]:
    return {"apiVersion": virtual_node.api_version, "kind": virtual_node.kind,
            "name": virtual_node.metadata.name, "uid": virtual_node.metadata.uid,
            "controller": True, "blockOwnerDeletion": True}


def _metadata(name: str, template: AgentTemplate, cluster_id: str,
              virtual_node: VirtualNode) -> dict[str, Any]:
    return {"name": name, "namespace": template.namespace,
            "labels": {**template.labels, REMOTE_CLUSTER_ID_LABEL: cluster_id},
            "ownerReferences": [owner_reference(virtual_node)]}


def agent_args(virtual_node: VirtualNode, template: AgentTemplate) -> list[str]:
    """This remote's flags, then the release's: the chart's order."""
    spec = virtual_node.spec
    if (spec.remote_pod_cidr is None) != (spec.remapped_pod_cidr is None):
        raise InvalidVirtualNode("remotePodCidr and remappedPodCidr go together")
    if spec.remapped_home_pod_cidr and not any(
            arg.startswith("--home-pod-cidr=") for arg in template.args):
        raise InvalidVirtualNode("remappedHomePodCidr needs the home chart's homePodCidr")
    args = [f"--remote-kubeconfig={REMOTE_KUBECONFIG_DIR}/{KUBECONFIG_KEY}",
            f"--remote-cluster-id={spec.cluster_id}",
            f"--kubelet-service={template.namespace}/{agent_name(template, spec.cluster_id)}"]
    if spec.node_name:
        args.append(f"--node-name={spec.node_name}")
    if spec.tenant_namespace:
        args.append(f"--tenant-namespace={spec.tenant_namespace}")
    if spec.remote_pod_cidr:
        args += [f"--remote-pod-cidr={spec.remote_pod_cidr}",
                 f"--remapped-pod-cidr={spec.remapped_pod_cidr}"]
    if spec.remapped_home_pod_cidr:
        args.append(f"--remapped-home-pod-cidr={spec.remapped_home_pod_cidr}")
    return args + list(template.args)


def _selector(template: AgentTemplate, cluster_id: str) -> dict[str, str]:
    return {**template.selector_labels, REMOTE_CLUSTER_ID_LABEL: cluster_id}


def own_object_rules(secret: str, service: str) -> list[dict[str, Any]]:
    """What one agent does to its own objects (home_agent/rbac.py's, which a chart test holds
    to this): follow its kubeconfig Secret by name and write its renewed token back; read its
    kubelet Service (the offloaded pods' hostIP)."""
    return [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret],
             "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["services"], "resourceNames": [service],
             "verbs": ["get"]}]


def _pod_spec(virtual_node: VirtualNode, template: AgentTemplate, secret: str) -> dict[str, Any]:
    cluster_id = virtual_node.spec.cluster_id
    mounts = [{"name": "remote-kubeconfig", "mountPath": REMOTE_KUBECONFIG_DIR, "readOnly": True},
              {"name": "webhook-tls", "mountPath": "/etc/annex/webhook", "readOnly": True}]
    volumes: list[dict[str, Any]] = [
        {"name": "remote-kubeconfig", "secret": {
            "secretName": secret, "items": [{"key": KUBECONFIG_KEY, "path": KUBECONFIG_KEY}]}},
        {"name": "webhook-tls", "secret": {"secretName": template.webhook_cert_secret}}]
    if template.kubelet_cert_secret:
        mounts.append({"name": "kubelet-tls", "mountPath": "/etc/annex/kubelet",
                       "readOnly": True})
        volumes.append({"name": "kubelet-tls",
                        "secret": {"secretName": template.kubelet_cert_secret}})
    mounts.append({"name": "tmp", "mountPath": "/tmp"})
    volumes.append({"name": "tmp", "emptyDir": {}})
    container = {
        "name": "agent", "image": template.image, "imagePullPolicy": template.image_pull_policy,
        "command": ["python", "-m", "home_agent"],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "args": agent_args(virtual_node, template),
        "ports": [{"name": "webhook", "containerPort": template.webhook_port, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": template.metrics_port, "protocol": "TCP"},
                  {"name": "kubelet", "containerPort": template.kubelet_port, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"},
                          "periodSeconds": 10, "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"},
                           "periodSeconds": 5},
        "resources": template.resources,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    pod: dict[str, Any] = {"serviceAccountName": agent_name(template, cluster_id)}
    if template.image_pull_secrets:
        pod["imagePullSecrets"] = template.image_pull_secrets
    pod["securityContext"] = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                              "fsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
    pod["containers"] = [container]
    pod["volumes"] = volumes
    if template.node_selector:
        pod["nodeSelector"] = template.node_selector
    if template.tolerations:
        pod["tolerations"] = template.tolerations
    # The replicas of one agent on different nodes where possible: a node lost takes one.
    pod["affinity"] = template.affinity or {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": _selector(template, cluster_id)}}}]}}
    return pod


def kubeconfig_secret(virtual_node: VirtualNode) -> str:
    reference = virtual_node.spec.kubeconfig_secret_ref
    if reference is None or not reference.name:
        raise InvalidVirtualNode("spec.kubeconfigSecretRef names no Secret: the agent has no "
                                 "credentials for the provider")
    return reference.name


def agent_objects(virtual_node: VirtualNode, template: AgentTemplate) -> list[dict[str, Any]]:
    """The agent's objects, in the order they are made (RBAC before the pods that use it);
    `InvalidVirtualNode` when the VirtualNode cannot make one."""
    cluster_id = virtual_node.spec.cluster_id
    if (refusal := agent_name_refusal(template, cluster_id)) is not None:
        raise InvalidVirtualNode(refusal)
    secret = kubeconfig_secret(virtual_node)
    name = agent_name(template, cluster_id)
    role = kubeconfig_role_name(template, cluster_id)
    template_metadata: dict[str, Any] = {"labels": _selector(template, cluster_id)}
    if template.pod_annotations:
        template_metadata["annotations"] = template.pod_annotations
    objects: list[dict[str, Any]] = [
        {**SERVICE_ACCOUNTS.type_meta(),
         "metadata": _metadata(name, template, cluster_id, virtual_node)},
        {**ROLES.type_meta(),
         "metadata": _metadata(role, template, cluster_id, virtual_node),
         "rules": own_object_rules(secret, name)},
        {**ROLE_BINDINGS.type_meta(),
         "metadata": _metadata(role, template, cluster_id, virtual_node),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": name,
                       "namespace": template.namespace}]},
        # In front of every replica's kubelet API: its ClusterIP is the pods' hostIP.
        {**SERVICES.type_meta(),
         "metadata": _metadata(name, template, cluster_id, virtual_node),
         "spec": {"selector": _selector(template, cluster_id),
                  "ports": [{"name": "kubelet", "port": template.kubelet_port,
                             "targetPort": "kubelet", "protocol": "TCP"}]}},
        {**DEPLOYMENTS.type_meta(),
         "metadata": _metadata(name, template, cluster_id, virtual_node),
         "spec": {"replicas": template.replicas,
                  "selector": {"matchLabels": _selector(template, cluster_id)},
                  "template": {"metadata": template_metadata,
                               "spec": _pod_spec(virtual_node, template, secret)}}},
    ]
    if template.replicas > 1:
        objects.append(
            {**POD_DISRUPTION_BUDGETS.type_meta(),
             "metadata": _metadata(name, template, cluster_id, virtual_node),
             "spec": {"minAvailable": 1,
                      "selector": {"matchLabels": _selector(template, cluster_id)}}})
    return objects


NAMESPACE_GRANT_COMPONENT = "agent-namespace-grant"
"""The `app.kubernetes.io/component` of a namespace grant: what marks one as the controller's."""
RETIRED_GRANT_COMPONENTS = frozenset({"agent-token-requests"})
"""Grants an earlier controller made (the token requests alone, bound to every agent): the
controller deletes them wherever it finds them."""


def namespace_grant_name(template: AgentTemplate) -> str:
    return _truncated(f"{template.name_prefix}-agents")


def namespace_grant(template: AgentTemplate, namespace: str,
                    accounts: Iterable[str]) -> dict[str, Any]:
    """The RoleBinding that gives the agents whose `accounts` serve `namespace` (an offloaded
    one) what they do there: read what they reflect, write the storage fabric's claims and the
    reflected Events, request the offloaded pods' tokens (`AgentTemplate.namespace_role`).
    They read no other namespace: another remote's kubeconfig Secret, kube-system's Secrets and
    the namespaces offloaded to other remotes stay out of their reach."""
    return {**ROLE_BINDINGS.type_meta(),
            "metadata": {"name": namespace_grant_name(template), "namespace": namespace,
                         "labels": {**template.labels,
                                    "app.kubernetes.io/component": NAMESPACE_GRANT_COMPONENT}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": template.namespace_role},
            "subjects": [{"kind": "ServiceAccount", "name": account,
                          "namespace": template.namespace} for account in sorted(accounts)]}


NEVER_GRANTED_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})


def namespace_grant_refusal(template: AgentTemplate, namespace: str) -> str | None:
    """Why the agents get no rights in `namespace` even offloaded, None when they may: the
    release's own (the agents' accounts and kubeconfig Secrets: one agent would act as
    another) and the cluster's system namespaces (their accounts run the control plane)."""
    if namespace == template.namespace:
        return f"{namespace} is the release's namespace: the agents' own accounts are there"
    if namespace in NEVER_GRANTED_NAMESPACES:
        return f"{namespace} is a system namespace: its accounts run the control plane"
    return None


def is_namespace_grant(obj: Mapping[str, Any], template: AgentTemplate) -> bool:
    """Whether `obj` is a namespace grant of this release, current or retired (and so the
    controller's to rewrite or delete)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    component = labels.get("app.kubernetes.io/component")
    ours = component == NAMESPACE_GRANT_COMPONENT or component in RETIRED_GRANT_COMPONENTS
    return ours and all(labels.get(key) == value
                        for key, value in template.selector_labels.items())


def serving_accounts(offloading: Mapping[str, Any], template: AgentTemplate,
                     virtual_nodes: Iterable[VirtualNode],
                     node_labels: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The accounts of the agents a NamespaceOffloading extends its namespace to: those one of
    whose virtual nodes (`node_labels`, by node name: the Nodes as they are; an agent's node, or
    one per pool of its provider) its clusterSelector selects, as each agent decides for itself
    (`shared.forge.namespace_offloading`). An agent whose Nodes are not registered yet serves
    nothing yet."""
    selector = (offloading.get("spec") or {}).get("clusterSelector")
    accounts = set()
    for virtual_node in virtual_nodes:
        cluster_id = virtual_node.spec.cluster_id
        if agent_name_refusal(template, cluster_id) is not None:
            continue
        nodes = agent_nodes(virtual_node.spec.effective_node_name(), cluster_id, node_labels)
        if selects_a_node(selector, {name: node_labels[name] for name in nodes}):
            accounts.add(agent_name(template, cluster_id))
    return sorted(accounts)


def spec_hash(obj: Mapping[str, Any]) -> str:
    """The hash of a forged object (its SPEC_HASH_ANNOTATION)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def with_spec_hash(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = dict(obj["metadata"])
    metadata["annotations"] = {**(metadata.get("annotations") or {}),
                               SPEC_HASH_ANNOTATION: spec_hash(obj)}
    return {**obj, "metadata": metadata}


def is_owned_by(obj: Mapping[str, Any], uid: str | None) -> bool:
    """Whether the VirtualNode of `uid` controls `obj`."""
    return any(reference.get("uid") == uid and reference.get("controller")
               for reference in (obj.get("metadata") or {}).get("ownerReferences") or [])


def needs_write(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether `current` (ours) is not what `desired` (with its hash) says."""
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    wanted: str = desired["metadata"]["annotations"][SPEC_HASH_ANNOTATION]
    return annotations.get(SPEC_HASH_ANNOTATION) != wanted


def deployment_readiness(deployment: Mapping[str, Any] | None) -> str | None:
    """"ready/wanted" replicas of the agent Deployment, None without one."""
    if deployment is None:
        return None
    status = deployment.get("status") or {}
    wanted = (deployment.get("spec") or {}).get("replicas", 1)
    return f"{status.get('readyReplicas') or 0}/{wanted}"


def agent_phase(virtual_node: VirtualNode, deployment: Mapping[str, Any] | None,
                refused: bool) -> VirtualNodePhase:
    """Draining once deleted; Refused while a name is taken; Running once a replica is
    ready; Creating before."""
    if virtual_node.metadata.deletion_timestamp is not None:
        return VirtualNodePhase.DRAINING
    if refused:
        return VirtualNodePhase.REFUSED
    ready = ((deployment or {}).get("status") or {}).get("readyReplicas") or 0
    return VirtualNodePhase.RUNNING if ready > 0 else VirtualNodePhase.CREATING


def status_patch(virtual_node: VirtualNode, phase: VirtualNodePhase, deployment_name: str | None,
                 deployment: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The controller's part of the status (the agent writes the rest), None when unchanged."""
    agent = AgentStatus(deployment=deployment_name, ready=deployment_readiness(deployment))
    status = virtual_node.status
    if status.phase == phase and (status.agent or AgentStatus()) == agent:
        return None
    return {"status": {"phase": phase.value, "agent": agent.to_wire()}}


def lease_holder(lease: Mapping[str, Any] | None, now: datetime) -> str | None:
    """What an election Lease still waits for: its holder, unless it released it or stopped
    renewing it a lease duration ago (a leader killed releases nothing)."""
    spec = (lease or {}).get("spec") or {}
    holder = spec.get("holderIdentity")
    if not holder:
        return None
    renewed = spec.get("renewTime")
    duration = spec.get("leaseDurationSeconds") or 0
    if renewed and (now - parse_rfc3339(renewed)).total_seconds() > duration:
        return None
    return f"the agent leader {holder} to release its Lease"
