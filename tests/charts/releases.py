"""Both charts installed on the `home` and `remote` clusters for components run as local
processes (annex-demo's way: what the templates render, each component the command line of its
Deployment with its chart's identity), peered, a namespace offloaded with a pod running remotely;
and what `helm upgrade` and `helm uninstall` do to such a release. The agent runs from the
Deployment the home controller made (the kubelet's part is the caller's), as in
tests/e2e/test_spawned_agents.py; on real clusters (E2E_*_KUBECONFIG) that Deployment's own pods
are kept Pending by a node selector, so only the test's process acts as the agent."""

from __future__ import annotations

import base64
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import NotFoundError

from annex_demo import charts
from annex_demo.components import free_port, service_account_kubeconfig, serving_certificate
from annexctl.cli import main as annexctl
from annexctl.clusters import connect
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL
from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY
from tests.e2e.test_spawned_agents import home_ca
from tests.helpers import wait_for
from tests.home_agent.agentproc import REPO, Process, unique_id

WAIT = 90.0


@dataclass
class Release:
    """One chart installed for local processes: its values, name, namespace, manifests."""

    cluster: ClusterHandle
    chart: str
    values: dict[str, Any]
    name: str
    namespace: str
    source: Path = REPO  # the tree whose chart and components these are
    manifests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def chart_dir(self) -> Path:
        return self.source / "charts" / self.chart

    def render(self) -> list[dict[str, Any]]:
        return charts.render(self.chart_dir, self.values, release=self.name,
                             namespace=self.namespace)

    def install(self) -> None:
        """`helm install`: the chart's crds/ (an older chart's), then its templates."""
        self.manifests = self.render()
        with helm_python.Chart.load(str(self.chart_dir)) as loaded:
            crds = [yaml.safe_load(crd["data"]) for crd in loaded.crds]
        charts.apply(self.cluster.api_client, crds + self.local())

    def local(self) -> list[dict[str, Any]]:
        """What is applied for components run as local processes (no webhooks: the test's
        pods carry what the home webhook would add)."""
        return [m for m in charts.for_local_processes(self.manifests)
                if m["kind"] not in charts.WEBHOOK_KINDS]

    def upgrade(self, to: Release) -> None:
        """`helm upgrade` to `to` (same release): each object created or patched where it
        differs (CRDs included), those the new chart no longer renders deleted."""
        cluster = connect(self.cluster.name, str(self.cluster.kubeconfig))
        try:
            to.manifests = to.render()
            for manifest in sorted(to.local(), key=lambda m: (
                    m["kind"] != "CustomResourceDefinition", m["kind"] != "Namespace")):
                cluster.ensure(manifest)
            kept = {(m["kind"], m["metadata"]["name"]) for m in to.manifests}
            delete_all(self.cluster, [m for m in self.local()
                                      if (m["kind"], m["metadata"]["name"]) not in kept])
        finally:
            cluster.close()

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
        if "--webhook-advertise-address" in given:
            flags["webhook_advertise_address"] = "127.0.0.1"  # not the pod's, there is none
        return [*container["command"][1:3], *charts.with_flags(
            args, kubeconfig=str(kubeconfig), log_format="text", **flags)]

    def start(self, directory: Path, **flags: str) -> Process:
        """Its Deployment's component, from its source tree."""
        return Process(self.command(directory, **flags), directory / f"{self.chart}.log",
                       cwd=self.source)

    def uninstall(self, directory: Path, kubelet: Any = None) -> subprocess.CompletedProcess[str]:
        """`helm uninstall`: the pre-delete hooks, then the release's objects."""
        hooks = charts.hooks(self.chart_dir, "pre-delete", self.values, release=self.name,
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


def spawn_agent(release: Release, provider_id: str, directory: Path,
                log: str = "agent.log") -> Process:
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
    return Process([*container.command[1:], *args], directory / log, cwd=release.source)


@dataclass
class Peered:
    """Both releases, their components running, a namespace offloaded with pod `web`."""

    home: ClusterHandle
    remote: ClusterHandle
    home_id: str
    provider_id: str
    provider: Release
    home_release: Release
    workload: str
    twin: str
    processes: dict[str, Process]

    def agent_stopped_with_its_deployment(self) -> None:
        """The kubelet's part: the agent's pod stops once its Deployment is deleted."""
        agent = self.processes["agent"]
        if agent.popen.poll() is None and not client.AppsV1Api(
                self.home.api_client).list_namespaced_deployment(
                self.home_release.namespace, label_selector=f"{REMOTE_CLUSTER_ID_LABEL}="
                f"{self.provider_id}").items:
            agent.stop()

    def start_components(self, directory: Path, generation: str = "") -> None:
        """The enforcer and the home controller from their releases, then the agent from the
        Deployment the controller made."""
        self.processes["enforcer"] = self.provider.start(
            directory, health_address="127.0.0.1", health_port=str(free_port()),
            offer_debounce_seconds="0.1")
        template = directory / f"agent{generation}.json"
        (configmap,) = [m for m in charts.of_kind(self.home_release.manifests, "ConfigMap")
                        if "agent.json" in m.get("data", {})]
        template.write_text(configmap["data"]["agent.json"])
        self.processes["controller"] = self.home_release.start(
            directory, agent_template=str(template), health_address="127.0.0.1",
            health_port=str(free_port()), drain_timeout_seconds="60")
        if generation or "agent" in self.processes:
            self.processes["agent"] = spawn_agent(self.home_release, self.provider_id,
                                                  directory, f"agent{generation}.log")

    def stop_components(self) -> None:
        for name in ("agent", "controller", "enforcer"):
            if name in self.processes:
                self.processes[name].stop()

    def uninstall(self, directory: Path) -> dict[str, subprocess.CompletedProcess[str]]:
        """`helm uninstall` of the home release, then of the provider's, each component
        stopped once its Deployment is gone; each side's hook run."""
        hooks = {"home": self.home_release.uninstall(directory,
                                                     self.agent_stopped_with_its_deployment)}
        self.processes["controller"].stop()
        self.processes["agent"].stop()
        hooks["provider"] = self.provider.uninstall(directory)
        self.processes["enforcer"].stop()
        return hooks

    def clean_up(self) -> None:
        """Every process stopped (the log of one that failed shown), the workload's namespace
        deleted."""
        for process in self.processes.values():
            if process.stop() not in (0, None, -15):
                print(f"--- {process.log_path.name}\n{process.output()[-20000:]}")
        try:
            self.home.core.delete_namespace(self.workload)
        except ApiException as error:
            if error.status != 404:
                raise

    def node_ready(self) -> None:
        node = f"liqo-{self.provider_id}"
        wait_for(lambda: any(c.type == "Ready" and c.status == "True" for c in
                             self.home.core.read_node(node).status.conditions or []),
                 timeout=WAIT, interval=0.2, message="the virtual node Ready")


def peered_with_a_pod(home: ClusterHandle, remote: ClusterHandle, directory: Path,
                      source: Path = REPO) -> Peered:
    """Both charts of the tree `source` installed, `annexctl peer` (the provider's chart
    declares the consumer; the controller makes the accepted provider's VirtualNode and its
    agent), a namespace offloaded, a pod running remotely. The caller stops the processes."""
    home_id, provider_id, release = unique_id("home"), unique_id("provider"), unique_id("u")
    provider = Release(remote, "remote-enforcer", {
        "clusterId": provider_id, "consumers": [{"clusterId": home_id}]}, release,
        unique_id("annex-provider"), source)
    values: dict[str, Any] = {"clusterId": home_id, "replicas": 1, "logFormat": "text",
                              # its own: the clusters are shared with other tests' releases
                              "storageClass": {"name": unique_id("liqo")},
                              "lease": {"renewIntervalSeconds": 1},
                              "healthCheck": {"intervalSeconds": 1, "timeoutSeconds": 1,
                                              "failureThreshold": 3}}
    if home.sim is None:  # the agent Deployment's pods must not run: the test's process does
        values["nodeSelector"] = {"annex.e2e/agents-run-as-test-processes": "true"}
    home_release = Release(home, "home-agent", values, release, unique_id("annex-home"), source)
    workload = unique_id("t")
    peered = Peered(home, remote, home_id, provider_id, provider, home_release, workload,
                    f"{workload}-{home_id}", {})
    provider.install()
    home_release.install()
    peered.start_components(directory)
    try:
        assert annexctl(["peer", "--kubeconfig", str(home.kubeconfig), "--remote-kubeconfig",
                         str(remote.kubeconfig), "--cluster-id", home_id, "--remote-cluster-id",
                         provider_id, "-n", home_release.namespace]) == 0
        peered.processes["agent"] = spawn_agent(home_release, provider_id, directory)
        peered.node_ready()
        home.core.create_namespace({"metadata": {"name": workload}})
        assert annexctl(["offload", "namespace", workload, "--kubeconfig", str(home.kubeconfig),
                         "--pod-strategy", "Remote", "--timeout", "60"]) == 0
        home.core.create_namespaced_pod(workload, {
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}],
                     **REMOTE_STRATEGY}})
        wait_for(lambda: home.core.read_namespaced_pod("web", workload).status.phase
                 == "Running", timeout=WAIT, interval=0.2, message="the offloaded pod Running")
    except BaseException:
        for process in peered.processes.values():
            process.stop()
            print(f"--- {process.log_path.name}\n{process.output()[-20000:]}")
        raise
    return peered

