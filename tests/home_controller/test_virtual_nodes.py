"""The home controller's VirtualNode controller on a cluster (the controller a real process, its
agent template the home chart's): a VirtualNode gets its agent's Deployment,
PodDisruptionBudget, Role and RoleBinding, exactly as forged and owned by it; an unchanged object
is not written again, a changed VirtualNode rolls the Deployment; a name taken by an object the
VirtualNode does not own is left alone and said in an Event, and a cluster id that would name the
agent after the release's own objects makes nothing; a deleted VirtualNode waits for
its finalizer, which the controller removes once the agent is gone, and the garbage collector
takes the rest."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.virtual_node import FINALIZER, VIRTUAL_NODE, VirtualNode
from shared.forge.agent import SPEC_HASH_ANNOTATION, AgentTemplate, agent_name, agent_objects
from shared.forge.namespace_offloading import finalizer_name
from shared.wellknown import POOL_LABEL, REMOTE_CLUSTER_ID_LABEL, TYPE_LABEL, TYPE_VIRTUAL_NODE
from tests.charts.helm import only, render
from tests.charts.test_home_agent_chart import CHART
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id
from tests.home_agent.play import custom, offload_namespace

KINDS = {"ServiceAccount": ("v1", "ServiceAccount"), "Service": ("v1", "Service"),
         "Role": ("rbac.authorization.k8s.io/v1", "Role"),
         "RoleBinding": ("rbac.authorization.k8s.io/v1", "RoleBinding"),
         "Deployment": ("apps/v1", "Deployment"),
         "PodDisruptionBudget": ("policy/v1", "PodDisruptionBudget")}


def agent_template(namespace: str, directory: Path) -> tuple[Path, AgentTemplate]:
    """The home chart's agent template for a release in `namespace`, as the controller reads
    it from the ConfigMap the chart mounts."""
    manifests = render(CHART, {"clusterId": "home"}, namespace=namespace)
    data = only(manifests, "ConfigMap")["data"]["agent.json"]
    path = directory / "agent.json"
    path.write_text(data)
    return path, AgentTemplate.model_validate(json.loads(data))


def read(home: ClusterHandle, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    api_version, kind_name = KINDS.get(kind, (VIRTUAL_NODE.api_version, kind))
    resource = home.dynamic.resources.get(api_version=api_version, kind=kind_name)
    try:
        return dict(resource.get(name=name, namespace=namespace).to_dict())
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def apply_virtual_node(home: ClusterHandle, namespace: str, cluster_id: str,
                       **spec: Any) -> dict[str, Any]:
    home.core.create_namespaced_secret(namespace, {
        "metadata": {"name": f"{cluster_id}-kubeconfig"},
        "data": {"kubeconfig": base64.b64encode(b"apiVersion: v1\nkind: Config\n").decode()}})
    resource = home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                          kind=VIRTUAL_NODE.kind)
    return dict(resource.create(namespace=namespace, body={
        **VIRTUAL_NODE.type_meta(),
        "metadata": {"name": cluster_id},
        "spec": {"clusterId": cluster_id,
                 "kubeconfigSecretRef": {"name": f"{cluster_id}-kubeconfig"}, **spec}}).to_dict())


def held_virtual_node(home: ClusterHandle, namespace: str, cluster_id: str) -> None:
    """A VirtualNode the controller holds with its drain finalizer."""
    apply_virtual_node(home, namespace, cluster_id)
    wait_for(lambda: FINALIZER in (read(home, VIRTUAL_NODE.kind, namespace, cluster_id) or {})
             .get("metadata", {}).get("finalizers", []), timeout=30, message="the finalizer")


def delete_virtual_node(home: ClusterHandle, namespace: str, cluster_id: str) -> None:
    home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version, kind=VIRTUAL_NODE.kind
                               ).delete(name=cluster_id, namespace=namespace)


def events_on(home: ClusterHandle, namespace: str, name: str) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in home.core.list_namespaced_event(namespace).items
            if e.involved_object.name == name and e.involved_object.kind == VIRTUAL_NODE.kind]


def test_a_virtual_node_gets_its_agent_and_takes_it_along(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    path, template = agent_template(namespace, tmp_path)
    start_controller("--namespace", namespace, "--agent-template", str(path),
                     "--drain-timeout-seconds", "60")
    cluster_id = unique_id("provider")
    apply_virtual_node(home, namespace, cluster_id)
    name = agent_name(template, cluster_id)

    vn = wait_for(lambda: (obj := read(home, VIRTUAL_NODE.kind, namespace, cluster_id))
                  and (obj.get("status") or {}).get("agent") and obj, timeout=30,
                  message="the VirtualNode's agent reported")
    assert FINALIZER in vn["metadata"]["finalizers"]
    assert vn["status"]["phase"] in ("Creating", "Running")
    assert vn["status"]["agent"]["deployment"] == name
    for wanted in agent_objects(VirtualNode.model_validate(vn), template):
        made = wait_for(lambda w=wanted: read(home, w["kind"], namespace, w["metadata"]["name"]),
                        timeout=30, message=f"{wanted['kind']} made")
        assert made["metadata"]["ownerReferences"][0]["uid"] == vn["metadata"]["uid"]
        if wanted["kind"] == "Deployment":
            container = made["spec"]["template"]["spec"]["containers"][0]
            forged = wanted["spec"]["template"]["spec"]["containers"][0]
            assert container["args"] == forged["args"]
            assert container["volumeMounts"][0]["mountPath"] == "/etc/annex/remote"
            volume = made["spec"]["template"]["spec"]["volumes"][0]
            assert volume["secret"]["secretName"] == f"{cluster_id}-kubeconfig"
        if wanted["kind"] == "Role":
            assert made["rules"][0]["resourceNames"] == [f"{cluster_id}-kubeconfig"]
        if wanted["kind"] == "RoleBinding":
            assert made["subjects"] == [{"kind": "ServiceAccount", "name": name,
                                         "namespace": namespace}]
    role_version = read(home, "Role", namespace, f"{name}-kubeconfig")["metadata"][
        "resourceVersion"]

    # A changed VirtualNode rolls the Deployment; what did not change is not written.
    resource = home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                          kind=VIRTUAL_NODE.kind)
    resource.patch(name=cluster_id, namespace=namespace, body={"spec": {"nodeName": "elsewhere"}},
                   content_type="application/merge-patch+json")
    wait_for(lambda: "--node-name=elsewhere" in read(home, "Deployment", namespace, name)[
        "spec"]["template"]["spec"]["containers"][0]["args"], timeout=30,
        message="the Deployment rolled")
    assert read(home, "Role", namespace, f"{name}-kubeconfig")["metadata"][
        "resourceVersion"] == role_version

    # Deleted: drained (no node, no pod, no offloaded namespace here), the agent goes, then the
    # finalizer; the garbage collector takes the rest.
    resource.delete(name=cluster_id, namespace=namespace)
    wait_for(lambda: read(home, VIRTUAL_NODE.kind, namespace, cluster_id) is None, timeout=60,
             message="the VirtualNode gone")
    for kind, object_name in (("Deployment", name), ("PodDisruptionBudget", name),
                              ("ServiceAccount", name), ("Role", f"{name}-kubeconfig"),
                              ("RoleBinding", f"{name}-kubeconfig")):
        wait_for(lambda k=kind, n=object_name: read(home, k, namespace, n) is None, timeout=30,
                 message=f"{kind} {object_name} gone")
    reasons = [reason for reason, _ in events_on(home, namespace, cluster_id)]
    assert "Drained" in reasons
    # The ForeignCluster the VirtualNode was shown as is no longer accepted: nothing makes the
    # drained VirtualNode again.
    foreign_clusters = home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                                  kind=FOREIGN_CLUSTER.kind)
    assert foreign_clusters.get(name=cluster_id).spec.accepted is False
    foreign_clusters.delete(name=cluster_id)


def test_a_name_taken_by_someone_else_is_left_alone_and_said(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    path, template = agent_template(namespace, tmp_path)
    cluster_id = unique_id("provider")
    role_name = f"{agent_name(template, cluster_id)}-kubeconfig"
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": role_name},
                                            "rules": [{"apiGroups": [""], "resources": ["pods"],
                                                       "verbs": ["get"]}]})
    start_controller("--namespace", namespace, "--agent-template", str(path))
    apply_virtual_node(home, namespace, cluster_id)
    # A cluster id comes from the provider: one that would name its agent after the release's
    # own objects (here the controller's account and Deployment) makes nothing.
    apply_virtual_node(home, namespace, "controller")
    wait_for(lambda: (read(home, VIRTUAL_NODE.kind, namespace, cluster_id) or {}).get(
        "status", {}).get("phase") == "Refused", timeout=30, message="phase Refused")
    wait_for(lambda: (read(home, VIRTUAL_NODE.kind, namespace, "controller") or {}).get(
        "status", {}).get("phase") == "Refused", timeout=30, message="phase Refused")
    release_name = agent_name(template, "controller")
    assert any(reason == "InvalidVirtualNode" and f"{release_name}, a name of the release's own"
               in message for reason, message in events_on(home, namespace, "controller"))
    for kind in KINDS:
        assert read(home, kind, namespace, release_name) is None, kind
    assert read(home, "Role", namespace, f"{release_name}-kubeconfig") is None
    wait_for(lambda: any(reason == "AgentObjectNameTaken" and role_name in message
                         for reason, message in events_on(home, namespace, cluster_id)),
             timeout=30, message="an Event says which name is taken")
    role = rbac.read_namespaced_role(role_name, namespace)
    assert role.metadata.owner_references is None and role.rules[0].resources == ["pods"]
    # The rest of the agent is made all the same.
    wait_for(lambda: read(home, "Deployment", namespace, agent_name(template, cluster_id)),
             timeout=30, message="the Deployment made")
    resource = home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                          kind=VIRTUAL_NODE.kind)
    for name in (cluster_id, "controller"):
        resource.delete(name=name, namespace=namespace)
    wait_for(lambda: all(read(home, VIRTUAL_NODE.kind, namespace, name) is None
                         for name in (cluster_id, "controller")), timeout=60,
             message="the VirtualNodes gone")
    assert rbac.read_namespaced_role(role_name, namespace).rules[0].resources == ["pods"]


def test_an_agent_of_the_shared_account_moves_to_its_own_by_a_rolling_update(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """An agent an older release made runs as the release's one account, with no account of
    its own: the controller makes its account and updates the same Deployment (a rolling
    update), recreating nothing."""
    path, template = agent_template(namespace, tmp_path)
    start_controller("--namespace", namespace, "--agent-template", str(path))
    cluster_id = unique_id("provider")
    apply_virtual_node(home, namespace, cluster_id)
    name = agent_name(template, cluster_id)
    made = wait_for(lambda: read(home, "Deployment", namespace, name), timeout=30,
                    message="the Deployment made")
    apps = client.AppsV1Api(home.api_client)
    apps.patch_namespaced_deployment(name, namespace, {
        "metadata": {"annotations": {SPEC_HASH_ANNOTATION: "older-release"}},
        "spec": {"template": {"spec": {"serviceAccountName": template.name_prefix}}}})
    home.core.delete_namespaced_service_account(name, namespace)

    def moved() -> dict[str, Any] | None:
        deployment = read(home, "Deployment", namespace, name)
        return deployment if deployment and deployment["spec"]["template"]["spec"][
            "serviceAccountName"] == name else None

    deployment = wait_for(moved, timeout=30, message="the Deployment back on its own account")
    assert deployment["metadata"]["uid"] == made["metadata"]["uid"]
    assert deployment["spec"].get("strategy", {}).get("type", "RollingUpdate") == "RollingUpdate"
    wait_for(lambda: read(home, "ServiceAccount", namespace, name), timeout=30,
             message="its account made")


def test_a_changed_template_converges_the_agents_it_made(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """The chart restarts the controller with the new template (one replica here): the
    Deployment follows and the budget, needed no more, goes."""
    path, template = agent_template(namespace, tmp_path)
    first = start_controller("--namespace", namespace, "--agent-template", str(path))
    cluster_id = unique_id("provider")
    apply_virtual_node(home, namespace, cluster_id)
    name = agent_name(template, cluster_id)
    wait_for(lambda: read(home, "PodDisruptionBudget", namespace, name), timeout=30,
             message="the budget made")
    first.stop()
    manifests = render(CHART, {"clusterId": "home", "replicas": 1}, namespace=namespace)
    path.write_text(only(manifests, "ConfigMap")["data"]["agent.json"])
    start_controller("--namespace", namespace, "--agent-template", str(path))
    wait_for(lambda: read(home, "Deployment", namespace, name)["spec"]["replicas"] == 1,
             timeout=30, message="the Deployment down to one replica")
    wait_for(lambda: read(home, "PodDisruptionBudget", namespace, name) is None, timeout=30,
             message="the budget deleted")
    delete_virtual_node(home, namespace, cluster_id)
    wait_for(lambda: read(home, VIRTUAL_NODE.kind, namespace, cluster_id) is None, timeout=60,
             message="the VirtualNode gone")


def test_a_drain_that_waits_says_for_what_and_gives_up_after_its_timeout(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """No agent runs here: the virtual node (made by the test, as an agent would) is cordoned
    and its pod deleted (the test confirms the deletion, as the agent would once the remote pod
    is gone), then the drain waits for the agent's finalizer on an offloaded namespace, says
    so, and past --drain-timeout-seconds removes the agent, the Node and the finalizer all the
    same."""
    path, _ = agent_template(namespace, tmp_path)
    start_controller("--namespace", namespace, "--agent-template", str(path),
                     "--drain-timeout-seconds", "8")
    cluster_id = unique_id("provider")
    node_name = f"liqo-{cluster_id}"
    home.core.create_node({"metadata": {"name": node_name, "labels": {
        TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: cluster_id}}})
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "bound"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "nginx"}]}})
    offload_namespace(home, namespace)
    d = NAMESPACE_OFFLOADING
    custom(home).patch_namespaced_custom_object(
        d.group, d.version, namespace, d.plural, "offloading",
        {"metadata": {"finalizers": [finalizer_name(cluster_id)]}})
    held_virtual_node(home, namespace, cluster_id)

    delete_virtual_node(home, namespace, cluster_id)
    wait_for(lambda: home.core.read_namespaced_pod("bound", namespace).metadata.deletion_timestamp,
             timeout=30, message="the pod on the virtual node deleted")
    home.core.delete_namespaced_pod("bound", namespace, grace_period_seconds=0)
    wait_for(lambda: read(home, VIRTUAL_NODE.kind, namespace, cluster_id) is None, timeout=60,
             message="the VirtualNode gone after the timeout")
    events = events_on(home, namespace, cluster_id)
    reasons = [reason for reason, _ in events]
    assert "Cordoned" in reasons and "DrainTimedOut" in reasons and "Drained" in reasons
    assert any(reason == "Draining" and namespace in message for reason, message in events), (
        events)
    assert any(reason == "Draining" and "pod(s)" in message for reason, message in events)
    wait_for(lambda: not home.core.list_node(field_selector=f"metadata.name={node_name}").items,
             timeout=30, message="the Node deleted")
    custom(home).patch_namespaced_custom_object(
        d.group, d.version, namespace, d.plural, "offloading", {"metadata": {"finalizers": []}})


def test_a_drain_takes_every_pool_node_of_the_provider_and_no_other(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """No agent runs here: the provider's pool nodes (`liqo-<provider>-<pool>`, labelled with
    their pool as the agent makes them) and a pod on one of them are the test's. Every pool node
    is cordoned, its pod evicted, and deleted; a node merely named like one (another provider's
    label) is left alone."""
    path, _ = agent_template(namespace, tmp_path)
    start_controller("--namespace", namespace, "--agent-template", str(path),
                     "--drain-timeout-seconds", "300")
    cluster_id = unique_id("provider")
    pools = [f"liqo-{cluster_id}-{pool}" for pool in ("gpu", "general")]
    for name, pool in zip(pools, ("gpu", "general"), strict=True):
        home.core.create_node({"metadata": {"name": name, "labels": {
            TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: cluster_id,
            POOL_LABEL: pool}}})
    stranger = f"liqo-{cluster_id}-zone"
    home.core.create_node({"metadata": {"name": stranger, "labels": {
        TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: "someone-else",
        POOL_LABEL: "zone"}}})
    running_pod(home, namespace, "trainer", pools[0])
    held_virtual_node(home, namespace, cluster_id)

    delete_virtual_node(home, namespace, cluster_id)
    wait_for(lambda: terminating(home, namespace, "trainer"), timeout=30,
             message="the pod on the gpu pool's node evicted")
    assert all(home.core.read_node(name).spec.unschedulable for name in pools)
    home.core.delete_namespaced_pod("trainer", namespace, grace_period_seconds=0)
    wait_for(lambda: read(home, VIRTUAL_NODE.kind, namespace, cluster_id) is None, timeout=60,
             message="the VirtualNode drained")
    for name in pools:
        wait_for(lambda n=name: not home.core.list_node(
            field_selector=f"metadata.name={n}").items, timeout=30, message=f"{name} deleted")
    assert not home.core.read_node(stranger).spec.unschedulable
    home.core.delete_node(stranger)
    drained = [message for reason, message in events_on(home, namespace, cluster_id)
               if reason == "Drained"]
    assert drained and all(name in drained[0] for name in pools), drained


def running_pod(home: ClusterHandle, namespace: str, name: str, node_name: str,
                owner: dict[str, Any] | None = None) -> None:
    """A pod bound to the virtual node, Running and Ready as its agent reports it."""
    metadata: dict[str, Any] = {"name": name, "labels": {"app": name}}
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    home.core.create_namespaced_pod(namespace, {"metadata": metadata, "spec": {
        "nodeName": node_name, "containers": [{"name": "c", "image": "nginx"}]}})
    home.core.patch_namespaced_pod_status(name, namespace, {"status": {
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})


def terminating(home: ClusterHandle, namespace: str, name: str) -> bool:
    return home.core.read_namespaced_pod(name, namespace).metadata.deletion_timestamp is not None


def test_a_drain_evicts_as_the_disruption_budgets_allow_and_names_the_pods_without_controller(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """No agent runs here: the virtual node and its pods' Running status are the test's, as an
    agent would make them. The pod a PodDisruptionBudget guards stays while the budget allows
    no disruption (the Draining Event says why) and is evicted once it does; the pod without a
    controller is named in an Event, then evicted."""
    path, _ = agent_template(namespace, tmp_path)
    start_controller("--namespace", namespace, "--agent-template", str(path),
                     "--drain-timeout-seconds", "300")
    cluster_id = unique_id("provider")
    node_name = f"liqo-{cluster_id}"
    home.core.create_node({"metadata": {"name": node_name, "labels": {
        TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: cluster_id}}})
    owner = home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    running_pod(home, namespace, "guarded", node_name, {
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid,
        "controller": True})
    running_pod(home, namespace, "loose", node_name)
    policy = client.PolicyV1Api(home.api_client)
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    wait_for(lambda: (policy.read_namespaced_pod_disruption_budget("guarded", namespace)
                      .status.current_healthy == 1), timeout=30, message="the budget computed")
    held_virtual_node(home, namespace, cluster_id)

    delete_virtual_node(home, namespace, cluster_id)
    wait_for(lambda: terminating(home, namespace, "loose"), timeout=30,
             message="the pod without a controller evicted")
    wait_for(lambda: any(
        reason == "Draining" and "evictions refused" in message and f"{namespace}/guarded"
        in message for reason, message in events_on(home, namespace, cluster_id)),
        timeout=30, message="the refused eviction said")
    assert not terminating(home, namespace, "guarded")
    assert any(reason == "UncontrolledPods" and f"{namespace}/loose" in message
               and "guarded" not in message
               for reason, message in events_on(home, namespace, cluster_id))

    policy.patch_namespaced_pod_disruption_budget("guarded", namespace,
                                                  {"spec": {"minAvailable": 0}})
    wait_for(lambda: terminating(home, namespace, "guarded"), timeout=30,
             message="evicted once its budget allows it")
    for name in ("guarded", "loose"):  # the agent's part, once the remote pods are gone
        home.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_for(lambda: read(home, VIRTUAL_NODE.kind, namespace, cluster_id) is None, timeout=60,
             message="the VirtualNode drained")
    assert "DrainTimedOut" not in [reason for reason, _ in events_on(home, namespace,
                                                                      cluster_id)]


def test_a_drain_names_the_remote_claims_the_provider_keeps(
        home: ClusterHandle, namespace: str, start_controller: Any, tmp_path: Path) -> None:
    """No agent runs here: the agent's finalizer and the claims it reports kept
    (status.retainedRemoteClaims) are the test's. The VirtualNode being drained waits for the
    agent's finalizer (which a deleted virtual node's agent drops while it leaves the twin and
    its claims to the provider), lists the claims in its status, and names them in its Drained
    Event: never waiting out the drain timeout for data it keeps."""
    path, _ = agent_template(namespace, tmp_path)
    start_controller("--namespace", namespace, "--agent-template", str(path),
                     "--drain-timeout-seconds", "120")
    cluster_id = unique_id("provider")
    offload_namespace(home, namespace)
    d = NAMESPACE_OFFLOADING
    custom(home).patch_namespaced_custom_object(
        d.group, d.version, namespace, d.plural, "offloading",
        {"metadata": {"finalizers": [finalizer_name(cluster_id)]}})
    custom(home).patch_namespaced_custom_object_status(
        d.group, d.version, namespace, d.plural, "offloading",
        {"status": {"retainedRemoteClaims": {cluster_id: ["data-db-0"]}}})
    held_virtual_node(home, namespace, cluster_id)

    delete_virtual_node(home, namespace, cluster_id)
    wait_for(lambda: ((read(home, VIRTUAL_NODE.kind, namespace, cluster_id) or {})
                      .get("status") or {}).get("retainedRemoteClaims")
             == [f"{namespace}/data-db-0"], timeout=30, message="the kept claim in the status")
    # The Event is written apart from the status: on a real server it may be listed later.
    wait_for(lambda: any(reason == "Draining"
                         and "the agent to remove the provider's namespaces" in message
                         for reason, message in events_on(home, namespace, cluster_id)),
             timeout=30, message="the Draining Event naming the agent's namespaces")
    # The agent lets the NamespaceOffloading go, its claims still reported on it.
    custom(home).patch_namespaced_custom_object(
        d.group, d.version, namespace, d.plural, "offloading", {"metadata": {"finalizers": []}})
    wait_for(lambda: read(home, VIRTUAL_NODE.kind, namespace, cluster_id) is None, timeout=60,
             message="the VirtualNode drained once its agent let the namespace go")
    drained = [message for reason, message in events_on(home, namespace, cluster_id)
               if reason == "Drained"]
    assert drained and f"the provider keeps the claims {namespace}/data-db-0" in drained[0]
    assert "DrainTimedOut" not in [reason for reason, _ in events_on(home, namespace,
                                                                      cluster_id)]
