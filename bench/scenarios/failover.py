"""failover (by name only: --scenarios failover): the agent, the remote enforcer and the home
controller each run as two replicas electing a leader on a Lease with the charts' durations
(lease 15 s, renew deadline 10 s, retry period 2 s), in place of the run's agent and enforcer
(which start again after it): the agent's replicas behind a kubelet Service (the offloaded pods'
hostIP), the enforcer's behind one webhook address (bench.balancer, the chart's Service), the
controller's serving one VirtualNode of its own (its agent Deployment made, never started:
nothing matches its node selector).

STEADY pods are offloaded first; then pods are created at --failover-rate (at most
--failover-pods), and the leader of each component in turn is SIGKILLed during that burst,
started again (its pod replaced) once the standby leads and the pods created meanwhile run. For
each: seconds until the standby leads (its /readyz), the pods created in that gap and seconds
from the SIGKILL until all of them are Running at home. For the whole burst, from the run's
watches: ShadowPods and remote pods made twice for one name, remote pods and ShadowPods deleted
(all must be 0), and the objects converged before the first SIGKILL (the pods at home, the
ShadowPods, the remote pods, the VirtualNode and what the controller made for it) that any write
changed by the end (must be 0). Each new leader's writes (Leases apart), and of them those for
unchanged objects (`unchanged_writes`; the controller's world does not change, so all of its
writes would be).
A scenario reports; it asserts nothing of its timings."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from annex.api_paths import core_path, custom_path, group_path
from annex.kubeapi import ClusterApi
from annex.leader import ElectionTimings
from bench import components
from bench.api_calls import created
from bench.balancer import Balancer
from bench.figures import Rows
from bench.harness import WEBHOOKS, Bench
from bench.processes import free_port
from bench.replicas import Replicas
from bench.watching import until, until_async
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.shadowpod import SHADOWPOD
from shared.api.virtual_node import VIRTUAL_NODE
from shared.forge.agent import AgentTemplate

STEADY = 20
"""Pods offloaded and Running before the burst."""
ORDER = ("agent", "enforcer", "controller")
"""Whose leader is killed, in turn."""
TIMINGS = ElectionTimings()
KUBELET_SERVICE = "bench-agent-kubelet"
DRAIN_SECONDS = 30


@dataclass
class Burst:
    """Pods created at a steady rate until told to stop, or --failover-pods are made."""

    bench: Bench
    created: dict[str, float] = field(default_factory=dict)
    """When each pod was created (time.monotonic()), by name."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        bench, path = self.bench, core_path("pods", self.bench.names.namespace)
        interval, started = 1 / bench.args.failover_rate, time.monotonic()
        creating: list[asyncio.Task[Any]] = []
        for index in range(bench.args.failover_pods):
            if self.stop.is_set():
                break
            name = f"fo-{index}"
            self.created[name] = time.monotonic()
            creating.append(asyncio.create_task(bench.home.create(path, bench.pod(name,
                                                                                  bench.node))))
            await asyncio.sleep(max(0.0, started + (index + 1) * interval - time.monotonic()))
        await asyncio.gather(*creating)

    def between(self, start: float, end: float) -> list[str]:
        return [name for name, when in self.created.items() if start <= when <= end]


def running_at_home(bench: Bench, names: list[str]) -> bool:
    return bench.timeline.all_of(bench.timeline.running, "home-pods", bench.names.namespace,
                                 names)()


def steady_objects(bench: Bench) -> list[tuple[ClusterApi, str]]:
    """What is converged before the first SIGKILL and no takeover may write: every pod at
    home and its ShadowPod and remote pod, the VirtualNode and what the controller made."""
    namespace = bench.names.release
    return [(bench.home, core_path("pods", bench.names.namespace)),
            (bench.remote, custom_path(SHADOWPOD, bench.twin)),
            (bench.remote, core_path("pods", bench.twin)),
            (bench.home, custom_path(VIRTUAL_NODE, namespace)),
            (bench.home, group_path("apps", "v1", "deployments", namespace)),
            (bench.home, core_path("serviceaccounts", namespace)),
            (bench.home, group_path("rbac.authorization.k8s.io", "v1", "roles", namespace)),
            (bench.home, group_path("rbac.authorization.k8s.io", "v1", "rolebindings",
                                    namespace)),
            (bench.home, core_path("services", namespace)),
            (bench.home, group_path("policy", "v1", "poddisruptionbudgets", namespace))]


async def versions(bench: Bench) -> dict[tuple[str, str], str]:
    """(collection, uid) → resourceVersion of every steady object."""
    found: dict[tuple[str, str], str] = {}
    for api, path in steady_objects(bench):
        for item in await api.list(path):
            found[(path, item["metadata"]["uid"])] = item["metadata"]["resourceVersion"]
    return found


class Replicated:
    """The three components' replicas for one run, and the objects they need."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        names, directory = bench.names, bench.directory
        self.cluster_id = f"bench-failover-{names.run}"
        """The controller's VirtualNode's provider (none: its agent never runs)."""
        self.template = AgentTemplate(
            name_prefix=f"bench-agent-{names.run}", namespace=names.release,
            image="annex:bench-never-started", webhook_cert_secret=f"bench-agent-{names.run}",
            node_selector={"annex.bench/never-scheduled": "true"})
        agent_ports = [{"metrics": free_port(), "kubelet": free_port()} for _ in range(2)]
        flags = ("--leader-elect", "--leader-elect-resource-namespace", names.release,
                 "--kubelet-service", f"{names.release}/{KUBELET_SERVICE}")
        self.agents = Replicas("agent", [components.agent(
            bench.args, bench.kubeconfigs, names, directory, bench.remote_pod_cidr, ports,
            f"agent-replica-{index}", flags) for index, ports in enumerate(agent_ports)],
            [ports["metrics"] for ports in agent_ports])
        webhook_ports, health_ports = [free_port(), free_port()], [free_port(), free_port()]
        self.enforcers = Replicas("enforcer", [components.enforcer(
            bench.kubeconfigs["remote"], names, directory, webhook, health, [
                *bench.args.enforcer_flag, "--leader-elect", "--leader-elect-resource-namespace",
                names.tenant, "--webhook-advertise-address", "127.0.0.1"],
            f"enforcer-replica-{index}")
            for index, (webhook, health) in enumerate(zip(webhook_ports, health_ports,
                                                          strict=True))], health_ports)
        self.balancer = Balancer(webhook_ports)
        controller_ports = [free_port(), free_port()]
        template_path = directory / "agent-template.json"
        template_path.write_text(self.template.model_dump_json(by_alias=True))
        self.controllers = Replicas("controller", [components.home_controller(
            bench.kubeconfigs["home"], names.release, template_path, port,
            ("--leader-elect", "--leader-elect-resource-namespace", names.release,
             "--drain-timeout-seconds", str(DRAIN_SECONDS)),
            directory / f"controller-replica-{index}.log")
            for index, port in enumerate(controller_ports)], controller_ports)

    @property
    def all(self) -> dict[str, Replicas]:
        return {"agent": self.agents, "enforcer": self.enforcers,
                "controller": self.controllers}

    async def settled(self) -> None:
        """Each component has one leader, which has reconciled every key it holds (the
        agent's: and is synced)."""
        for kind, replicas in self.all.items():
            await until(replicas.elected, 120, f"one {kind} replica leads, the other stands by")
            leader = replicas.leader()
            assert leader is not None
            port = replicas.ports[leader]
            done = components.agent_converged if kind == "agent" else components.settled
            await until(functools.partial(done, port), 120 + self.bench.args.pods / 50,
                        f"the {kind} leader settled", interval=0.2)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Replicated]:
        """The replicas in place of the run's agent and enforcer, until the end: then those
        again, as they were."""
        bench, names = self.bench, self.bench.names
        namespace = names.release
        await created(bench.home.create(core_path("namespaces"), {"metadata": {
            "name": namespace}}))
        await created(bench.home.create(core_path("services", namespace), {
            "metadata": {"name": KUBELET_SERVICE}, "spec": {"ports": [
                {"name": "kubelet", "port": 10250, "targetPort": 10250}]}}))
        await created(bench.home.create(core_path("secrets", namespace), {
            "metadata": {"name": f"{self.cluster_id}-kubeconfig"},
            "stringData": {"kubeconfig": "apiVersion: v1\nkind: Config\n"}}))
        await created(bench.home.create(custom_path(VIRTUAL_NODE, namespace), {
            "apiVersion": VIRTUAL_NODE.api_version, "kind": VIRTUAL_NODE.kind,
            "metadata": {"name": self.cluster_id},
            "spec": {"clusterId": self.cluster_id,
                     "kubeconfigSecretRef": {"name": f"{self.cluster_id}-kubeconfig"}}}))
        single = await self._webhook_address(None)
        assert bench.agent is not None and bench.enforcer is not None
        bench.agent.stop()
        bench.enforcer.stop()
        try:
            with self.balancer.running() as balancer:
                await self._webhook_address(urlsplit(balancer.url).netloc)
                for replicas in self.all.values():
                    replicas.start()
                try:
                    yield self
                finally:
                    await self._remove_virtual_node()
                    for replicas in self.all.values():
                        replicas.stop()
                    # what the controller made of the VirtualNode's consent, cluster-wide
                    await bench.home.delete_if_exists(custom_path(FOREIGN_CLUSTER,
                                                                  name=self.cluster_id))
                    await self._webhook_address(single)
        finally:
            bench.enforcer.start()
            await bench.enforcer_ready()
            bench.agent.start()
            await until(bench.agent_converged, 300, "the run's agent converged again",
                        interval=0.5)

    async def _webhook_address(self, address: str | None) -> str:
        """The host:port the run's ShadowPod webhook is called at, set to `address` (None:
        left as it is): what it was."""
        path = f"{WEBHOOKS}/{self.bench.names.webhook}"
        configuration = await self.bench.remote.get(path)
        config = configuration["webhooks"][0]["clientConfig"]
        was = urlsplit(config["url"]).netloc
        if address is not None:
            config["url"] = urlsplit(config["url"])._replace(netloc=address).geturl()
            await self.bench.remote.request("PUT", path, body=configuration)
        return str(was)

    async def _remove_virtual_node(self) -> None:
        """Deleted while the controller leads (its finalizer drains it), then its finalizer
        taken off if it is still there after the drain's deadline."""
        home = self.bench.home
        path = custom_path(VIRTUAL_NODE, self.bench.names.release, self.cluster_id)
        await home.delete(path)

        async def gone() -> bool:
            return await home.find(path) is None
        try:
            await until_async(gone, DRAIN_SECONDS + 30, "the controller's VirtualNode drained")
        except TimeoutError:
            await home.patch(path, {"metadata": {"finalizers": None}})
            print("failover: the VirtualNode was not drained in time: its finalizer removed",
                  file=sys.stderr)


async def run(bench: Bench) -> dict[str, Any]:
    replicated = Replicated(bench)
    async with replicated.running():
        return await measure(bench, replicated)


async def measure(bench: Bench, replicated: Replicated) -> dict[str, Any]:
    namespace = bench.names.namespace
    steady = [f"fo-steady-{index}" for index in range(STEADY)]
    await bench.create_pods(namespace, steady, bench.node)
    await until(lambda: running_at_home(bench, steady), bench.phase_timeout(),
                "the steady pods Running")
    await until_async(lambda: _deployment_made(bench, replicated), 60,
                      "the controller made the VirtualNode's agent Deployment")
    await replicated.settled()
    before = await versions(bench)
    started = time.monotonic()
    burst = Burst(bench)
    creating = asyncio.create_task(burst.run())
    takeovers: dict[str, dict[str, Any]] = {}
    try:
        await asyncio.sleep(2)
        for kind in ORDER:
            takeovers[kind] = await take_over(bench, replicated.all[kind], burst)
        await asyncio.sleep(2)  # pods after the last takeover
    finally:
        burst.stop.set()
        await creating
    pods = list(burst.created)
    await until(lambda: running_at_home(bench, pods), bench.phase_timeout(),
                f"the burst's {len(pods)} pods Running at home", interval=0.2)
    all_running = max(bench.timeline.running[("home-pods", namespace, name)] for name in pods)
    await replicated.settled()
    after = await versions(bench)
    for kind, replicas in replicated.all.items():
        leader = replicas.leader()
        assert leader is not None
        takeover = takeovers[kind]
        writes = takeover["new_leader_writes"] = replicas.writes(leader)
        takeover["standby_writes_after"] = replicas.writes(1 - leader)
        takeover.update(unchanged_writes(bench, writes, takeover.pop("changes_at_lead")))
    timeline = bench.timeline
    made = {*steady, *pods}

    def twice(kind: str) -> int:
        return sum(1 for name in made if len(timeline.uids.get((kind, bench.twin, name), ())) > 1)

    def deleted(kind: str) -> int:
        return sum(1 for (of, where, _), when in timeline.deletions
                   if of == kind and where == bench.twin and when >= started)
    return {
        "steady_pods": STEADY, "burst_pods": len(pods),
        "rate": bench.args.failover_rate,
        "election": {"lease_duration": TIMINGS.lease_duration,
                     "renew_deadline": TIMINGS.renew_deadline,
                     "retry_period": TIMINGS.retry_period},
        "takeovers": takeovers,
        "burst_running_seconds": round(all_running - started, 2),
        "duplicated_shadowpods": twice("remote-shadowpods"),
        "duplicated_remote_pods": twice("remote-pods"),
        "remote_pod_deletions": deleted("remote-pods"),
        "shadowpod_deletions": deleted("remote-shadowpods"),
        "steady_objects": len(before),
        "steady_objects_written": sum(1 for key, version in before.items()
                                      if after.get(key) != version)}


async def _deployment_made(bench: Bench, replicated: Replicated) -> bool:
    path = group_path("apps", "v1", "deployments", bench.names.release)
    return any(item["metadata"]["name"].startswith(replicated.template.name_prefix)
               for item in await bench.home.list(path))


async def take_over(bench: Bench, replicas: Replicas, burst: Burst) -> dict[str, Any]:
    """SIGKILL the leader during the burst: seconds until the standby leads, the pods created
    meanwhile and seconds until they all run; then the killed one's pod replaced."""
    await until(replicas.elected, 120, f"one {replicas.kind} replica leads, the other stands by")
    leader = replicas.leader()
    assert leader is not None
    standby = 1 - leader
    standby_writes = replicas.writes(standby)
    replicas.kill(leader)
    killed = time.monotonic()
    led = await until(lambda: replicas.role(standby) == "ok: leader",
                      TIMINGS.lease_duration + 3 * TIMINGS.retry_period + 60,
                      f"the standby {replicas.kind} leads", interval=0.05)
    changes_at_lead = bench.timeline.changes.copy()
    gap = burst.between(killed, led)
    await until(lambda: running_at_home(bench, gap), bench.phase_timeout(),
                f"the pods created while no {replicas.kind} led Running", interval=0.1)
    running = max((bench.timeline.running[("home-pods", bench.names.namespace, name)]
                   for name in gap), default=None)
    replicas.members[leader].start()  # its pod replaced: a standby again
    return {"takeover_seconds": round(led - killed, 2), "gap_pods": len(gap),
            "changes_at_lead": changes_at_lead,
            "gap_pods_running_seconds": None if running is None else round(running - killed, 2),
            "standby_writes_before": standby_writes}


def unchanged_writes(bench: Bench, writes: dict[str, int],
                     changes_at_lead: Counter[tuple[str, str, str]]) -> dict[str, Any]:
    """Of a new leader's writes (`Replicas.writes`), those for unchanged objects: its status
    writes beyond the changes the run's watches saw of them after it led (a write that changes
    nothing shows in its requests and in no watch), and its creates of objects that were there
    (409: one the killed leader made as it died, not yet in the new leader's mirror); and the
    writes of what the run does not watch."""
    seen_as = {"pods/status": ("home-pods", bench.names.namespace),
               "shadowpods/status": ("remote-shadowpods", bench.twin)}
    unchanged, existing, not_compared = 0, 0, []
    for write, count in writes.items():
        verb, resource, *refused = write.split(" ")
        if verb == "create":
            existing += count if refused == ["409"] else 0
        elif refused:
            continue  # not written
        elif resource in seen_as:
            kind, namespace = seen_as[resource]
            changes = (bench.timeline.changes[(kind, namespace, "MODIFIED")]
                       - changes_at_lead[(kind, namespace, "MODIFIED")])
            unchanged += max(0, count - changes)
        else:
            not_compared.append(f"{write} {count}")
    return {"writes_for_unchanged_objects": unchanged, "creates_of_existing_objects": existing,
            "writes_not_compared": not_compared}


def remote_pods(args: Any) -> int:
    # Twice its pods: the enforcer offers half of what is free (its --offer-percent), and the
    # pods past the offer would wait for ever.
    return 2 * (STEADY + int(args.failover_pods))


def rows(result: dict[str, Any]) -> Rows:
    timings = result["election"]
    found: Rows = [("failover", f"{result['steady_pods']} pods steady, then "
                    f"{result['burst_pods']} created at {result['rate']}/s; lease "
                    f"{timings['lease_duration']:g} s, renew {timings['renew_deadline']:g} s, "
                    f"retry {timings['retry_period']:g} s")]
    for kind, takeover in result["takeovers"].items():
        running = takeover["gap_pods_running_seconds"]
        found.append((f"  {kind} leader SIGKILLed", (
            f"standby leads after {takeover['takeover_seconds']} s; {takeover['gap_pods']} "
            "pods created meanwhile" + (f", all Running {running} s after the SIGKILL"
                                        if running is not None else ""))))
        found.append((f"  {kind}: new leader's writes", ", ".join(
            f"{write} {n}" for write, n in takeover["new_leader_writes"].items()) or "none"))
        found.append((f"  {kind}: writes for unchanged objects", (
            f"{takeover['writes_for_unchanged_objects']} (target 0), creates of existing "
            f"objects {takeover['creates_of_existing_objects']}" + (
                f"; not compared: {', '.join(takeover['writes_not_compared'])}"
                if takeover["writes_not_compared"] else ""))))
    found += [
        ("  duplicated ShadowPods / remote pods", f"{result['duplicated_shadowpods']} / "
         f"{result['duplicated_remote_pods']} (target 0)"),
        ("  deleted remote pods / ShadowPods", f"{result['remote_pod_deletions']} / "
         f"{result['shadowpod_deletions']} (target 0)"),
        ("  converged objects written", f"{result['steady_objects_written']} of "
         f"{result['steady_objects']} (target 0)"),
        ("  every burst pod Running", f"{result['burst_running_seconds']} s after it began")]
    return found
