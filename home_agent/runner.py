"""Wires the agent together: its watches, controllers and liveness tasks on one event loop
(the kubelet API on a thread of its own), until a signal, a dead watch or lost leadership
stops everything."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from annex.controller import Controller, Result
from annex.kube import load_connection
from annex.kubeapi import ClusterApi
from annex.leader import LeaderElector
from annex.leader_flags import candidacy
from annex.metrics import ServedRequests
from annex.mirror import Mirror
from home_agent.agent import HOME, NODE_KEY, Agent
from home_agent.apiserver_address import NoHomeApiServerAddress, with_home_apiserver
from home_agent.assembly import (
    COMPANIONS,
    AgentKeys,
    AgentParts,
    Listings,
    agent_parts,
    agent_routes,
    reflection_for,
    remote_watch_sources,
)
from home_agent.config import AgentConfig
from home_agent.credentials import RemoteCredentials
from home_agent.heartbeat import health_loop, lease_loop
from home_agent.kubelet.server import KubeletServer
from home_agent.kubelet_service import NoKubeletService, with_kubelet_service
from home_agent.metrics import Metrics
from home_agent.metrics import serve as serve_metrics
from home_agent.namespace_offloading import OffloadingSources, reconcile_offloading
from home_agent.pod import PodOffloader
from home_agent.reflection.manager import Reflection
from home_agent.remote_watch import RemoteWatches
from home_agent.routes import declare_agent, declare_reflection, declare_virtual_node_followers
from home_agent.synced_cache import SyncedPods
from home_agent.twins import TwinNamespaces
from home_agent.virtual_node import NodeSources, reconcile_node
from home_agent.watches import (
    HOME_WATCH,
    NodePodsWatch,
    OffloadedNamespaceWatches,
    Watch,
    declared_watch,
)
from home_agent.webhook import serve as serve_webhook
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING_NAME
from shared.forge.pod_plan import pod_plan
from shared.wellknown import TRACEPARENT_ANNOTATION

log = logging.getLogger(__name__)


def _kind(key: Hashable) -> str:
    return str(key[0]) if isinstance(key, tuple) else "?"


def _object_of(node_name: Callable[[], str], key: Hashable) -> tuple[str | None, str | None]:
    """The object an agent key names, for its log lines."""
    match key:
        case ("pod", namespace, name):
            return str(namespace), str(name)
        case ("offloading", namespace):
            return str(namespace), NAMESPACE_OFFLOADING_NAME
        case ("node",):
            return None, node_name()
    return None, _kind(key)


def pod_traceparent(twins: TwinNamespaces, shadow_pods: Mirror, key: Hashable) -> object:
    """A pod key's trace: the traceparent on its ShadowPod, which this agent wrote when it made
    or changed it and the provider's reconcile continued, so that the status brought home joins
    that trace (home → remote → home). Read from the provider's copy, so untrusted: only a parent
    once `annex.tracing` has checked its form. Asked only while tracing."""
    match key:
        case ("pod", namespace, name):
            remote_namespace = twins.mapped(str(namespace))
            shadow = (shadow_pods.get((remote_namespace, str(name)))
                      if remote_namespace else None)
            if shadow is not None:
                return (shadow["metadata"].get("annotations") or {}).get(TRACEPARENT_ANNOTATION)
    return None


def mirrors_listed(listings: Listings, key: Hashable) -> bool:
    """Whether the mirrors `key`'s reconcile reads are listed (the key is parked until then):
    nothing is decided on a mirror still filling. The node and the namespaces watched wait for
    the home listings, the twins for the tenant namespace's, namespaces and pods for both
    sides' (a missing ShadowPod or NamespaceMap must not read as "gone"), a pod also for its
    namespace's objects (the copies it waits for)."""
    kind = _kind(key)
    if kind == "twins":
        return listings.tenant()
    if not listings.home():
        return False
    if kind in ("node", "namespaces"):
        return True
    if kind == "pod" and not listings.namespace(str(key[1])):  # type: ignore[index]
        return False
    return listings.remote()


async def reconcile(node: NodeSources, offloadings: OffloadingSources, pods: PodOffloader,
                    selected_namespaces: Callable[[], frozenset[str]], watches: RemoteWatches,
                    offloaded: OffloadedNamespaceWatches, synced_pods: SyncedPods | None,
                    key: Hashable) -> Result | None:
    """One key, its mirrors listed (`mirrors_listed`)."""
    assert isinstance(key, tuple)
    match key:
        case ("node",):
            await reconcile_node(node)
        case ("twins",):
            watches.follow_twins()
        case ("namespaces",):
            offloaded.follow(selected_namespaces())
        case ("offloading", namespace):
            await reconcile_offloading(offloadings, namespace)
        case ("pod", namespace, name):
            return await reconcile_pod(pods, synced_pods, namespace, name)
    return None


async def reconcile_pod(pods: PodOffloader, synced_pods: SyncedPods | None,
                        namespace: str, name: str) -> Result:
    """With `--redis-url`, a pod whose inputs are those of its last converged reconcile is
    skipped (counted "unchanged")."""
    if synced_pods is None:
        return await pods.reconcile(namespace, name)
    inputs = pods.gather(namespace, name)
    unchanged, state = synced_pods.check(inputs)
    if unchanged:
        return Result(outcome="unchanged")
    result = await pods.carry_out(inputs, pod_plan(inputs))
    if not result.retry:
        synced_pods.reconciled(namespace, name, state)
    return result


WATCH_KEYS = frozenset({"twins", "namespaces"})
"""The keys that only move a watch: a standby keeps its mirrors as the leader's."""


def may_reconcile(listings: Listings, leading: Callable[[], bool], key: Hashable) -> bool:
    """`mirrors_listed`, and for every key but those that only move a watch (`WATCH_KEYS`)
    that this replica leads: a standby's keys wait parked, and go in line once it leads."""
    if _kind(key) not in WATCH_KEYS and not leading():
        return False
    return mirrors_listed(listings, key)


def _always() -> bool:
    return True


def build_controller(keys: AgentKeys, watches: RemoteWatches,
                     offloaded: OffloadedNamespaceWatches, synced_pods: SyncedPods | None,
                     metrics: Metrics, leading: Callable[[], bool] = _always
                     ) -> Controller[Hashable]:
    """The agent's own keys, counted per key kind too."""
    return Controller(
        "agent", functools.partial(reconcile, keys.node, keys.offloadings, keys.pods,
                                   keys.selected_namespaces, watches, offloaded, synced_pods),
        workers=keys.workers, ready=functools.partial(may_reconcile, keys.listings, leading),
        gate=_kind, observe=lambda key, outcome: metrics.reconciled(_kind(key), outcome),
        queue=keys.queue, describe=functools.partial(_object_of, keys.node_name),
        traceparent=functools.partial(pod_traceparent, keys.twins, keys.shadow_pods))


def leader_elector(config: AgentConfig) -> LeaderElector | None:
    """The agent's candidacy for its Lease (`annex.leader_flags.candidacy`)."""
    if config.leader_election is None:
        return None
    return candidacy(config.leader_election,
                     load_connection(config.home_kubeconfig, limits=config.home_limits))


async def supervise(config: AgentConfig, parts: AgentParts, home_watch: Watch,
                    node_pods: NodePodsWatch, offloaded: OffloadedNamespaceWatches,
                    watches: RemoteWatches, reflection: Reflection,
                    credentials: RemoteCredentials, kubelet: KubeletServer,
                    elector: LeaderElector | None = None) -> int:
    """Everything but the kubelet API on this loop (the kubelet API on a thread and loop of its
    own: a stream never waits for a burst of reconciles), until SIGTERM or SIGINT (0), until a
    watch or the kubelet API died (1: mirrors nobody fills any more decide nothing), or until
    this replica lost its leadership (1: it stops writing at once, and exits to start again as
    a standby).

    With an `elector`, every replica watches, fills its mirrors, serves the webhook, the kubelet
    API and its probes, and follows the remote credentials; only the leader writes: the
    agent's keys but the twins' wait parked on a standby, and the reflection workers, the node
    Lease and the credentials renewal start once it leads."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=8))  # DNS lookups
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    home_watch.start()  # its VirtualNodes listed, `node_pods` follows the virtual node's name
    metrics = Metrics()
    synced_pods = None
    if config.redis_url:
        synced_pods = SyncedPods(config.redis_url, config.home_cluster_id,
                                 config.remote_cluster_id)
        await synced_pods.load()
    leading = _always if elector is None else (lambda: elector.leading)
    credentials.leading = leading
    agent_keys = build_controller(parts.keys, watches, offloaded, synced_pods, metrics, leading)
    metrics.controllers = [agent_keys, *reflection.controllers()]
    metrics.reflection = reflection.controllers()
    # What writes, stopped first: the agent's keys (on a standby the twins' only), and the
    # leader's own tasks.
    writers = [asyncio.create_task(agent_keys.run())]

    def lead() -> None:
        writers.append(asyncio.create_task(reflection.run()))
        writers.append(asyncio.create_task(lease_loop(parts.lease)))
        writers.append(asyncio.create_task(credentials.renew_loop()))
        if elector is not None:
            writers.append(asyncio.create_task(watches.create_namespace_map()))

    tasks = []
    if synced_pods is not None:
        tasks.append(asyncio.create_task(synced_pods.run()))
    tasks.append(asyncio.create_task(watches.start(create_namespace_map=elector is None)))
    tasks.append(asyncio.create_task(credentials.run()))
    tasks.append(asyncio.create_task(health_loop(parts.health_checks)))
    election: asyncio.Task[None] | None = None
    if elector is None:
        lead()
    else:
        metrics.leading, metrics.leader = leading, lambda: elector.holder
        metrics.elector = elector
        election = elector.campaign(lead, lost=stop.set)
    parts.keys.queue.add(NODE_KEY)
    webhook_requests = ServedRequests()
    metrics.served = [webhook_requests, kubelet.requests]
    servers = [await serve_webhook(parts.webhook, config.webhook_address,
                                   config.webhook_cert, config.webhook_key, webhook_requests),
               await serve_metrics(metrics, parts.figures, config.metrics_address,
                                   config.metrics_secure, parts.home, parts.keys.listings.home)]
    kubelet.start(parts.kubelet)
    log.info("home agent %s → %s started (nodes %s)", config.home_cluster_id,
             config.remote_cluster_id, ", ".join(sorted(parts.lease.node_names())))
    exit_code = 0
    while not stop.is_set():
        if not (home_watch.is_alive() and node_pods.is_alive() and offloaded.is_alive()
                and watches.alive() and kubelet.alive()):
            log.error("a component stopped: exiting")
            exit_code = 1
            break
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await stop.wait()
    if election is not None and election.done():
        failure = None if election.cancelled() else election.exception()
        log.error("%s: stopping every write and exiting (restarted, this replica is a "
                  "standby)", f"the election failed: {failure}" if failure else
                  "leadership lost")
        exit_code = 1
    agent_keys.stop()
    reflection.stop()
    await _cancelled(writers)
    if elector is not None and election is not None:
        await _cancelled([election])
        await elector.release()  # nothing writes any more: the standby may take over now
        await elector.api.close()
    home_watch.stop()
    node_pods.stop()
    offloaded.stop()
    watches.stop()
    await loop.run_in_executor(None, kubelet.stop)
    for server in servers:
        if server is not None:
            await server.cleanup()
    await _cancelled(tasks)
    await parts.home.close()  # the clients' sessions live on this loop
    await parts.remote.close()
    return exit_code


async def _cancelled(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _configured(config: AgentConfig, home: ClusterApi) -> AgentConfig:
    try:
        return await with_kubelet_service(await with_home_apiserver(config, home), home)
    finally:
        await home.close()  # its session belongs to this loop, not the controller's


def run(config: AgentConfig) -> int:
    home = ClusterApi(load_connection(config.home_kubeconfig, limits=config.home_limits))
    try:
        config = asyncio.run(_configured(config, home))
    except (NoHomeApiServerAddress, NoKubeletService) as error:
        log.error("%s", error)
        return 2
    try:
        kubelet = KubeletServer(config)
    except OSError as error:
        log.error("cannot serve the kubelet API on %s:%d: %s", config.kubelet_address,
                  config.kubelet_port, error)
        return 2
    remote = ClusterApi(load_connection(config.remote_kubeconfig, limits=config.remote_limits))
    agent = Agent(config, home, remote)
    reflection = reflection_for(agent, companions=COMPANIONS)
    credentials = RemoteCredentials(config, home, remote, agent.events, agent.virtual_node)

    routes = agent_routes(agent)
    declare_agent(routes)
    declare_reflection(routes, reflection)
    home_listed = threading.Event()

    def follow_nodes() -> None:
        node_pods.follow(agent.node_pools())

    def follow_virtual_node() -> None:
        follow_nodes()
        credentials.virtual_node_changed()

    declare_virtual_node_followers(routes, home_listed, follow_virtual_node, follow_nodes)
    on_home_event = functools.partial(agent.informers.dispatch, HOME)

    def pods_synced() -> None:
        log.info("home cluster listed")
        agent.home_synced.set()

    def home_synced() -> None:
        # The VirtualNodes are listed: the virtual node's name is known, its pods can be.
        home_listed.set()
        follow_virtual_node()

    home_watch = Watch(home.connection, declared_watch(agent.informers, HOME, HOME_WATCH),
                       on_home_event, home_synced)
    node_pods = NodePodsWatch(home.connection, on_home_event, pods_synced,
                              agent.mirrors.pods.values)
    offloaded = OffloadedNamespaceWatches(home.connection, agent.informers, HOME, on_home_event,
                                          agent.offloaded)
    parts = agent_parts(agent, reflection, kubelet.ports)
    return asyncio.run(supervise(config, parts, home_watch, node_pods, offloaded,
                                 RemoteWatches(remote_watch_sources(agent)), reflection,
                                 credentials, kubelet, leader_elector(config)))
