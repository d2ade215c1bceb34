"""`helm uninstall` of both charts leaves nothing behind and hangs on nothing.

One scenario: both charts installed (what their templates render; the components run as local
processes with their charts' identities, as annex-demo runs them), `annexctl peer`, the home
controller spawning the agent, a namespace offloaded with a pod running remotely. Then each
release is uninstalled as Helm does it: its pre-delete hooks rendered from the chart, their
ServiceAccount and RBAC created in hook-weight order, the hook Job's command run as that
ServiceAccount (its RBAC is what lets it work), the hook objects deleted once it succeeded, then
every object of the release deleted (and its component stopped, as the kubelet stops the pods of
a deleted Deployment). Afterwards no annex object, finalizer, Node, twin namespace or RBAC
object made by annex is left on either cluster, and nothing is terminating.

The agent runs from the Deployment the controller made (the kubelet's part is the test's), as in
tests/e2e/test_spawned_agents.py; on real clusters (E2E_*_KUBECONFIG) that Deployment's own pods
are kept Pending by a node selector, so only the test's process acts as the agent.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError

from annex_demo import charts
from annex_demo.components import free_port, service_account_kubeconfig, serving_certificate
from annexctl.cli import main as annexctl
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.virtual_node import VIRTUAL_NODE
from shared.wellknown import (
    ORIGIN_CLUSTER_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    SCHEDULING_ENABLED_LABEL,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
)
from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY
from tests.e2e.test_spawned_agents import home_ca
from tests.helpers import wait_for
from tests.home_agent.agentproc import Process, unique_id

INSTANCE = "app.kubernetes.io/instance"
WAIT = 90.0


@dataclass
class Release:
    """One chart installed for local processes: its values, name, namespace, manifests."""

    cluster: ClusterHandle
    chart: str
    values: dict[str, Any]
    name: str
    namespace: str
    manifests: list[dict[str, Any]] = field(default_factory=list)

    def install(self) -> None:
        self.manifests = charts.render(self.chart, self.values, release=self.name,
                                       namespace=self.namespace)
        local = charts.for_local_processes(self.manifests)
        charts.apply(self.cluster.api_client, charts.chart_crds(self.chart) + [
            m for m in local if m["kind"] not in charts.WEBHOOK_KINDS])

    def identity(self, account: str, directory: Path) -> Path:
        return service_account_kubeconfig(self.cluster.kubeconfig, self.cluster.api_client,
                                          self.namespace, account,
                                          directory / f"{account}.kubeconfig")

    def command(self, directory: Path, **flags: str) -> list[str]:
        """The Deployment's command line run as its ServiceAccount, `python -m ...`, serving
        its webhook (when it has one) on a local port with a certificate of its own."""
        (deployment,) = charts.of_kind(self.manifests, "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        args = container.get("args", [])
        kubeconfig = self.identity(pod["serviceAccountName"], directory)
        given = {a.split("=", 1)[0]: a.partition("=")[2] for a in args}
        if "--webhook-cert" in given:
            certificate = serving_certificate(directory, self.chart)
            flags = {**flags, "webhook_cert": str(certificate.cert),
                     "webhook_key": str(certificate.key)}
        if "--webhook-address" in given:
            flags["webhook_address"] = "127.0.0.1" + (
                f":{free_port()}" if ":" in given["--webhook-address"] else "")
        if "--webhook-port" in given:
            flags["webhook_port"] = str(free_port())
        return [*container["command"][1:3], *charts.with_flags(
            args, kubeconfig=str(kubeconfig), log_format="text", **flags)]

    def uninstall(self, directory: Path, kubelet: Any = None) -> subprocess.CompletedProcess[str]:
        """`helm uninstall`: the pre-delete hooks, then the release's objects."""
        hooks = charts.hooks(self.chart, "pre-delete", self.values, release=self.name,
                             namespace=self.namespace)
        identity = [h for h in hooks if h["kind"] != "Job"]  # the Job is run by the test
        charts.apply(self.cluster.api_client, identity)
        (job,) = charts.of_kind(hooks, "Job")
        pod = job["spec"]["template"]["spec"]
        container = pod["containers"][0]
        kubeconfig = self.identity(pod["serviceAccountName"], directory)
        assert container["command"] == ["python", "-m", "annexctl"]
        hook = subprocess.Popen(
            [sys.executable, "-m", "annexctl", *container["args"], "--kubeconfig",
             str(kubeconfig)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            while hook.poll() is None:
                if kubelet is not None:
                    kubelet()
                try:
                    hook.wait(0.5)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if hook.poll() is None:
                hook.kill()
        output = hook.stdout.read() if hook.stdout else ""
        done = subprocess.CompletedProcess(hook.args, hook.returncode, output, "")
        if done.returncode == 0:  # hook-delete-policy: hook-succeeded
            delete_all(self.cluster, identity)
        delete_all(self.cluster, self.manifests)
        return done


def delete_all(cluster: ClusterHandle, manifests: list[dict[str, Any]]) -> None:
    """Helm's deletion of a release's objects: those it must keep (the CRDs) stay."""
    for manifest in manifests:
        annotations = manifest["metadata"].get("annotations") or {}
        if annotations.get("helm.sh/resource-policy") == "keep":
            continue
        resource = cluster.dynamic.resources.get(api_version=manifest["apiVersion"],
                                                 kind=manifest["kind"])
        try:
            resource.delete(name=manifest["metadata"]["name"],
                            namespace=manifest["metadata"].get("namespace"))
        except NotFoundError:
            pass


def items(cluster: ClusterHandle, api_version: str, kind: str, **selectors: Any
          ) -> list[dict[str, Any]]:
    resource = cluster.dynamic.resources.get(api_version=api_version, kind=kind)
    return [dict(i) for i in resource.get(**selectors).to_dict()["items"]]


@dataclass
class Scenario:
    home: ClusterHandle
    remote: ClusterHandle
    home_id: str
    provider_id: str
    workload: str  # the offloaded home namespace
    twin: str
    home_release: Release
    provider_release: Release
    hooks: dict[str, subprocess.CompletedProcess[str]]
    unpeer: tuple[int, str]


@pytest.fixture(scope="module")
def uninstalled(home: ClusterHandle, remote: ClusterHandle,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    directory = tmp_path_factory.mktemp("uninstall")
    home_id, provider_id = unique_id("home"), unique_id("provider")
    release = unique_id("u")
    processes: list[Process] = []
    provider = Release(remote, "remote-enforcer", {
        "clusterId": provider_id, "consumers": [{"clusterId": home_id}]}, release,
        unique_id("annex-provider"))
    values: dict[str, Any] = {"clusterId": home_id, "replicas": 1, "logFormat": "text",
                              "lease": {"renewIntervalSeconds": 1},
                              "healthCheck": {"intervalSeconds": 1, "timeoutSeconds": 1,
                                              "failureThreshold": 3}}
    if home.sim is None:  # the agent Deployment's pods must not run: the test's process does
        values["nodeSelector"] = {"annex.e2e/agents-run-as-test-processes": "true"}
    home_release = Release(home, "home-agent", values, release, unique_id("annex-home"))
    workload = unique_id("t")
    try:
        provider.install()
        processes.append(Process(provider.command(
            directory, health_address="127.0.0.1", health_port=str(free_port()),
            offer_debounce_seconds="0.1"),
            directory / "enforcer.log"))
        home_release.install()
        (template,) = charts.of_kind(home_release.manifests, "ConfigMap")
        template_path = directory / "agent.json"
        template_path.write_text(template["data"]["agent.json"])
        processes.append(Process(home_release.command(
            directory, agent_template=str(template_path), health_address="127.0.0.1",
            health_port=str(free_port()), drain_timeout_seconds="60"),
            directory / "controller.log"))

        # Peering: annexctl peer (the provider's chart declared the consumer); the controller
        # makes the VirtualNode of the accepted ForeignCluster, and its agent.
        assert annexctl(["peer", "--kubeconfig", str(home.kubeconfig), "--remote-kubeconfig",
                         str(remote.kubeconfig), "--cluster-id", home_id, "--remote-cluster-id",
                         provider_id, "-n", home_release.namespace]) == 0
        agent = spawn_agent(home_release, provider_id, directory)
        processes.append(agent)
        node = f"liqo-{provider_id}"
        wait_for(lambda: any(c.type == "Ready" and c.status == "True"
                             for c in home.core.read_node(node).status.conditions or []),
                 timeout=WAIT, message="the virtual node Ready")

        home.core.create_namespace({"metadata": {"name": workload}})
        assert annexctl(["offload", "namespace", workload, "--kubeconfig", str(home.kubeconfig),
                         "--pod-strategy", "Remote", "--timeout", "60"]) == 0
        twin = f"{workload}-{home_id}"
        home.core.create_namespaced_pod(workload, {
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}],
                     **REMOTE_STRATEGY}})
        wait_for(lambda: home.core.read_namespaced_pod("web", workload).status.phase
                 == "Running", timeout=WAIT, message="the offloaded pod Running")
        assert remote.core.read_namespaced_pod("web", twin)

        def kubelet() -> None:
            """The agent's pod stops once the controller deleted its Deployment."""
            if agent.popen.poll() is None and not client.AppsV1Api(
                    home.api_client).list_namespaced_deployment(
                    home_release.namespace, label_selector=f"{REMOTE_CLUSTER_ID_LABEL}="
                    f"{provider_id}").items:
                agent.stop()

        hooks = {"home": home_release.uninstall(directory, kubelet)}
        processes[1].stop()  # the controller's Deployment is gone
        agent.stop()
        hooks["provider"] = provider.uninstall(directory)
        processes[0].stop()
        unpeer_args = ["unpeer", "--kubeconfig", str(home.kubeconfig), "--remote-kubeconfig",
                       str(remote.kubeconfig), "--cluster-id", home_id, "--remote-cluster-id",
                       provider_id, "-n", home_release.namespace, "--timeout", "30"]
        unpeer_code = annexctl(unpeer_args)
        yield Scenario(home, remote, home_id, provider_id, workload, twin, home_release,
                       provider, hooks, (unpeer_code, ""))
    finally:
        for process in reversed(processes):
            if process.stop() not in (0, None, -15):
                print(f"--- {process.log_path.name}\n{process.output()[-20000:]}")
        for namespace in (workload,):
            try:
                home.core.delete_namespace(namespace)
            except ApiException as error:
                if error.status != 404:
                    raise


def spawn_agent(release: Release, provider_id: str, directory: Path) -> Process:
    """The agent from the Deployment the controller made for the provider's VirtualNode: its
    command line, as its ServiceAccount, with the kubeconfig Secret where it is mounted."""
    home = release.cluster
    apps = client.AppsV1Api(home.api_client)

    def made() -> Any:
        found = apps.list_namespaced_deployment(
            release.namespace, label_selector=f"{REMOTE_CLUSTER_ID_LABEL}={provider_id}").items
        return found[0] if found else None

    deployment = wait_for(made, timeout=WAIT, message="the controller made the agent")
    pod = deployment.spec.template.spec
    (container,) = pod.containers
    (volume,) = [v for v in pod.volumes if v.name == "remote-kubeconfig"]
    secret = home.core.read_namespaced_secret(volume.secret.secret_name, release.namespace)
    mounted = directory / "remote.kubeconfig"
    mounted.write_bytes(base64.b64decode(secret.data["kubeconfig"]))
    identity = release.identity(pod.service_account_name, directory)
    certificate = serving_certificate(directory, "agent")
    args = charts.with_flags(
        container.args, remote_kubeconfig=str(mounted), home_kubeconfig=str(identity),
        agent_ip="127.0.0.1", metrics_address=f"127.0.0.1:{free_port()}",
        webhook_address=f"127.0.0.1:{free_port()}", webhook_cert=str(certificate.cert),
        webhook_key=str(certificate.key), kubelet_address="127.0.0.1", kubelet_port="0",
        log_format="text")
    ca = home_ca(home, directory)
    args = charts.with_flags(args, kubelet_client_ca=str(ca)) if ca is not None else [
        a for a in args if not a.startswith("--kubelet-client-ca=")]
    return Process([*container.command[1:], *args], directory / "agent.log")


def gone(leftovers: Any) -> list[str]:
    """What is left once the garbage collector and namespace deletions had their time."""
    try:
        wait_for(lambda: not leftovers(), timeout=60, interval=0.5)
    except AssertionError:
        pass
    left: list[str] = leftovers()
    return left


def test_both_hooks_succeed_and_unpeer_finds_nothing_hanging(uninstalled: Scenario) -> None:
    for side, done in uninstalled.hooks.items():
        assert done.returncode == 0, f"{side} hook: {done.stdout}"
    assert "VirtualNode" in uninstalled.hooks["home"].stdout
    assert uninstalled.unpeer[0] == 0


def test_nothing_annex_made_is_left_at_home(uninstalled: Scenario) -> None:
    home, release = uninstalled.home, uninstalled.home_release
    namespace = release.namespace
    assert not items(home, VIRTUAL_NODE.api_version, VIRTUAL_NODE.kind, namespace=namespace)
    assert not items(home, "v1", "Node", label_selector=(
        f"{TYPE_LABEL}={TYPE_VIRTUAL_NODE},{REMOTE_CLUSTER_ID_LABEL}={uninstalled.provider_id}"))
    assert not [f for f in items(home, FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind)
                if f["metadata"]["name"] == uninstalled.provider_id]
    # The user's NamespaceOffloading stays, without any agent's finalizer, and the namespace
    # without the agents' label; the standalone pod went with the drain.
    (offloading,) = items(home, NAMESPACE_OFFLOADING.api_version, NAMESPACE_OFFLOADING.kind,
                          namespace=uninstalled.workload)
    assert not offloading["metadata"].get("finalizers")
    labels = home.core.read_namespace(uninstalled.workload).metadata.labels or {}
    assert SCHEDULING_ENABLED_LABEL not in labels
    assert not home.core.list_namespaced_pod(uninstalled.workload).items

    def leftovers() -> list[str]:
        """Everything in the release namespace, and the release's cluster-wide RBAC."""
        found = []
        for api_version, kind in (("v1", "ServiceAccount"), ("v1", "Secret"),
                                  ("v1", "ConfigMap"), ("coordination.k8s.io/v1", "Lease"),
                                  ("apps/v1", "Deployment"), ("policy/v1", "PodDisruptionBudget"),
                                  ("rbac.authorization.k8s.io/v1", "Role"),
                                  ("rbac.authorization.k8s.io/v1", "RoleBinding")):
            found += [f"{kind} {i['metadata']['name']}"
                      for i in items(home, api_version, kind, namespace=namespace)
                      if not i["metadata"]["name"].startswith("default")
                      and i["metadata"]["name"] != "kube-root-ca.crt"]
        for kind in ("ClusterRole", "ClusterRoleBinding", "RoleBinding"):
            found += [f"{kind} {i['metadata']['name']}" for i in items(
                home, "rbac.authorization.k8s.io/v1", kind,
                label_selector=f"{INSTANCE}={release.name}")]
        return found

    assert gone(leftovers) == []


def test_nothing_annex_made_is_left_on_the_provider(uninstalled: Scenario) -> None:
    remote, release = uninstalled.remote, uninstalled.provider_release

    def leftovers() -> list[str]:
        found = [f"Namespace {n.metadata.name}" for n in remote.core.list_namespace(
            label_selector=f"{ORIGIN_CLUSTER_LABEL}={uninstalled.home_id}").items]
        found += [f"Namespace {n.metadata.name}" for n in remote.core.list_namespace().items
                  if n.metadata.name == f"annex-tenant-{uninstalled.home_id}"]
        found += [f"NamespaceMap {m['metadata']['namespace']}/{m['metadata']['name']}"
                  for m in items(remote, NAMESPACE_MAP.api_version, NAMESPACE_MAP.kind)
                  if m["metadata"]["namespace"] == f"annex-tenant-{uninstalled.home_id}"]
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            found += [f"{kind} {i['metadata']['name']}" for i in items(
                remote, "rbac.authorization.k8s.io/v1", kind,
                label_selector=f"{INSTANCE}={release.name}")]
        found += [f"ServiceAccount {i['metadata']['name']}" for i in items(
            remote, "v1", "ServiceAccount", namespace=release.namespace)
            if i["metadata"]["name"] != "default"]
        return found

    assert gone(leftovers) == []
    assert uninstalled.twin not in {n.metadata.name for n in remote.core.list_namespace().items}
