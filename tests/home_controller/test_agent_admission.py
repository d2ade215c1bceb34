"""The agents' NodeRestriction (home_controller/agent_admission.py): the home controller serves
the chart's ValidatingWebhookConfiguration, and agent A, with its real token, may write its own
virtual node's objects and no other agent's: tokens only for pods bound to its node and running
as the account asked for, its Node and node Lease, the status and deletion of its pods, its
VirtualNode's status. An account of the release namespace that is no VirtualNode's agent is
refused; users are never sent. Allowed writes are dry runs (the webhook sees them all the same),
so that the objects stay as the fixture made them.

Clusters on this machine only (kubesim, envtest's control planes): the API server calls the
controller's webhook on loopback.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from annex.mirror import Mirror
from annex_demo.charts import pointed_at
from home_controller.agent_admission import AgentAdmission
from shared.agent_restriction import agents_by_account
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.forge.agent import AgentTemplate, agent_name, election_lease_name
from shared.forge.namespace_offloading import finalizer_name
from shared.wellknown import (
    PROVISIONED_BY_ANNOTATION,
    REAL_VOLUME_ANNOTATION,
    REMOTE_CLUSTER_ID_LABEL,
    SCHEDULING_ENABLED_LABEL,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
    VIRTUAL_NODE_TAINT_EFFECT,
    VIRTUAL_NODE_TAINT_KEY,
    VIRTUAL_STORAGE_DRIVER,
    VIRTUAL_STORAGE_PROVISIONER,
)
from tests.charts.helm import only, render
from tests.conftest import ClusterHandle
from tests.helpers import refusal, wait_for
from tests.home_agent.agentproc import Process, unique_id
from tests.home_agent.play import offload_namespace
from tests.home_agent.webhook import webhook_serving
from tests.home_controller.test_foreign_clusters import consumer_secret, offer
from tests.home_controller.test_rights import CHART, RBAC_KINDS, _configuration, _create, _delete

pytestmark = pytest.mark.local_clusters(reason="the home API server calls the controller's "
                                               "webhook on loopback")

VIRTUAL_NODES = ("offloading.liqo.io", "v1beta1", "virtualnodes")
DENIED = 'admission webhook "agents.home-agent.annex.liqo.io" denied the request: '
POOLS_OFFERED = ("gpu", "cpu")
"""The pools remote-a's provider offers."""
VIRTUAL_NODE_TAINT = {"key": VIRTUAL_NODE_TAINT_KEY, "value": "true",
                      "effect": VIRTUAL_NODE_TAINT_EFFECT}


@dataclass
class Confined:
    namespace: str
    apps: str  # an offloaded namespace (the agents' token grant is bound there)
    template: AgentTemplate
    as_a: client.ApiClient  # agent A's real token
    uids: dict[str, str]  # pod name -> uid

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.as_a)

    def token(self, account: str, bound: dict[str, Any] | None) -> Callable[[], object]:
        spec: dict[str, Any] = {"expirationSeconds": 3600}
        if bound is not None:
            spec["boundObjectRef"] = bound
        return lambda: self.core.create_namespaced_service_account_token(
            account, self.apps, {"spec": spec})

    def pod_ref(self, name: str, **changed: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": self.uids[name],
                **changed}


def _pod(name: str, node: str, account: str) -> dict[str, Any]:
    """A pod on a virtual node, tolerating its taint as offloaded pods do (else the taint
    manager deletes it at once)."""
    return {"metadata": {"name": name}, "spec": {
        "nodeName": node, "serviceAccountName": account,
        "tolerations": [{"key": VIRTUAL_NODE_TAINT_KEY, "operator": "Exists",
                         "effect": VIRTUAL_NODE_TAINT_EFFECT}],
        "containers": [{"name": "app", "image": "app:1"}]}}


def _virtual_node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"taints": [VIRTUAL_NODE_TAINT]}}


def _unless_gone(call: Callable[..., object], *args: Any) -> None:
    try:
        call(*args)
    except client.exceptions.ApiException as error:
        if error.status != 404:
            raise


@pytest.fixture(scope="module")
def confined(home: ClusterHandle, remote: ClusterHandle, crds: None,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Confined]:
    """A release's RBAC, two VirtualNodes (remote-a, whose provider offers the pools gpu and
    cpu, and remote-b, whose offer the controller cannot read) and their Nodes and node Leases,
    the controller serving the webhook the chart registers, pods in an offloaded namespace on
    both nodes."""
    directory = tmp_path_factory.mktemp("agent-admission")
    namespace = unique_id("t-agents")
    apps = f"{namespace}-apps"
    release = unique_id("r")
    manifests = render(CHART, {"clusterId": "home"}, release=release, namespace=namespace)
    rbac = [m for m in manifests if m["kind"] in RBAC_KINDS]
    template = AgentTemplate.model_validate(json.loads(
        only(manifests, "ConfigMap")["data"]["agent.json"]))
    custom = client.CustomObjectsApi(home.api_client)
    coordination = client.CoordinationV1Api(home.api_client)
    admission = client.AdmissionregistrationV1Api(home.api_client)
    nodes = {cluster_id: f"liqo-{cluster_id}" for cluster_id in ("remote-a", "remote-b")}
    serving = webhook_serving(directory)
    configuration = pointed_at(only(manifests, "ValidatingWebhookConfiguration"),
                               f"https://127.0.0.1:{serving.port}", serving.ca_bundle)
    process = None
    tenant = unique_id("t-tenant")
    for name in (namespace, apps):
        home.core.create_namespace({"metadata": {"name": name}})
    remote.core.create_namespace({"metadata": {"name": tenant}})
    offer(remote, tenant, "remote-a", {"pods": "10"}, pools=POOLS_OFFERED)
    try:
        for manifest in rbac:
            _create(home, manifest)
        home.core.create_namespaced_secret(namespace, consumer_secret(
            remote, namespace, tenant, "remote-a"))
        home.core.create_namespaced_secret(namespace, {
            "metadata": {"name": "remote-b-kubeconfig"},
            "data": {"kubeconfig": base64.b64encode(b"kind: Config\n").decode()}})
        for cluster_id, node in nodes.items():
            custom.create_namespaced_custom_object(*VIRTUAL_NODES[:2], namespace,
                                                   VIRTUAL_NODES[2], {
                "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
                "metadata": {"name": cluster_id},
                "spec": {"clusterId": cluster_id,
                         "kubeconfigSecretRef": {"name": f"{cluster_id}-kubeconfig"}}})
            home.core.create_node({"metadata": {"name": node, "labels": {
                TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: cluster_id}},
                "spec": {"taints": [VIRTUAL_NODE_TAINT]}})
            coordination.create_namespaced_lease("kube-node-lease", {
                "metadata": {"name": node}, "spec": {"holderIdentity": node}})
        offload_namespace(home, apps)  # the controller grants both agents their rights there
        for account in ("app", "other"):
            home.core.create_namespaced_service_account(apps, {"metadata": {"name": account}})
        uids = {pod["metadata"]["name"]: home.core.create_namespaced_pod(
            apps, pod).metadata.uid for pod in (
            _pod("on-a", nodes["remote-a"], "app"), _pod("on-b", nodes["remote-b"], "app"),
            _pod("other-on-a", nodes["remote-a"], "other"),
            _pod("doomed-a", nodes["remote-a"], "app"))}
        template_path = directory / "agent.json"
        template_path.write_text(template.model_dump_json(by_alias=True))
        process = Process(["-m", "home_controller", "--kubeconfig", str(home.kubeconfig),
                           "--namespace", namespace, "--agent-template", str(template_path),
                           "--health-port", "0", "--log-level", "DEBUG",
                           "--webhook-address", f"127.0.0.1:{serving.port}",
                           "--webhook-cert", str(serving.cert), "--webhook-key",
                           str(serving.key)], directory / "controller.log")
        agent = agent_name(template, "remote-a")
        token = wait_for(lambda: home.core.create_namespaced_service_account_token(
            agent, namespace, {"spec": {"expirationSeconds": 3600}}).status.token, timeout=30,
            message="the controller made agent A's ServiceAccount")
        admission.create_validating_webhook_configuration(configuration)
        confined = Confined(namespace, apps, template,
                            client.ApiClient(_configuration(home, token)), uids)
        wait_for(lambda: confined.core.patch_node(nodes["remote-a"], {}, dry_run="All"),
                 timeout=30, message="the webhook serving, the VirtualNodes listed")
        wait_for(confined.token("app", confined.pod_ref("on-a")), timeout=30,
                 message="the offloaded namespace's token grant")
        wait_for(lambda: confined.core.create_node(_virtual_node("liqo-remote-a-gpu"),
                                                   dry_run="All"),
                 timeout=30, message="remote-a's offer read: its pools' nodes allowed")
        yield confined
    except BaseException:
        if process is not None:
            print(f"--- controller\n{process.output()}")
        raise
    finally:
        _unless_gone(admission.delete_validating_webhook_configuration,
                     configuration["metadata"]["name"])
        if process is not None:
            process.stop()
        for cluster_id, node in nodes.items():
            _unless_gone(home.core.delete_node, node)
            _unless_gone(coordination.delete_namespaced_lease, node, "kube-node-lease")
            # the controller is gone: nothing drains the VirtualNode, its namespace takes it
            _unless_gone(custom.patch_namespaced_custom_object, *VIRTUAL_NODES[:2], namespace,
                         VIRTUAL_NODES[2], cluster_id, {"metadata": {"finalizers": None}})
        for name in (namespace, apps):
            home.core.delete_namespace(name)
        remote.core.delete_namespace(tenant)
        # the controller made remote-a's ForeignCluster (its consumer Secret came)
        _unless_gone(custom.delete_cluster_custom_object, FOREIGN_CLUSTER.group,
                     FOREIGN_CLUSTER.version, FOREIGN_CLUSTER.plural, "remote-a")
        for manifest in rbac:
            _delete(home, manifest)


def test_a_token_only_for_a_pod_bound_to_its_node_running_as_the_account(
        confined: Confined) -> None:
    issued: Any = confined.token("app", confined.pod_ref("on-a"))()
    assert issued.status.token
    for bound, rule in (
            (confined.pod_ref("on-b"), "requested a token bound to a pod scheduled on a "
                                       "different node"),
            (confined.pod_ref("other-on-a"), "requested a token for service account 'app' "
                                             "bound to pod 'other-on-a', which runs as 'other'"),
            (None, "requested a token not bound to a pod"),
            ({"apiVersion": "v1", "kind": "Pod", "name": "on-a"},
             "requested a token with a pod binding without a uid"),
            (confined.pod_ref("on-a", uid="0000"), "does not match the UID in record"),
            ({"apiVersion": "v1", "kind": "Pod", "name": "nowhere", "uid": "1"},
             "pods 'nowhere' not found")):
        message = refusal(confined.token("app", bound))
        assert message.startswith(DENIED) and rule in message, message


def test_its_node_and_its_node_lease_only(confined: Confined) -> None:
    coordination = client.CoordinationV1Api(confined.as_a)
    patch = {"metadata": {"annotations": {"checked": "yes"}}}
    confined.core.patch_node("liqo-remote-a", patch, dry_run="All")
    confined.core.patch_node_status("liqo-remote-a", {"status": {}}, dry_run="All")
    coordination.patch_namespaced_lease("liqo-remote-a", "kube-node-lease", patch,
                                        dry_run="All")
    for write, rule in (
            (lambda: confined.core.patch_node("liqo-remote-b", patch, dry_run="All"),
             "agent of node 'liqo-remote-a' is not allowed to modify node 'liqo-remote-b'"),
            (lambda: confined.core.patch_node_status("liqo-remote-b", {"status": {}},
                                                     dry_run="All"),
             "is not allowed to modify node 'liqo-remote-b'"),
            (lambda: confined.core.create_node({"metadata": {"name": "liqo-elsewhere"}},
                                               dry_run="All"),
             "is not allowed to modify node 'liqo-elsewhere'"),
            (lambda: confined.core.patch_node("liqo-remote-a", {"spec": {"taints": []}},
                                              dry_run="All"),
             f"may not remove the {VIRTUAL_NODE_TAINT_KEY}:NoExecute taint from its node"),
            (lambda: coordination.patch_namespaced_lease("liqo-remote-b", "kube-node-lease",
                                                         patch, dry_run="All"),
             "can only access the node lease with the same name as its node"),
            (lambda: coordination.create_namespaced_lease(
                confined.namespace, {"metadata": {"name": election_lease_name("remote-b")}},
                dry_run="All"),
             f"can only access its election lease '{election_lease_name('remote-a')}'")):
        message = refusal(write)
        assert message.startswith(DENIED) and rule in message, message
    coordination.create_namespaced_lease(
        confined.namespace, {"metadata": {"name": election_lease_name("remote-a")}},
        dry_run="All")


def test_its_pools_nodes_and_their_leases_and_no_other_agents(confined: Confined) -> None:
    """A provider with pools is one node per pool, `<its node>-<pool>`: the agent makes them,
    with their Leases; another agent's pools' nodes stay out of its reach."""
    coordination = client.CoordinationV1Api(confined.as_a)

    def pool_node(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"taints": [VIRTUAL_NODE_TAINT]}}

    def lease(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"holderIdentity": name}}

    confined.core.create_node(pool_node("liqo-remote-a-gpu"), dry_run="All")
    coordination.create_namespaced_lease("kube-node-lease", lease("liqo-remote-a-gpu"),
                                         dry_run="All")
    for write, rule in (
            (lambda: confined.core.create_node(pool_node("liqo-remote-b-gpu"), dry_run="All"),
             "agent of node 'liqo-remote-a' is not allowed to modify node 'liqo-remote-b-gpu'"),
            (lambda: coordination.create_namespaced_lease(
                "kube-node-lease", lease("liqo-remote-b-gpu"), dry_run="All"),
             "can only access the node lease with the same name as its node"),
            (lambda: confined.core.create_node({"metadata": {"name": "liqo-remote-a-gpu"}},
                                               dry_run="All"),
             f"may not remove the {VIRTUAL_NODE_TAINT_KEY}:NoExecute taint from its node")):
        message = refusal(write)
        assert message.startswith(DENIED) and rule in message, message


def test_only_the_nodes_of_the_pools_its_providers_offer_declares(
        home: ClusterHandle, confined: Confined) -> None:
    """A node of a pool the offer does not declare is neither created nor made schedulable
    (it would draw pods the provider does not take); one of a pool withdrawn since may be kept
    cordoned."""
    for pool in POOLS_OFFERED:
        confined.core.create_node(_virtual_node(f"liqo-remote-a-{pool}"), dry_run="All")
    message = refusal(lambda: confined.core.create_node(_virtual_node("liqo-remote-a-tpu"),
                                                        dry_run="All"))
    assert message == (f"{DENIED}agent of node 'liqo-remote-a' may not create node "
                       "'liqo-remote-a-tpu': remote-a's ResourceOffer declares no pool 'tpu' "
                       "(its pools: cpu, gpu)"), message
    home.core.create_node(_virtual_node("liqo-remote-a-tpu"))  # of a pool withdrawn since
    try:
        message = refusal(lambda: confined.core.patch_node(
            "liqo-remote-a-tpu", {"spec": {"unschedulable": None}}, dry_run="All"))
        assert message.startswith(f"{DENIED}agent of node 'liqo-remote-a' may not make "
                                  "schedulable node 'liqo-remote-a-tpu'"), message
        confined.core.patch_node("liqo-remote-a-tpu", {"spec": {"unschedulable": True}},
                                 dry_run="All")
    finally:
        home.core.delete_node("liqo-remote-a-tpu")


def test_the_status_and_deletion_of_its_pods_only(confined: Confined) -> None:
    own = confined.core.read_namespaced_pod("on-a", confined.apps)
    confined.core.replace_namespaced_pod_status("on-a", confined.apps, own, dry_run="All")
    other = confined.core.read_namespaced_pod("on-b", confined.apps)
    message = refusal(lambda: confined.core.replace_namespaced_pod_status(
        "on-b", confined.apps, other, dry_run="All"))
    assert message.startswith(DENIED) and (
        "can only update pod status for pods with spec.nodeName set to its node") in message
    own.metadata.labels = {**(own.metadata.labels or {}), "steered": "here"}
    message = refusal(lambda: confined.core.replace_namespaced_pod_status(
        "on-a", confined.apps, own, dry_run="All"))
    assert "cannot update labels through pod status" in message, message
    message = refusal(lambda: confined.core.delete_namespaced_pod("on-b", confined.apps))
    assert "can only delete pods with spec.nodeName set to its node" in message, message
    confined.core.delete_namespaced_pod("doomed-a", confined.apps, grace_period_seconds=0)


def test_its_virtual_node_s_status_only(confined: Confined) -> None:
    custom = client.CustomObjectsApi(confined.as_a)

    def patch_status(name: str) -> object:
        return custom.patch_namespaced_custom_object_status(
            *VIRTUAL_NODES[:2], confined.namespace, VIRTUAL_NODES[2], name,
            {"status": {"nodeName": "liqo-remote-a"}}, dry_run="All")

    patch_status("remote-a")
    message = refusal(lambda: patch_status("remote-b"))
    assert message.startswith(DENIED) and (
        f"can only write VirtualNode {confined.namespace}/remote-a") in message, message


def test_the_scheduling_label_of_a_namespace_only(confined: Confined) -> None:
    confined.core.patch_namespace(confined.apps, {"metadata": {"labels": {
        SCHEDULING_ENABLED_LABEL: "true"}}}, dry_run="All")
    for patch in ({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
                  {"metadata": {"annotations": {"owner": "agent"}}}):
        message = refusal(lambda patch=patch: confined.core.patch_namespace(
            confined.apps, patch, dry_run="All"))
        assert message.startswith(DENIED) and (
            f"may change only the {SCHEDULING_ENABLED_LABEL} label of namespace "
            f"'{confined.apps}'") in message, message


def test_its_own_finalizer_and_status_entries_of_a_namespace_offloading(
        confined: Confined) -> None:
    custom = client.CustomObjectsApi(confined.as_a)
    where = ("offloading.liqo.io", "v1beta1", confined.apps, "namespaceoffloadings",
             "offloading")
    own, other = finalizer_name("remote-a"), finalizer_name("remote-b")
    custom.patch_namespaced_custom_object(*where, {"metadata": {"finalizers": [own]}},
                                          dry_run="All")
    for patch, rule in (
            ({"metadata": {"finalizers": [other]}}, f"may change only its own finalizer ({own})"),
            ({"spec": {"podOffloadingStrategy": "Local"}}, "may change only its own finalizer")):
        message = refusal(lambda patch=patch: custom.patch_namespaced_custom_object(
            *where, patch, dry_run="All"))
        assert message.startswith(DENIED) and rule in message, message
    condition = [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                  "lastTransitionTime": "2026-12-07T10:00:00Z"}]
    custom.patch_namespaced_custom_object_status(*where, {"status": {
        "remoteNamespacesConditions": {"remote-a": condition}}}, dry_run="All")
    message = refusal(lambda: custom.patch_namespaced_custom_object_status(*where, {"status": {
        "remoteNamespacesConditions": {"remote-b": condition}}}, dry_run="All"))
    assert message.startswith(DENIED) and (
        "may write only its cluster's entries ('remote-a') of status.remoteNamespacesConditions"
    ) in message, message


def _volume(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {
        PROVISIONED_BY_ANNOTATION: VIRTUAL_STORAGE_PROVISIONER}}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "liqo",
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "apps",
                     "name": "data", "uid": "claim-uid"}, **spec}}


def _pinned(node: str) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}


def test_only_the_volumes_it_provisions(home: ClusterHandle, confined: Confined) -> None:
    """The virtual provisioner's volumes on its own node, and the copies of real volumes bound
    to the real claims made for them: never a host path or a share of its choosing pre-bound to
    someone's claim, never another node's volume."""
    virtual = {"csi": {"driver": VIRTUAL_STORAGE_DRIVER, "volumeHandle": "remote-a/t/data"}}
    confined.core.create_persistent_volume(
        _volume("pvc-own", nodeAffinity=_pinned("liqo-remote-a"), **virtual), dry_run="All")
    real = home.core.create_persistent_volume({
        "metadata": {"name": f"{confined.namespace}-real"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/data/real"}, "storageClassName": "standard",
                 "persistentVolumeReclaimPolicy": "Delete", "nodeAffinity": _pinned("worker"),
                 "claimRef": {"namespace": "apps", "name": "real-claim-uid"}}})
    try:
        copy = _volume("pvc-copy", hostPath={"path": "/data/real"},
                       nodeAffinity=_pinned("worker"))
        copy["metadata"]["annotations"][REAL_VOLUME_ANNOTATION] = real.metadata.name
        confined.core.create_persistent_volume(copy, dry_run="All")
        forged = _volume("pvc-forged", hostPath={"path": "/etc"}, nodeAffinity=_pinned("worker"))
        forged["metadata"]["annotations"][REAL_VOLUME_ANNOTATION] = real.metadata.name
        stranger = {**_volume("pvc-nfs", nfs={"server": "10.0.0.1", "path": "/"})}
        stranger["metadata"]["annotations"] = {}
        for volume, rule in (
                (_volume("pvc-b", nodeAffinity=_pinned("liqo-remote-b"), **virtual),
                 "persistentvolume 'pvc-b' is not pinned to node 'liqo-remote-a'"),
                (_volume("pvc-host", hostPath={"path": "/"},
                         nodeAffinity=_pinned("liqo-remote-a")),
                 f"persistentvolume 'pvc-host' has a source other than the "
                 f"{VIRTUAL_STORAGE_DRIVER} driver"),
                (forged, f"persistentvolume 'pvc-forged' is not a copy of "
                         f"'{real.metadata.name}'"),
                (stranger, f"persistentvolume 'pvc-nfs' is not provisioned by "
                           f"{VIRTUAL_STORAGE_PROVISIONER}")):
            message = refusal(lambda volume=volume: confined.core.create_persistent_volume(
                volume, dry_run="All"))
            assert message.startswith(DENIED) and rule in message, message
        message = refusal(lambda: confined.core.delete_persistent_volume(
            real.metadata.name, dry_run="All"))
        assert message.startswith(DENIED) and "is not provisioned by" in message, message
    finally:
        home.core.delete_persistent_volume(real.metadata.name)


def test_an_account_of_the_release_that_is_no_agent_may_act_for_no_node(
        home: ClusterHandle, confined: Confined) -> None:
    """RBAC gives the agents' rights to every account of the release namespace; the webhook
    refuses those that no VirtualNode makes. A user (here the admin) is never sent."""
    token = home.core.create_namespaced_service_account_token(
        "default", confined.namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    stranger = client.CoreV1Api(client.ApiClient(_configuration(home, token)))
    message = refusal(lambda: stranger.patch_node("liqo-remote-a", {}, dry_run="All"))
    assert message.startswith(DENIED) and (
        f"system:serviceaccount:{confined.namespace}:default is the agent of no VirtualNode"
    ) in message, message
    home.core.patch_node("liqo-remote-b", {}, dry_run="All")


def test_a_virtual_node_whose_cluster_id_is_refused_makes_no_agent_of_any_account() -> None:
    """Its truncated agent name is another agent's: that account stays the other's agent."""
    template = AgentTemplate(name_prefix="annex-home-agent", namespace="annex-system",
                             image="annex:test", webhook_cert_secret="annex-home-agent-tls")
    legitimate = "p" * 45  # the longest allowed: its agent's name has 62 characters
    impostor = f"{legitimate}-x"  # truncated to 63 characters, then its "-" trimmed
    account = agent_name(template, legitimate)
    assert agent_name(template, impostor) == account
    virtual_nodes = [{"apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
                      "metadata": {"name": cluster_id, "namespace": "annex-system"},
                      "spec": {"clusterId": cluster_id}} for cluster_id in (impostor, legitimate)]
    agent = agents_by_account(template, virtual_nodes).get(account)
    assert agent is not None and agent.cluster_id == legitimate


def test_the_agents_are_known_again_once_a_virtual_node_changes() -> None:
    """The index of agents by account follows the VirtualNodes' mirror (built once a change,
    not once a request)."""
    template = AgentTemplate(name_prefix="annex-home-agent", namespace="annex-system",
                             image="annex:test", webhook_cert_secret="annex-home-agent-tls")
    virtual_nodes = Mirror()
    no_api: Any = None
    admission = AgentAdmission(no_api, template, virtual_nodes, lambda: True)
    account = agent_name(template, "provider")
    assert admission.agent(account) is None
    virtual_nodes.apply("ADDED", {
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
        "metadata": {"name": "provider", "namespace": "annex-system"},
        "spec": {"clusterId": "provider", "nodeName": "big"}})
    agent = admission.agent(account)
    assert agent is not None and agent.node == "big"
    virtual_nodes.apply("DELETED", {"metadata": {"name": "provider",
                                                 "namespace": "annex-system"}})
    assert admission.agent(account) is None
