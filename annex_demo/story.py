"""The demo's story, step by step: two simulated clusters, what the charts install, both
components as processes, peering, an offloaded application, a cut and its recovery."""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kubernetes import client, config

from annex_demo import app, charts, probes, views
from annex_demo.components import (
    ComponentProcess,
    ServingCertificate,
    free_port,
    service_account_kubeconfig,
    service_account_user,
    serving_certificate,
)
from annex_demo.narrator import Narrator, Probe
from kubesim.cluster import Cluster, ClusterThread
from kubesim.dns import dns_server, publish
from shared.api.virtual_node import VIRTUAL_NODE as VIRTUAL_NODE_KIND
from shared.ipremap import CidrRemap
from shared.wellknown import VIRTUAL_NODE_NAME_PREFIX

HOME_ID, REMOTE_ID = "home", "remote"
# Both clusters use the same pod CIDR, as two kind clusters do by default: home sees the remote
# pods through a remapped CIDR (the network fabric's job is out of annex's scope).
POD_CIDR, REMAPPED_POD_CIDR = "10.0.0.0/16", "10.70.0.0/16"
VIRTUAL_NODE = f"{VIRTUAL_NODE_NAME_PREFIX}{REMOTE_ID}"
TENANT_NAMESPACE = f"annex-tenant-{HOME_ID}"  # the remote-enforcer chart's default
CONSUMER_ACCOUNT = "consumer"  # the identity the remote-enforcer chart creates per consumer
DISCOVERY_DOMAIN = "demo.annex.test"


@dataclass(frozen=True)
class Timings:
    """How fast the agent notices a cut (chart values) and how long the story may wait."""

    lease_renew_seconds: float
    health_interval_seconds: float
    health_timeout_seconds: float
    failure_threshold: int
    wait_seconds: float

    @classmethod
    def of(cls, fast: bool) -> Timings:
        if fast:
            return cls(1.0, 0.5, 1.0, 2, 60.0)
        return cls(2.0, 1.0, 1.0, 3, 90.0)


@dataclass
class DemoCluster:
    """One simulated cluster as the demo uses it: the simulator's object and an admin client."""

    sim: Cluster
    kubeconfig: Path
    api: client.ApiClient

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)


@dataclass(frozen=True)
class Release:
    """A chart installed for a locally run component: its manifests, the webhook
    configurations still to register, and where the component will serve."""

    manifests: list[dict[str, Any]]
    webhooks: list[dict[str, Any]]
    certificate: ServingCertificate
    webhook_port: int
    probe_port: int  # /readyz (the enforcer's health port, the agent's metrics port)

    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"


class Story:
    def __init__(self, narrator: Narrator, workdir: Path, timings: Timings) -> None:
        self.say = narrator
        self.workdir = workdir
        self.timings = timings
        self.processes: list[ComponentProcess] = []
        self.remap = CidrRemap(POD_CIDR, REMAPPED_POD_CIDR)

    # --- the steps -------------------------------------------------------------------------------

    def tell(self, stack: contextlib.ExitStack, keep: bool) -> None:
        home, remote = self.start_clusters(stack)
        self.install_provider(remote, stack)
        release = self.discover(home, remote, stack)
        self.accept(home, remote, release, stack)
        twin = self.offload(home, remote)
        self.cut(home, remote, twin)
        self.restore(home, remote, twin)
        self.say.step("Done")
        self.say.say("annex showed the remote cluster as one virtual node, offloaded a namespace, "
                     "kept the remote pods running through a cut and converged afterwards.")
        if keep:
            self.say.say("--keep: both clusters and both components keep running; use the "
                         "kubeconfigs above. Press Ctrl-C to stop everything.")
            threading.Event().wait()

    def start_clusters(self, stack: contextlib.ExitStack) -> tuple[DemoCluster, DemoCluster]:
        self.say.step("Start two simulated clusters: home (1 worker) and remote (3 workers)")
        sims = [Cluster(HOME_ID, workers=1, pod_cidr=POD_CIDR),
                Cluster(REMOTE_ID, workers=3, pod_cidr=POD_CIDR)]
        thread = ClusterThread(sims, self.workdir)
        stack.callback(self._stopped, "clusters home and remote", thread.stop)
        thread.start()
        clusters = []
        for sim in sims:
            assert sim.kubeconfig_path is not None
            api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(sim.kubeconfig_path))
            stack.callback(api.close)
            clusters.append(DemoCluster(sim, sim.kubeconfig_path, api))
            self.say.say(f"{sim.name:7} {sim.url}   kubectl --kubeconfig {sim.kubeconfig_path} "
                         "get pods -A")
        home, remote = clusters
        self.say.table("Nodes at home", views.NODE_COLUMNS, views.node_rows(home.core))
        return home, remote

    def install_provider(self, remote: DemoCluster, stack: contextlib.ExitStack) -> None:
        self.say.step("Install the remote-enforcer chart on remote and start the enforcer")
        release = self._install_chart(remote, "remote-enforcer", {
            "clusterId": REMOTE_ID, "region": "eu-demo", "provider": "kubesim",
            "consumers": [{"clusterId": HOME_ID}]})
        self.say.ok("CRDs, the enforcer's ServiceAccount and ClusterRole, the tenant namespace "
                    f"{TENANT_NAMESPACE} with the consumer identity, its Role and Quota")
        self._run_component(
            "remote enforcer", remote, release, self._deployment(release.manifests), stack,
            "kubeconfig",
            webhook_address="127.0.0.1", webhook_port=str(release.webhook_port),
            health_address="127.0.0.1", health_port=str(release.probe_port))
        self.say.ok(f"ShadowPod admission webhook registered ({release.webhook_url})")

    def discover(self, home: DemoCluster, remote: DemoCluster,
                 stack: contextlib.ExitStack) -> Release:
        self.say.step("Discover the provider: its DNS-SD records, browsed by the home "
                      "controller the home-agent chart installs")
        zone = stack.enter_context(dns_server())
        publish(zone.zone, DISCOVERY_DOMAIN, REMOTE_ID, REMOTE_ID, api=remote.sim.url)
        self.say.ok(f"DNS server {zone.address} for {DISCOVERY_DOMAIN}: _annex._tcp PTR, SRV "
                    f"and TXT (cluster-id={REMOTE_ID}, api={remote.sim.url}), what a provider's "
                    "admin publishes in the organisation's DNS (on a LAN the enforcer can announce "
                    "itself with mDNS instead)")
        t = self.timings
        release = self._install_chart(home, "home-agent", {
            "clusterId": HOME_ID, "logFormat": "text",
            "replicas": 1,  # the demo runs the agent as one process
            "lease": {"renewIntervalSeconds": t.lease_renew_seconds},
            "healthCheck": {"intervalSeconds": t.health_interval_seconds,
                            "timeoutSeconds": t.health_timeout_seconds,
                            "failureThreshold": t.failure_threshold},
            "controller": {"discovery": {"dns": {"domains": [DISCOVERY_DOMAIN],
                                                 "servers": [zone.address],
                                                 "intervalSeconds": 1}}}})
        self.say.ok("CRDs, the ServiceAccounts and roles of the agent and the home controller, "
                    "the agents' template; no remote yet")
        (template,) = charts.of_kind(release.manifests, "ConfigMap")
        template_path = self.workdir / "agent-template.json"
        template_path.write_text(template["data"]["agent.json"])
        admission_address = f"127.0.0.1:{free_port()}"
        self._run_component(
            "home controller", home, release, self._deployment(release.manifests), stack,
            "kubeconfig", webhook_url=f"https://{admission_address}",
            agent_template=str(template_path), health_address="127.0.0.1",
            health_port=str(release.probe_port), webhook_address=admission_address)
        self.say.ok(f"the agents' admission webhook registered (https://{admission_address}): "
                    "each agent confined to its own virtual node")
        self._wait(f"ForeignCluster {REMOTE_ID} discovered (it grants nothing yet)",
                   lambda: probes.foreign_cluster_phase(home.api, REMOTE_ID, "Discovered"))
        self.say.table("ForeignClusters at home (annexctl discover)",
                       views.FOREIGN_CLUSTER_COLUMNS, views.foreign_cluster_rows(home.api))
        return release

    def accept(self, home: DemoCluster, remote: DemoCluster, release: Release,
               stack: contextlib.ExitStack) -> None:
        self.say.step("Accept the advertisement: annexctl peer --from-discovered, with the "
                      "provider admin's consent; the home controller spawns the agent")
        command = [sys.executable, "-m", "annexctl", "peer", "--kubeconfig", str(home.kubeconfig),
                   "--remote-kubeconfig", str(remote.kubeconfig), "--cluster-id", HOME_ID,
                   "--from-discovered", REMOTE_ID, "--namespace", charts.RELEASE_NAMESPACE]
        self.say.say(f"`annexctl {' '.join(command[3:])}`")
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=self.timings.wait_seconds)
        if done.returncode != 0:
            raise RuntimeError(f"annexctl peer failed ({done.returncode}): {done.stderr}")
        self.say.ok(f"a token for {service_account_user(TENANT_NAMESPACE, CONSUMER_ACCOUNT)} "
                    f"on remote in a home Secret; ForeignCluster {REMOTE_ID} accepted")
        secret = self._wait(
            f"the home controller created VirtualNode {REMOTE_ID}",
            lambda: (True, probes.virtual_node(home.api, REMOTE_ID)
                     ["spec"]["kubeconfigSecretRef"]["name"]))
        # Both clusters use one pod CIDR: the agent remaps the remote's (kubectl patch vn).
        client.CustomObjectsApi(home.api).patch_namespaced_custom_object(
            VIRTUAL_NODE_KIND.group, VIRTUAL_NODE_KIND.version, charts.RELEASE_NAMESPACE,
            VIRTUAL_NODE_KIND.plural, REMOTE_ID,
            {"spec": {"remotePodCidr": POD_CIDR, "remappedPodCidr": REMAPPED_POD_CIDR}})
        self.say.ok(f"`kubectl patch vn {REMOTE_ID}`: remote pod addresses {POD_CIDR} seen at "
                    f"home as {REMAPPED_POD_CIDR} (both clusters use the same pod CIDR)")
        agent = self._wait(f"the home controller spawned VirtualNode {REMOTE_ID}'s agent",
                           lambda: probes.spawned_agent(home.api, REMOTE_ID, REMAPPED_POD_CIDR))
        deployment = cast(dict[str, Any], home.api.sanitize_for_serialization(  # type: ignore[no-untyped-call]
            client.AppsV1Api(home.api).read_namespaced_deployment(agent,
                                                                  charts.RELEASE_NAMESPACE)))
        self.say.ok(f"Deployment {agent} with its kubeconfig Role and RoleBinding, owned by "
                    f"VirtualNode {REMOTE_ID}; its command line runs here as a process")
        remote_kubeconfig = self.workdir / "agent-remote.kubeconfig"
        self._mount_secret(home, secret, remote_kubeconfig)
        # The kubelet API on any free port (a real kubelet may hold 10250 here), trusting the
        # home cluster's CA as the chart's default trusts the pod's cluster CA.
        home_ca = self.workdir / "home-ca.crt"
        assert home.sim.tls is not None
        home_ca.write_bytes(home.sim.tls.ca_pem)
        agent_port = free_port()
        self._run_component(
            "home agent", home, release, deployment, stack, "home_kubeconfig",
            probe_port=agent_port, remote_kubeconfig=str(remote_kubeconfig),
            agent_ip="127.0.0.1", metrics_address=f"127.0.0.1:{agent_port}",
            webhook_address=f"127.0.0.1:{release.webhook_port}",
            kubelet_address="127.0.0.1", kubelet_port="0", kubelet_client_ca=str(home_ca))
        self.say.ok(f"pod webhook registered ({release.webhook_url})")
        self._wait(f"virtual node {VIRTUAL_NODE} Ready at home",
                   lambda: probes.node_ready(home.core, VIRTUAL_NODE, "True"))
        self.say.table("Nodes at home", views.NODE_COLUMNS, views.node_rows(home.core))
        self._wait(f"ForeignCluster {REMOTE_ID} Peered",
                   lambda: probes.foreign_cluster_phase(home.api, REMOTE_ID, "Peered"))

    def offload(self, home: DemoCluster, remote: DemoCluster) -> str:
        self.say.step(f"Offload namespace {app.NAMESPACE} (podOffloadingStrategy Remote) with a "
                      "Deployment (3 replicas), a Service and a ConfigMap")
        app.offload_namespace(home.api)
        twin = self._wait("NamespaceOffloading Ready, twin namespace created remotely",
                          lambda: probes.offloading_ready(home.api))
        self._wait(f"namespace {app.NAMESPACE} open to the pod webhook",
                   lambda: (app.scheduling_enabled(home.api), ""))
        app.deploy(home.api, replicas=3, greeting="hello")
        self._wait_converged(home, remote, twin, 3)
        self._wait(f"ConfigMap {app.CONFIGMAP} reflected into {twin}",
                   lambda: probes.greeting(remote.core, twin, "hello"))
        self._show_pods(home, remote, twin)
        return twin

    def cut(self, home: DemoCluster, remote: DemoCluster, twin: str) -> None:
        self.say.step("Cut the connection between the clusters (remote refuses the agent)")
        faults: Any = remote.sim.faults  # type: ignore[attr-defined]
        faults.refuse(user=service_account_user(TENANT_NAMESPACE, CONSUMER_ACCOUNT))
        self._wait(f"virtual node {VIRTUAL_NODE} NotReady",
                   lambda: probes.node_ready(home.core, VIRTUAL_NODE, "False"))
        self.say.table("Nodes at home", views.NODE_COLUMNS, views.node_rows(home.core))
        self._wait("remote pods keep running while the clusters cannot talk",
                   lambda: probes.remote_running(remote.core, twin, 3))
        victim = views.app_pods(remote.core, twin)[0]
        remote.core.delete_namespaced_pod(victim.name, twin)
        self._wait(f"remote pod {victim.name} deleted during the cut: the enforcer recreates it "
                   "from its ShadowPod", lambda: probes.recreated(remote.core, twin, victim))
        self.say.table(f"Pods on remote ({twin})", views.POD_COLUMNS,
                       [row.cells() for row in views.app_pods(remote.core, twin)])
        app.scale(home.api, 4)
        app.edit_greeting(home.api, "hello again")
        self.say.ok("meanwhile at home: scaled web to 4 replicas and edited the ConfigMap")

    def restore(self, home: DemoCluster, remote: DemoCluster, twin: str) -> None:
        self.say.step("Restore the connection")
        remote.sim.faults.restore()  # type: ignore[attr-defined]
        self._wait(f"virtual node {VIRTUAL_NODE} Ready again",
                   lambda: probes.node_ready(home.core, VIRTUAL_NODE, "True"))
        self._wait_converged(home, remote, twin, 4)
        self._wait("the ConfigMap edit made during the cut reached remote",
                   lambda: probes.greeting(remote.core, twin, "hello again"))
        self._show_pods(home, remote, twin)
        self.say.table("Nodes at home", views.NODE_COLUMNS, views.node_rows(home.core))

    # --- helpers ----------------------------------------------------------------------

    def _wait_converged(self, home: DemoCluster, remote: DemoCluster, twin: str,
                        replicas: int) -> None:
        def probe() -> tuple[bool, str]:
            result = views.convergence(views.app_pods(home.core, app.NAMESPACE),
                                       views.app_pods(remote.core, twin), replicas,
                                       VIRTUAL_NODE, self.remap)
            return result.done, result.summary

        self._wait(f"converged: {replicas} replicas offloaded", probe)

    def _show_pods(self, home: DemoCluster, remote: DemoCluster, twin: str) -> None:
        self.say.table(f"Pods at home ({app.NAMESPACE})", views.POD_COLUMNS,
                       [row.cells() for row in views.app_pods(home.core, app.NAMESPACE)])
        self.say.table(f"Pods on remote ({twin})", views.POD_COLUMNS,
                       [row.cells() for row in views.app_pods(remote.core, twin)])
        self.say.say(f"home shows remote pod addresses of {POD_CIDR} remapped into "
                     f"{REMAPPED_POD_CIDR}")

    def _install_chart(self, cluster: DemoCluster, chart: str,
                       values: dict[str, Any]) -> Release:
        """What `helm install` of `chart` creates, but the pod and its Service (and the webhook
        configurations, registered once the component serves)."""
        manifests = charts.render(chart, values)
        local = charts.for_local_processes(manifests)
        charts.apply(cluster.api, charts.chart_crds(chart)
                     + [m for m in local if m["kind"] not in charts.WEBHOOK_KINDS])
        return Release(manifests, [m for m in local if m["kind"] in charts.WEBHOOK_KINDS],
                       serving_certificate(self.workdir, f"{chart}-webhook"), free_port(),
                       free_port())

    def _run_component(self, name: str, cluster: DemoCluster, release: Release,
                       deployment: dict[str, Any], stack: contextlib.ExitStack,
                       kubeconfig_flag: str, probe_port: int | None = None,
                       webhook_url: str | None = None, **flags: str) -> None:
        """The Deployment's command line, run locally as its ServiceAccount with local
        addresses and files; then the release's webhook configurations whose Services select
        its pods, pointed at it (`webhook_url`, else the release's), when it serves them (it
        takes the webhook flags)."""
        pod = deployment["spec"]["template"]["spec"]
        account = pod["serviceAccountName"]
        kubeconfig = service_account_kubeconfig(cluster.kubeconfig, cluster.api,
                                                charts.RELEASE_NAMESPACE, account,
                                                self.workdir / f"{account}.kubeconfig")
        container = pod["containers"][0]
        command = [*container["command"], *container.get("args", [])]
        serves_webhooks = any(arg.startswith("--webhook-cert=") for arg in command)
        if serves_webhooks:
            flags = {**flags, "webhook_cert": str(release.certificate.cert),
                     "webhook_key": str(release.certificate.key)}
        if any(arg.startswith("--webhook-advertise-address=") for arg in command):
            flags["webhook_advertise_address"] = "127.0.0.1"  # not the pod's, there is none
        command = command[:3] + charts.with_flags(
            command[3:], **{kubeconfig_flag: str(kubeconfig)}, log_format="text", **flags)
        port = probe_port if probe_port is not None else release.probe_port
        self._start(name, command, f"http://127.0.0.1:{port}/readyz", stack)
        if serves_webhooks:
            charts.apply(cluster.api, [charts.pointed_at(w, webhook_url or release.webhook_url,
                                                         release.certificate.ca_bundle)
                                       for w in _served_by(release, _pod_labels(deployment))])

    def _start(self, name: str, command: list[str], ready_url: str,
               stack: contextlib.ExitStack) -> ComponentProcess:
        process = ComponentProcess(name, command, self.workdir / f"{name.replace(' ', '-')}.log",
                                   ready_url)
        self.processes.append(process)
        stack.callback(self._stopped, f"{name} (pid {process.pid})", process.stop)
        self.say.say(f"{name}: pid {process.pid}, `{' '.join(command[:3])} ...`, log "
                     f"{process.log_path}")
        self._wait(f"{name} ready", lambda: (process.ready(), ""))
        return process

    def _wait(self, what: str, probe: Probe) -> str:
        """Wait for `probe` as the narrator shows it, for at most the story's wait."""
        return self.say.wait(what, probe, self.timings.wait_seconds)

    def _stopped(self, what: str, stop: Any) -> None:
        stop()
        self.say.say(f"stopped {what}")

    def _mount_secret(self, home: DemoCluster, secret: str, path: Path) -> None:
        """The Secret's kubeconfig key as a file, as the chart's volume mount gives it."""
        data = home.core.read_namespaced_secret(secret, charts.RELEASE_NAMESPACE).data or {}
        path.write_bytes(base64.b64decode(data["kubeconfig"]))
        path.chmod(0o600)

    @staticmethod
    def _deployment(manifests: list[dict[str, Any]]) -> dict[str, Any]:
        """The release's one Deployment (the enforcer's; the home controller's)."""
        (deployment,) = charts.of_kind(manifests, "Deployment")
        return deployment



def _pod_labels(deployment: Mapping[str, Any]) -> dict[str, str]:
    return dict(deployment["spec"]["template"]["metadata"].get("labels") or {})


def _served_by(release: Release, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The release's webhook configurations whose Services select pods labelled `labels`."""
    selecting = {service["metadata"]["name"] for service in charts.of_kind(
        release.manifests, "Service")
        if (service["spec"].get("selector") or {}).items() <= labels.items()}
    return [configuration for configuration in release.webhooks if all(
        webhook["clientConfig"]["service"]["name"] in selecting
        for webhook in configuration["webhooks"])]


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    """A private directory for kubeconfigs, certificates and logs, removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="annex-demo-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
