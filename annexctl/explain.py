"""`annexctl explain pod NS/NAME`: why a pod is where it is, and the spec it gets remotely.

Placement: the node, whether it is a virtual node (and of which cluster and pool, and whether
that pool is withdrawn from the provider's offer), the namespace's
offloading (pod strategy, cluster selector, per-cluster state), the pod's virtual-node
toleration and node affinity (what the strategy's webhook added), and annex's own verdicts on
the pod (OffloadingBackOff, RemoteCreationFailed).

Remote spec: the pod's spec forged by shared.forge.pod exactly as the agent does (with the
VirtualNode's offloadingPatch), shown as a diff against the home spec; when the provider is
reachable through the VirtualNode's kubeconfig Secret, the ShadowPod the agent actually wrote is
compared with it. KUBERNETES_SERVICE_* point at the home API server as the agent finds it at
start (its --home-apiserver-host flag, else the address the API server advertises), which
annexctl cannot see: they are not part of the forged spec shown.
"""

from __future__ import annotations

import difflib
from typing import Any

import jsonpatch
import yaml

from annexctl.clusters import CliError, Cluster
from annexctl.consumer import provider_of
from annexctl.output import Report, Table
from annexctl.status import virtual_nodes
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING, NAMESPACE_OFFLOADING_NAME
from shared.api.shadowpod import SHADOWPOD
from shared.api.virtual_node import VirtualNode
from shared.forge.metadata import reflection_config
from shared.forge.node import WITHDRAWN_ANNOTATION, agent_nodes, labels_by_name
from shared.forge.pod import PodForgeConfig, remote_pod_spec
from shared.home_apiserver import SERVICE_NAME_LABEL, advertised_address
from shared.wellknown import (
    OFFLOADING_BACKOFF_REASON,
    ORIGIN_CLUSTER_LABEL,
    POOL_LABEL,
    REMOTE_CREATION_FAILED_CONDITION,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
    VIRTUAL_NODE_TAINT_KEY,
)

_STRATEGY_MEANING = {
    "Remote": "pods get the virtual-node toleration and a required affinity to virtual nodes: "
              "they run remotely only",
    "LocalAndRemote": "pods get the virtual-node toleration: the scheduler may pick a local or "
                      "a virtual node",
    "Local": "pods get nothing: they stay on local nodes (the namespace is extended only for "
             "its services and resources)",
}


def _tolerates_virtual_nodes(spec: dict[str, Any]) -> bool:
    return any(t.get("key") == VIRTUAL_NODE_TAINT_KEY or (
        not t.get("key") and t.get("operator") == "Exists") for t in spec.get("tolerations") or [])


def _requires_virtual_nodes(spec: dict[str, Any]) -> bool:
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {})
    return any(e.get("key") == TYPE_LABEL and TYPE_VIRTUAL_NODE in (e.get("values") or [])
               for term in required.get("nodeSelectorTerms") or []
               for e in term.get("matchExpressions") or [])


def _placement(pod: dict[str, Any], node: dict[str, Any] | None,
               virtual_node: VirtualNode | None, offloading: dict[str, Any] | None) -> list[str]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    node_name = spec.get("nodeName")
    reasons = []
    if not node_name:
        scheduled: dict[str, Any] = next((c for c in status.get("conditions") or []
                          if c.get("type") == "PodScheduled"), {})
        reasons.append(f"not scheduled yet: {scheduled.get('reason', 'Pending')} "
                       f"{scheduled.get('message', '')}".rstrip())
    elif virtual_node is not None:
        reasons.append(f"runs on virtual node {node_name}, i.e. in remote cluster "
                       f"{virtual_node.spec.cluster_id}")
        reasons += _pool_reasons(node)
    elif node is not None and (node["metadata"].get("labels") or {}).get(
            TYPE_LABEL) == TYPE_VIRTUAL_NODE:
        reasons.append(f"runs on virtual node {node_name}, but no VirtualNode configures it")
    else:
        reasons.append(f"runs on local node {node_name}")

    strategy = ((offloading or {}).get("spec") or {}).get("podOffloadingStrategy",
                                                          "LocalAndRemote")
    if offloading is None:
        reasons.append(f"namespace {pod['metadata']['namespace']} is not offloaded (no "
                       "NamespaceOffloading): its pods are not sent to remote clusters")
    else:
        phase = (offloading.get("status") or {}).get("offloadingPhase") or "unknown"
        reasons.append(f"namespace offloading: {strategy} ({_STRATEGY_MEANING.get(strategy, '')})"
                       f"; phase {phase}")
        selector = (offloading.get("spec") or {}).get("clusterSelector") or {}
        if selector.get("nodeSelectorTerms"):
            reasons.append(f"cluster selector: {selector['nodeSelectorTerms']}")
    if _tolerates_virtual_nodes(spec):
        reasons.append("tolerates the virtual-node taint: yes")
    elif offloading is not None and strategy != "Local":
        reasons.append("tolerates the virtual-node taint: no, although the strategy adds it: the "
                       "home agent's webhook mutates pods created after the namespace was "
                       "offloaded, and only while it is reachable")
    else:
        reasons.append("tolerates the virtual-node taint: no (cannot run remotely)")
    if _requires_virtual_nodes(spec):
        reasons.append(f"requires a node with {TYPE_LABEL}={TYPE_VIRTUAL_NODE} (node affinity)")
    if spec.get("nodeSelector"):
        reasons.append(f"node selector: {spec['nodeSelector']}")
    if status.get("reason") == OFFLOADING_BACKOFF_REASON:
        reasons.append(f"{OFFLOADING_BACKOFF_REASON}: {status.get('message', '')}")
    failed = next((c for c in status.get("conditions") or []
                   if c.get("type") == REMOTE_CREATION_FAILED_CONDITION
                   and c.get("status") == "True"), None)
    if failed:
        reasons.append(f"remote creation failed ({failed.get('reason')}): "
                       f"{failed.get('message', '')}")
    return reasons


def _pool_reasons(node: dict[str, Any] | None) -> list[str]:
    """What the pod's pool says: which pool of the provider it runs in, and when the offer no
    longer has it (the agent cordoned its node, saying why), that the pod runs on."""
    metadata = (node or {}).get("metadata") or {}
    pool = (metadata.get("labels") or {}).get(POOL_LABEL)
    reasons = [f"in the provider's pool {pool}: it runs on that pool's nodes only"] if pool \
        else []
    withdrawn = (metadata.get("annotations") or {}).get(WITHDRAWN_ANNOTATION)
    if withdrawn:
        reasons.append(f"withdrawn: {withdrawn}; the pod keeps running there, no new pod is "
                       "placed there")
    return reasons


def _spec_diff(home_spec: dict[str, Any], remote_spec: dict[str, Any]) -> list[str]:
    home_text = yaml.safe_dump(home_spec, sort_keys=True).splitlines()
    remote_text = yaml.safe_dump(remote_spec, sort_keys=True).splitlines()
    return list(difflib.unified_diff(home_text, remote_text, "home pod spec",
                                     "remote pod spec", lineterm="", n=2))


def _shadow_pod(home: Cluster, virtual_node: VirtualNode, offloading: dict[str, Any] | None,
                name: str) -> tuple[dict[str, Any] | None, str | None]:
    remote_namespace = ((offloading or {}).get("status") or {}).get("remoteNamespaceName")
    if not remote_namespace:
        return None, "no remote namespace yet"
    try:
        provider, _ = provider_of(home, virtual_node)
        try:
            return provider.get(SHADOWPOD.api_version, SHADOWPOD.kind, name,
                                remote_namespace), None
        finally:
            provider.close()
    except CliError as error:
        return None, str(error)


def _home_apiserver(home: Cluster, shadow_pod_spec: dict[str, Any] | None
                    ) -> tuple[str, int] | None:
    """Where the agent points offloaded pods at the home API server: what the ShadowPod it wrote
    says (the agent may have been given --home-apiserver-host), else the agent's default, the
    address the home API server advertises."""
    for container in (shadow_pod_spec or {}).get("containers") or []:
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        port = str(env.get("KUBERNETES_SERVICE_PORT"))
        if env.get("KUBERNETES_SERVICE_HOST") and port.isdigit():
            return str(env["KUBERNETES_SERVICE_HOST"]), int(port)
    slices = home.list("discovery.k8s.io/v1", "EndpointSlice", "default",
                       label_selector=f"{SERVICE_NAME_LABEL}=kubernetes")
    return advertised_address(slices)


def kubelet_endpoint(node: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Where the home API server reaches the virtual node's kubelet API (logs, exec,
    port-forward, top), and what could keep it from doing so."""
    status = node.get("status") or {}
    addresses = status.get("addresses") or []
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    internal = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)
    endpoint = {"address": internal, "port": port,
                "url": f"https://{internal}:{port}" if internal and port else None}
    notes = [f"Kubelet API (kubectl logs/exec/port-forward/top): {endpoint['url'] or 'none'}"]
    if any(a.get("type") == "Hostname" for a in addresses):
        notes.append("  the node lists a Hostname address, which kube-apiserver tries first "
                     "and nothing resolves: restart its agent to advertise only its IP")
    if not internal or not port:
        notes.append("  the node advertises no InternalIP and port: the agent has not written "
                     "its status yet")
    return endpoint, notes


def explain_pod(home: Cluster, namespace: str, name: str) -> Report:
    pod = home.get("v1", "Pod", name, namespace)
    if pod is None:
        raise CliError(f"{home.where}: pod {namespace}/{name} not found")
    node_name = (pod.get("spec") or {}).get("nodeName")
    node = home.get("v1", "Node", node_name) if node_name else None
    offloading = home.get(NAMESPACE_OFFLOADING.api_version, NAMESPACE_OFFLOADING.kind,
                          NAMESPACE_OFFLOADING_NAME, namespace)
    candidates = virtual_nodes(home)
    labels = labels_by_name([node] if node is not None else [])
    virtual_node = next((vn for vn in candidates if node_name in {
        vn.spec.effective_node_name(), vn.status.node_name,
        *agent_nodes(vn.status.node_name or vn.spec.effective_node_name(), vn.spec.cluster_id,
                     labels)}), None)  # its node, or one of its provider's pools' nodes
    reasons = _placement(pod, node, virtual_node, offloading)
    data: dict[str, Any] = {"pod": f"{namespace}/{name}", "node": node_name,
                            "remoteClusterId": virtual_node.spec.cluster_id if virtual_node
                            else None, "placement": reasons}
    notes = ["Placement:", *(f"  - {reason}" for reason in reasons)]
    tables: list[Table] = []
    if node is not None and virtual_node is not None:
        data["kubeletEndpoint"], endpoint_notes = kubelet_endpoint(node)
        notes += ["", *endpoint_notes]

    # The remote spec of the pod's virtual node, or, for a pod not (yet) on one, of the only one.
    target = virtual_node or (candidates[0] if len(candidates) == 1 else None)
    if target is not None:
        shadow, unavailable = _shadow_pod(home, target, offloading, name)
        home_id = ((shadow or {}).get("metadata", {}).get("labels") or {}).get(
            ORIGIN_CLUSTER_LABEL, "home")
        patch = target.spec.offloading_patch
        actual = ((shadow or {}).get("spec") or {}).get("pod")
        apiserver = _home_apiserver(home, actual)
        forged = remote_pod_spec(pod, PodForgeConfig(
            reflection=reflection_config(home_id, target.spec.cluster_id,
                                         offloading_patch=patch), offloading_patch=patch,
            home_apiserver_host=apiserver[0] if apiserver else None,
            home_apiserver_port=apiserver[1] if apiserver else 443))
        home_spec = pod.get("spec") or {}
        changes = jsonpatch.make_patch(home_spec, forged.spec).patch
        data.update(remoteSpec=forged.spec, changes=changes, forgeWarnings=forged.warnings,
                    shadowPod={"found": shadow is not None, "unavailable": unavailable,
                               "matchesForged": actual == forged.spec if actual else None,
                               "spec": actual})
        verb = "gets" if node_name and virtual_node else "would get"
        notes += ["", f"Remote spec ({verb} in cluster {target.spec.cluster_id}), "
                      "as a diff from the home spec:", *_spec_diff(home_spec, forged.spec)]
        notes += [f"forge warning: {warning}" for warning in forged.warnings]
        if shadow is not None:
            notes.append("ShadowPod on the provider: "
                         + ("matches this spec" if actual == forged.spec else
                            "differs from this spec (written from an older pod or patch; "
                            "-o yaml shows both)"))
        elif virtual_node is not None:
            notes.append(f"ShadowPod on the provider: not found ({unavailable or 'absent'})")
    return Report(data, tables, notes)
