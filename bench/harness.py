"""A run: the clients of both clusters (the driver's, the bare client's), the components, the
watches' timeline, the request counts; what a run sets up before its scenarios and removes
after them, also after a failure or an interruption."""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trustme
import yaml

from annex.api_errors import ApiError
from annex.api_paths import core_path, custom_path, group_path
from annex.kube import ClientLimits, load_connection
from annex.kubeapi import ClusterApi
from annex.request_metrics import RequestMetrics
from annex.transport_errors import TransportError
from bench import bare, components
from bench.api_calls import created, readable
from bench.clusters import CapacityError, room_for_pods
from bench.components import BY_RESOURCE, Component, http_get, scrape
from bench.figures import WRITE_VERBS
from bench.names import Names
from bench.processes import cpu_seconds, free_port
from bench.watching import Timeline, follow, gather_limited, until_async
from shared.api.builtin import LEASES
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.quota import DEFAULT_NAMESPACE_OBJECT_COUNTS, QUOTA
from shared.api.shadowpod import SHADOWPOD
from shared.forge.configmap import remote_configmap
from shared.forge.metadata import reflection_config
from shared.forge.pod_status import QUOTA_STATUS_UNKNOWN
from shared.ownership import ownership_labels
from shared.wellknown import (
    KUBE_ROOT_CA_CONFIGMAP,
    NODE_LEASE_NAMESPACE,
    REMOTE_CLUSTER_ID_LABEL,
    TENANT_NAMESPACE_LABEL,
    VIRTUAL_NODE_TAINT_KEY,
)

ROOT = Path(__file__).resolve().parents[1]
TOLERATIONS = [{"key": key, "operator": "Exists", "effect": "NoExecute"} for key in (
    VIRTUAL_NODE_TAINT_KEY,
    # The agent is stopped while a phase's pods are created (minutes at N = 50,000): its node
    # goes unreachable, and pods tolerating that for the default 300 s would be evicted.
    "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")]
WEBHOOKS = group_path("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
MUTATING_WEBHOOKS = group_path("admissionregistration.k8s.io", "v1",
                               "mutatingwebhookconfigurations")


@dataclass
class Bench:
    args: argparse.Namespace
    directory: Path
    kubeconfigs: dict[str, str]
    """Per cluster (home, remote): the one kubeconfig everything uses."""
    remote_pod_cidr: str | None
    server_pids: list[int]
    """The kubesim processes, one per cluster (none on real clusters)."""
    names: Names
    remote_pods_needed: dict[str, int] = field(default_factory=dict)
    """What each chosen scenario leaves at the remote (each keeps its pods for the next)."""
    timeline: Timeline = field(default_factory=Timeline)
    results: dict[str, Any] = field(default_factory=dict)
    apis: dict[tuple[str, str], ClusterApi] = field(default_factory=dict)
    agent: Component | None = None
    enforcer: Component | None = None
    ports: dict[str, int] = field(default_factory=lambda: {
        "metrics": free_port(), "health": free_port(), "kubelet": free_port(),
        "webhook": free_port()})
    """The agent's metrics, kubelet and pod webhook ports, the enforcer's health port: kept
    across agent restarts (a new kubelet port would be a node status write on each start)."""
    pod_webhook_ca: str = ""
    """The CA bundle of the agent's pod webhook (which a scenario registers for its namespace)."""
    twins: list[str] = field(default_factory=list)
    """Twin namespaces scenarios had offloaded beside the run's own (removed with it)."""
    twin: str = ""
    restore: list[tuple[ClusterApi, str, Callable[[], Awaitable[Any]]]] = field(
        default_factory=list)
    """Changes a scenario made to objects not the run's (the provider's nodes): each undone at
    cleanup, unless the scenario undid it already (and took it off)."""
    bare_requests: RequestMetrics = field(default_factory=RequestMetrics)
    """The bare client's requests (the driver's are not counted)."""
    created: dict[str, float] = field(default_factory=dict)
    """Latency pods: when each was created (bound), by name."""
    background: list[asyncio.Task[None]] = field(default_factory=list)

    def api(self, cluster: str, user: str) -> ClusterApi:
        """The user's client for a cluster (unthrottled: the limit is the server's)."""
        if (cluster, user) not in self.apis:
            connection = load_connection(self.kubeconfigs[cluster],
                                         limits=ClientLimits(qps=0, burst=256))
            self.apis[(cluster, user)] = ClusterApi(
                connection, timeout=120,
                metrics=self.bare_requests if user == "bare" else RequestMetrics())
        return self.apis[(cluster, user)]

    @property
    def home(self) -> ClusterApi:
        return self.api("home", "driver")

    @property
    def remote(self) -> ClusterApi:
        return self.api("remote", "driver")

    # --- request counts ---

    def hosts(self) -> dict[str, str]:
        """API server host:port → cluster name, as the request counters name the host."""
        return {urlsplit(load_connection(path).server).netloc: cluster
                for cluster, path in self.kubeconfigs.items()}

    def counts(self) -> dict[str, Counter[str]]:
        """Requests so far by who made them (agent, enforcer, bare), as
        `cluster|verb|resource` → requests, read from the components' own counters (their
        /metrics) and the bare client's. A component that is not running counts nothing: it
        starts again from zero."""
        hosts = self.hosts()
        found: dict[str, Counter[str]] = {}
        for who, component, port in (("agent", self.agent, self.ports["metrics"]),
                                     ("enforcer", self.enforcer, self.ports["health"])):
            found[who] = Counter()
            if component is None or not component.alive():
                continue
            for labels, value in scrape(port, BY_RESOURCE):
                cluster = hosts.get(labels["host"], labels["host"])
                found[who][f"{cluster}|{labels['verb']}|{labels['resource']}"] += int(value)
        found["bare"] = Counter()
        for (_, host, _, verb, _, resource), n in self.bare_requests.snapshot().items():
            found["bare"][f"{hosts.get(host, host)}|{verb}|{resource}"] += n
        return found

    def kubesim_cpu(self) -> list[float]:
        """CPU seconds of each kubesim process (home, remote)."""
        return [cpu_seconds(pid) for pid in self.server_pids]

    def requests_between(self, before: dict[str, Counter[str]], after: dict[str, Counter[str]],
                         who: str) -> dict[str, Any]:
        """Per cluster: the requests and writes of `who` between two count snapshots."""
        delta = after[who] - before.get(who, Counter())
        found: dict[str, Any] = {}
        for cluster in self.kubeconfigs:
            mine = {k.split("|", 1)[1]: n for k, n in delta.items()
                    if k.startswith(cluster + "|")}
            writes = {k: n for k, n in mine.items() if k.split("|")[0] in WRITE_VERBS}
            found[cluster] = {"requests": sum(mine.values()), "writes": sum(writes.values()),
                              "by_verb": dict(sorted(mine.items()))}
        return found

    # --- the agent ---

    def agent_converged(self) -> bool:
        """Synced, with no key queued (its /metrics)."""
        assert self.agent is not None
        return self.agent.running() and components.agent_converged(self.ports["metrics"])

    def pod(self, name: str, node: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeName": node, "tolerations": TOLERATIONS,
                                "containers": [{"name": "main", "image": "nginx:1.25"}]}
        if not self.args.service_account_token:
            spec["automountServiceAccountToken"] = False
        return {"metadata": {"name": name, "labels": {"app": "bench"}}, "spec": spec}

    @property
    def node(self) -> str:
        return self.names.virtual_node

    async def create_pods(self, namespace: str, names: list[str],
                          node: str) -> list[dict[str, Any]]:
        """The pods as the API server made them (with the token volume it adds)."""
        made: list[dict[str, Any]] = []

        async def one(name: str) -> None:
            made.append(await self.home.create(core_path("pods", namespace),
                                               self.pod(name, node)))
        await gather_limited((functools.partial(one, name) for name in names), 32)
        return made

    def phase_timeout(self) -> float:
        """Seconds a phase's pods have to run: generous for --pods on a slow cluster."""
        return 60.0 + float(self.args.pods) / 5

    # --- setup ---

    async def install_crds(self, api: ClusterApi) -> None:
        for manifest in sorted((ROOT / "crds").glob("*.yaml")):
            crd = yaml.safe_load(manifest.read_text())
            await created(api.create(group_path("apiextensions.k8s.io", "v1",
                                                "customresourcedefinitions"), crd))
            spec = crd["spec"]
            served = group_path(spec["group"], spec["versions"][0]["name"], spec["names"]["plural"])
            await until_async(functools.partial(readable, api, served), 30,
                              f"CRD {crd['metadata']['name']} served")

    async def check_capacity(self) -> None:
        """Refuse to start when the remote cannot run every pod the chosen scenarios leave
        there: pods would stay Pending and the run time out."""
        needed = sum(self.remote_pods_needed.values())
        if not needed:
            return
        nodes, allocatable, taken = room_for_pods(await self.remote.list(core_path("nodes")),
                                                  await self.remote.list(core_path("pods")))
        room = allocatable - taken
        if room < needed:
            each = ", ".join(f"{name} {pods}" for name, pods in self.remote_pods_needed.items()
                             if pods)
            raise CapacityError(
                f"the remote cluster has room for {room} more pods ({nodes} ready "
                f"schedulable nodes allocate {allocatable}, {taken} are taken) and this run "
                f"needs {needed} ({each}; the latency and offloading scenarios run each pod "
                f"twice, on the agent's path and the bare client's): lower --pods or "
                f"--latency-pods, or add {needed - room} pods of capacity")

    async def setup(self) -> None:
        names = self.names
        await self.install_crds(self.home)
        await self.install_crds(self.remote)
        for name in (names.namespace, names.bare_namespace):
            await created(self.home.create(core_path("namespaces"), {"metadata": {"name": name}}))
        await created(self.remote.create(core_path("namespaces"), {"metadata": {
            "name": names.tenant,
            "labels": {TENANT_NAMESPACE_LABEL: "true", REMOTE_CLUSTER_ID_LABEL: names.home_id}}}))
        # Room for the run's pods on either path, whatever share of the free pods the offer
        # gives (half by default, the other path's pods not counted free): the provider
        # admin's Quota, as an operator lending a cluster for a measured load sets it.
        # And room in each twin namespace for the run's objects (a pod's ShadowPod and token
        # Secret, the reflected ConfigMaps), past the default bounds of a few hundred.
        room = sum(self.remote_pods_needed.values())
        objects = str(room + int(self.args.configmaps or 0) + 100)
        for consumer in (names.home_id, names.bare_consumer):
            spec: dict[str, Any] = {"consumerClusterId": consumer, "namespacePolicy": {
                "objectCounts": dict.fromkeys(DEFAULT_NAMESPACE_OBJECT_COUNTS, objects)}}
            if room:
                spec["resources"] = {"pods": str(room)}
            await created(self.remote.create(custom_path(QUOTA, names.tenant), {
                **QUOTA.type_meta(), "metadata": {"name": f"bench-{consumer}"}, "spec": spec}))
        await created(self.remote.create(core_path("namespaces"), {"metadata": {
            "name": names.bare_twin,
            "labels": ownership_labels(names.bare_consumer, names.provider_id)}}))
        self.background.append(await bare.create_node(
            self.home, names.bare_node, 2 * (self.args.pods + self.args.latency_pods) + 10))
        # What the agent's ConfigMap reflector writes once a namespace: the home root CA, which
        # the offloaded pods' token volume mounts (no mount, no start).
        home_ca: dict[str, Any] = {}

        async def published() -> bool:  # by the root-CA publisher, once the namespace is made
            home_ca.update(await self.home.find(core_path(
                "configmaps", names.bare_namespace, KUBE_ROOT_CA_CONFIGMAP)) or {})
            return bool(home_ca)
        await until_async(published, 60, "the bare namespace's kube-root-ca.crt")
        await created(self.remote.create(core_path("configmaps", names.bare_twin), remote_configmap(
            home_ca, names.bare_twin, reflection_config(names.bare_consumer, names.provider_id))))
        # The cluster CA, which issues the API server's kubelet client certificate (kubeadm's
        # apiserver-kubelet-client): the agent verifies the API server with it.
        root_ca = await self.home.get(core_path("configmaps", "kube-system", "kube-root-ca.crt"))
        (self.directory / "home-ca.crt").write_text(root_ca["data"]["ca.crt"])
        await self.start_enforcer()
        self.pod_webhook_ca = components.pod_webhook_certificate(
            self.directory, components.agent_address(self.kubeconfigs["home"]))
        self.agent = components.agent(self.args, self.kubeconfigs, names, self.directory,
                                      self.remote_pod_cidr, self.ports)
        self.agent.start()
        self.twin = await self.offload(names.namespace, "Remote")
        await until_async(functools.partial(self.quota_counted, names.bare_twin,
                                            names.bare_consumer), 600,
                          f"ShadowPods counted by {names.bare_twin}'s quota")
        for cluster, kind, namespaces in (
                ("home", "pods", (names.namespace, names.bare_namespace)),
                ("remote", "pods", (self.twin, names.bare_twin)),
                ("remote", "shadowpods", (self.twin, names.bare_twin)),
                ("remote", "configmaps", (self.twin, names.bare_twin))):
            api = self.home if cluster == "home" else self.remote
            for namespace in namespaces:
                path = (custom_path(SHADOWPOD, namespace) if kind == "shadowpods"
                        else core_path(kind, namespace))
                self.background.append(asyncio.get_running_loop().create_task(
                    follow(api, path, f"{cluster}-{kind}", self.timeline)))

    async def offload(self, namespace: str, strategy: str) -> str:
        """`namespace` offloaded by the agent with the pod offloading `strategy`: its twin, once
        the twin's quota counts ShadowPods."""
        await created(self.home.create(custom_path(NAMESPACE_OFFLOADING, namespace), {
            **NAMESPACE_OFFLOADING.type_meta(),
            "metadata": {"name": "offloading"}, "spec": {"podOffloadingStrategy": strategy}}))
        path = custom_path(NAMESPACE_OFFLOADING, namespace, "offloading")
        status: dict[str, Any] = {}

        async def ready() -> bool:
            status.update((await self.home.get(path)).get("status") or {})
            return status.get("offloadingPhase") == "Ready"
        await until_async(ready, 120, f"the namespace {namespace} offloaded")
        twin = str(status["remoteNamespaceName"])
        await until_async(functools.partial(self.quota_counted, twin, self.names.home_id), 600,
                          f"ShadowPods counted by {twin}'s quota")
        return twin

    async def quota_counted(self, twin: str, consumer: str) -> bool:
        """Whether a ShadowPod of `consumer` is admitted in `twin` (a dry run). A real API
        server's quota admission refuses every one ("status unknown for quota") until its
        quota controller has discovered the kind and counted it in the twin's quota, seconds
        to minutes after the twin is made: measured before that, a latency would be the
        controller's resync, not annex's."""
        probe = {**SHADOWPOD.type_meta(),
                 "metadata": {"name": "quota-probe",
                              "labels": ownership_labels(consumer, self.names.provider_id)},
                 "spec": {"pod": {"containers": [{"name": "main", "image": "nginx"}]}}}
        try:
            await self.remote.request("POST", custom_path(SHADOWPOD, twin), probe,
                                      query={"dryRun": "All"})
        except ApiError as error:
            if error.status == 403 and QUOTA_STATUS_UNKNOWN in str(error):
                return False
            raise
        return True

    async def start_enforcer(self) -> None:
        """The enforcer, ready, its webhook registered with a certificate of a CA of the run."""
        authority = trustme.CA()
        issued = authority.issue_cert("127.0.0.1", "localhost")
        issued.cert_chain_pems[0].write_to_path(str(self.directory / "webhook.crt"))
        issued.private_key_pem.write_to_path(str(self.directory / "webhook.key"))
        # replicas (the failover scenario's) verify each other with the CA beside the certificate
        authority.cert_pem.write_to_path(str(self.directory / "ca.crt"))
        webhook_port = free_port()
        enforcer = self.enforcer = components.enforcer(
            self.kubeconfigs["remote"], self.names, self.directory, webhook_port,
            self.ports["health"], self.args.enforcer_flag)
        enforcer.start()
        await self.enforcer_ready()
        await self.remote.create(WEBHOOKS, components.shadowpod_webhook(
            self.names, webhook_port, base64.b64encode(authority.cert_pem.bytes()).decode()))

    async def enforcer_ready(self) -> None:
        enforcer = self.enforcer
        assert enforcer is not None
        await until_async(lambda: asyncio.to_thread(
            lambda: enforcer.running() and http_get(
                f"http://127.0.0.1:{self.ports['health']}/readyz")[0] == 200), 60,
            "the enforcer ready")

    # --- the end ---

    async def cleanup(self) -> None:
        """Remove what the run created, also after a failure or an interruption: the agent
        stops first (it would recreate what goes), the enforcer last (it deletes the agent's
        twin namespace once the tenant namespace's NamespaceMap goes). Pods at home are
        deleted at once (no kubelet would confirm their end); what is still there after a
        deadline is named on stderr."""
        names = self.names
        for task in self.background:
            task.cancel()
        if self.agent is not None:
            self.agent.stop()
        leases = group_path(*LEASES.resource, NODE_LEASE_NAMESPACE)
        steps: list[tuple[ClusterApi, str, Callable[[], Awaitable[Any]]]] = []
        for namespace in (names.namespace, names.bare_namespace, names.fragmented, names.pools):
            steps.append((self.home, f"pods in {namespace}", functools.partial(
                self.home.delete, core_path("pods", namespace), {"gracePeriodSeconds": 0})))
        for namespace in (names.namespace, names.fragmented, names.pools):
            offloading = custom_path(NAMESPACE_OFFLOADING, namespace, "offloading")
            steps.append((self.home, f"the finalizers of {offloading}", functools.partial(
                self.home.patch, offloading, {"metadata": {"finalizers": None}})))
        steps.append((self.home, f"webhook {names.pod_webhook}", functools.partial(
            self.home.delete, f"{MUTATING_WEBHOOKS}/{names.pod_webhook}")))
        for namespace in (names.namespace, names.bare_namespace, names.release,
                          names.fragmented, names.pools):
            steps.append((self.home, f"namespace {namespace}", functools.partial(
                self.home.delete, core_path("namespaces", name=namespace))))
        for node in (names.bare_node, names.virtual_node, *names.pool_nodes):
            steps.append((self.home, f"node {node}", functools.partial(
                self.home.delete, core_path("nodes", name=node))))
            steps.append((self.home, f"lease {node}", functools.partial(
                self.home.delete, f"{leases}/{node}")))
        steps.append((self.remote, f"webhook {names.webhook}", functools.partial(
            self.remote.delete, f"{WEBHOOKS}/{names.webhook}")))
        for namespace in (names.tenant, names.bare_twin, names.fillers):
            steps.append((self.remote, f"namespace {namespace}", functools.partial(
                self.remote.delete, core_path("namespaces", name=namespace))))
        steps += reversed(self.restore)
        for _, what, step in steps:
            try:
                async with asyncio.timeout(30):
                    await step()
            except ApiError as error:
                if error.status != 404:
                    print(f"cleanup: {what}: {error}", file=sys.stderr)
            except (TransportError, TimeoutError) as error:
                print(f"cleanup: {what}: {error!r}", file=sys.stderr)
        gone = [(self.home, core_path("namespaces", name=n))
                for n in (names.namespace, names.bare_namespace, names.release, names.fragmented,
                          names.pools)]
        gone += [(self.remote, core_path("namespaces", name=n))
                 for n in (names.tenant, names.bare_twin, names.fillers, self.twin, *self.twins)
                 if n]
        gone += [(self.home, core_path("nodes", name=names.bare_node))]
        deadline = time.monotonic() + 120 + self.args.pods / 20
        left: list[str] = []
        while time.monotonic() < deadline:
            left = []
            for api, path in gone:
                try:
                    if await api.find(path) is not None:
                        left.append(path)
                except (ApiError, TransportError, TimeoutError):
                    left.append(path)
            if not left:
                break
            await asyncio.sleep(1)
        if self.enforcer is not None:
            self.enforcer.stop()
        if left:
            print(f"cleanup: still there after the deadline: {', '.join(left)}",
                  file=sys.stderr)

    async def close(self) -> None:
        for task in self.background:  # (cleanup cancelled them already on given clusters)
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        for api in self.apis.values():
            await api.close()

