"""End to end: an agent spawned from a VirtualNode. The home controller runs as a real process
with the identity and agent template the home chart gives it; applying a VirtualNode (and its
kubeconfig Secret) makes it create the agent's Deployment, PodDisruptionBudget and kubeconfig
Role/RoleBinding. The test then runs the agent from that Deployment's command line as two
processes (a kubelet's part: kubesim starts no containers, as the demo does), a leader and a
standby, with the Secret's kubeconfig where the Deployment mounts it; the virtual node turns
Ready and runs an offloaded pod. Deleting the VirtualNode drains it: cordoned, the pod deleted
(its ShadowPod and remote pod with it), the offloaded namespace withdrawn from the provider, the
agent Deployment deleted (the test stops the processes, as the kubelet would), then the Node and
the election Lease; the garbage collector takes the rest.

Runs unchanged on real clusters (E2E_HOME_KUBECONFIG, E2E_REMOTE_KUBECONFIG): there the agent
Deployment's own pods are kept Pending (a node selector no node matches), so that only the
test's processes act as the agent."""

from __future__ import annotations

import base64
import contextlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, utils
from kubernetes.client.exceptions import ApiException

from annex_demo.charts import with_flags
from annex_demo.components import free_port, serving_certificate
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.virtual_node import FINALIZER, VIRTUAL_NODE
from shared.forge.agent import agent_name, election_lease_name
from shared.forge.namespace_offloading import finalizer_name
from tests.charts.helm import ROOT, only, render
from tests.conftest import ClusterHandle
from tests.e2e.conftest import (
    _kubeconfig_with_token,
    agent_home_kubeconfig,
    consumer_kubeconfig,
    remapped_cidr,
    remote_pod_cidr,
)
from tests.e2e.test_offloading import offloaded, remote_pods, replica
from tests.helpers import wait_for
from tests.home_agent.agentproc import Process, unique_id
from tests.home_agent.play import namespace_offloading
from tests.remote_enforcer.conftest import PROVIDER_ID, Enforcer

NAMESPACE = "annex-e2e-agents"  # where agent_home_kubeconfig puts the agents' identity
CHART = ROOT / "charts" / "home-agent"
FAST = {"leaderElection": {"leaseDurationSeconds": 6, "renewDeadlineSeconds": 4,
                           "retryPeriodSeconds": 1},
        "lease": {"renewIntervalSeconds": 1},
        "healthCheck": {"intervalSeconds": 1, "timeoutSeconds": 1, "failureThreshold": 3},
        "logLevel": "DEBUG", "logFormat": "text"}


def controller_kubeconfig(home: ClusterHandle, manifests: list[dict[str, Any]],
                          directory: Path) -> Path:
    """The controller's identity exactly as the chart grants it."""
    for manifest in manifests:
        if manifest["metadata"]["name"].endswith("-controller") and manifest["kind"] in (
                "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            try:
                utils.create_from_dict(home.api_client, manifest)
            except utils.FailToCreateError as error:
                if any(e.status != 409 for e in error.api_exceptions):
                    raise
    account = next(m for m in manifests if m["kind"] == "ServiceAccount"
                   and m["metadata"]["name"].endswith("-controller"))["metadata"]["name"]
    token = home.core.create_namespaced_service_account_token(
        account, NAMESPACE, {"spec": {"expirationSeconds": 3600}}).status.token
    return _kubeconfig_with_token(home, token, directory / "controller.kubeconfig")


def virtual_nodes(home: ClusterHandle) -> Any:
    return home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                      kind=VIRTUAL_NODE.kind)


def read_virtual_node(home: ClusterHandle, name: str) -> dict[str, Any] | None:
    try:
        return dict(virtual_nodes(home).get(name=name, namespace=NAMESPACE).to_dict())
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def found(read: Any, *args: Any) -> bool:
    try:
        read(*args)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def readyz(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return str(answer.read().decode())
    except OSError:
        return ""


def home_ca(home: ClusterHandle, directory: Path) -> Path | None:
    """The home API server's CA, as the pod's service-account CA the chart points at."""
    config = yaml.safe_load(home.kubeconfig.read_text())
    data = config["clusters"][0]["cluster"].get("certificate-authority-data")
    if not data:
        return None
    path = directory / "home-ca.crt"
    path.write_bytes(base64.b64decode(data))
    return path


@pytest.fixture
def processes(request: pytest.FixtureRequest) -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    failed = getattr(request.node, "rep_call", None)
    for process in started:
        process.stop()
        if failed is not None and failed.failed:
            print(f"--- {process.log_path.name}\n{process.output()[-20000:]}")


def test_a_virtual_node_applied_spawns_its_agent_and_deleted_drains_it(
        home: ClusterHandle, remote: ClusterHandle, enforcer: Enforcer, namespace: str,
        processes: list[Process], tmp_path: Path) -> None:
    home_id = unique_id("home")
    agent_home = agent_home_kubeconfig(home, tmp_path)
    consumer = consumer_kubeconfig(remote, home_id, tmp_path)
    values: dict[str, Any] = {"clusterId": home_id, **FAST}
    if home.sim is None:  # a real cluster would run the Deployment's pods too
        values["nodeSelector"] = {"annex.e2e/agents-run-as-test-processes": "true"}
    manifests = render(CHART, values, namespace=NAMESPACE)
    template = tmp_path / "agent.json"
    template.write_text(only(manifests, "ConfigMap")["data"]["agent.json"])
    processes.append(Process(
        ["-m", "home_controller", "--kubeconfig",
         str(controller_kubeconfig(home, manifests, tmp_path)), "--namespace", NAMESPACE,
         "--agent-template", str(template), "--drain-timeout-seconds", "120",
         "--health-port", "0", "--log-level", "DEBUG"], tmp_path / "controller.log"))

    # kubectl apply: the provider's kubeconfig Secret and the VirtualNode.
    secret_name = f"{home_id}-kubeconfig"
    home.core.create_namespaced_secret(NAMESPACE, {
        "metadata": {"name": secret_name},
        "data": {"kubeconfig": base64.b64encode(consumer.read_bytes()).decode()}})
    node_name = f"liqo-{home_id}"
    spec: dict[str, Any] = {"clusterId": PROVIDER_ID, "nodeName": node_name,
                            "kubeconfigSecretRef": {"name": secret_name}}
    cidr = remote_pod_cidr(remote)
    if cidr:
        spec.update(remotePodCidr=cidr, remappedPodCidr=remapped_cidr(cidr))
    vn_name = home_id
    virtual_nodes(home).create(namespace=NAMESPACE, body={
        **VIRTUAL_NODE.type_meta(),
        "metadata": {"name": vn_name}, "spec": spec})

    apps = client.AppsV1Api(home.api_client)
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    policy = client.PolicyV1Api(home.api_client)
    name = agent_name_for(manifests, PROVIDER_ID)
    deployment = wait_for(lambda: apps.read_namespaced_deployment(name, NAMESPACE), timeout=30,
                          message="the agent Deployment created")
    budget = wait_for(lambda: policy.read_namespaced_pod_disruption_budget(name, NAMESPACE),
                      timeout=30, message="its PodDisruptionBudget created")
    assert budget.spec.min_available == 1
    role = rbac.read_namespaced_role(f"{name}-kubeconfig", NAMESPACE)
    assert role.rules[0].resource_names == [secret_name]
    pod_spec = deployment.spec.template.spec
    [container] = pod_spec.containers
    [mount] = [m for m in container.volume_mounts if m.name == "remote-kubeconfig"]
    [volume] = [v for v in pod_spec.volumes if v.name == "remote-kubeconfig"]
    assert volume.secret.secret_name == secret_name and deployment.spec.replicas == 2

    # The kubelet's part: the container's command line, the Secret where it is mounted, the
    # pod's IP and ports (two replicas on one machine), the release's TLS Secrets as files.
    mounted = tmp_path / "remote" / "kubeconfig"
    mounted.parent.mkdir()
    secret = home.core.read_namespaced_secret(secret_name, NAMESPACE)
    mounted.write_bytes(base64.b64decode(secret.data["kubeconfig"]))
    assert f"--remote-kubeconfig={mount.mount_path}/kubeconfig" in container.args
    certificate = serving_certificate(tmp_path, "webhook")
    ca = home_ca(home, tmp_path)
    ports = []
    for replica_index in range(deployment.spec.replicas):
        port = free_port()
        ports.append(port)
        args = with_flags(
            container.args, remote_kubeconfig=str(mounted), home_kubeconfig=str(agent_home),
            agent_ip="127.0.0.1", metrics_address=f"127.0.0.1:{port}",
            webhook_address=f"127.0.0.1:{free_port()}", webhook_cert=str(certificate.cert),
            webhook_key=str(certificate.key), kubelet_address="127.0.0.1", kubelet_port="0")
        if ca is not None:
            args = with_flags(args, kubelet_client_ca=str(ca))
        else:
            args = [a for a in args if not a.startswith("--kubelet-client-ca=")]
        assert container.command[:2] == ["python", "-m"]
        processes.append(Process([*container.command[1:], *args],
                                 tmp_path / f"agent-{replica_index}.log"))
        if replica_index == 0:  # the first leads: the second finds the Lease taken
            wait_for(lambda: readyz(ports[0]).startswith("ok: leader"), timeout=60,
                     message="the first replica leads")
    wait_for(lambda: readyz(ports[1]).startswith("ok: standby"), timeout=60,
             message="the second replica stands by")

    def node_ready() -> bool:
        node = home.core.read_node(node_name)
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)

    wait_for(node_ready, timeout=60, message="the virtual node Ready")
    vn = wait_for(lambda: (obj := read_virtual_node(home, vn_name)) and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []) and obj, timeout=60,
        message="the VirtualNode Ready")
    assert vn["status"]["nodeName"] == node_name
    assert vn["status"]["agent"]["deployment"] == name
    assert vn["status"]["phase"] in ("Creating", "Running")
    assert FINALIZER in vn["metadata"]["finalizers"]

    # An offloaded pod on it.
    twin = offloaded(home, namespace)
    replica(home, namespace, "web-0")
    wait_for(lambda: "web-0" in remote_pods(remote, twin), timeout=60,
             message="the pod offloaded")

    # kubectl delete: drained before the agent goes.
    virtual_nodes(home).delete(name=vn_name, namespace=NAMESPACE)
    wait_for(lambda: home.core.read_node(node_name).spec.unschedulable, timeout=30,
             message="the virtual node cordoned")
    wait_for(lambda: not found(home.core.read_namespaced_pod, "web-0", namespace), timeout=60,
             message="its pod deleted (released once the remote pod is gone)")
    wait_for(lambda: not found(remote.core.read_namespace, twin), timeout=60,
             message="the provider's namespace withdrawn")
    wait_for(lambda: not found(apps.read_namespaced_deployment, name, NAMESPACE), timeout=60,
             message="the agent Deployment deleted")
    assert finalizer_name(PROVIDER_ID) not in (
        namespace_offloading(home, namespace)["metadata"].get("finalizers") or [])
    assert read_virtual_node(home, vn_name) is not None  # held until the agent is gone
    for process in reversed(processes[1:]):  # the kubelet stops the pods: standby, then leader
        process.stop()
    wait_for(lambda: read_virtual_node(home, vn_name) is None, timeout=60,
             message="the VirtualNode gone")
    assert not found(home.core.read_node, node_name)
    coordination = client.CoordinationV1Api(home.api_client)
    assert not found(coordination.read_namespaced_lease, election_lease_name(PROVIDER_ID),
                     NAMESPACE)
    for read, object_name in ((policy.read_namespaced_pod_disruption_budget, name),
                              (rbac.read_namespaced_role, f"{name}-kubeconfig"),
                              (rbac.read_namespaced_role_binding, f"{name}-kubeconfig")):
        wait_for(lambda r=read, n=object_name: not found(r, n, NAMESPACE), timeout=30,
                 message=f"{object_name} collected")
    reasons = {e.reason for e in home.core.list_namespaced_event(NAMESPACE).items
               if e.involved_object.name == vn_name}
    assert {"Cordoned", "Draining", "Drained"} <= reasons, reasons
    home.core.delete_namespaced_secret(secret_name, NAMESPACE)
    # The ForeignCluster the controller showed the VirtualNode's provider as (source Manual).
    with contextlib.suppress(ApiException):
        home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                   kind=FOREIGN_CLUSTER.kind).delete(name=PROVIDER_ID)


def agent_name_for(manifests: list[dict[str, Any]], cluster_id: str) -> str:
    from shared.forge.agent import AgentTemplate

    data = json.loads(only(manifests, "ConfigMap")["data"]["agent.json"])
    return agent_name(AgentTemplate.model_validate(data), cluster_id)
