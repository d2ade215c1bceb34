"""Wires the agent together: both operators, the reconcile workers and the liveness tasks on a
controller thread of their own, until a signal (or a dead operator) stops everything."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import threading
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from annex.kube import load_connection
from annex.kubeapi import ClusterApi, error_message
from home_agent.agent import Agent
from home_agent.apiserver_address import NoHomeApiServerAddress, with_home_apiserver
from home_agent.config import AgentConfig
from home_agent.credentials import RemoteCredentials
from home_agent.heartbeat import health_loop, lease_loop
from home_agent.kubelet.server import KubeletServer
from home_agent.metrics import Metrics
from home_agent.metrics import serve as serve_metrics
from home_agent.offloading import reconcile_offloading
from home_agent.operators import NodePodsWatch, OperatorThread, home_watch
from home_agent.pods import PodOffloader, RetryLater
from home_agent.reflection.kinds import reflection_for
from home_agent.reflection.reflector import Reflection
from home_agent.remote_watch import RemoteWatches
from home_agent.synced_cache import PodState, SyncedPods
from home_agent.virtual_node import reconcile_node
from home_agent.webhook import serve as serve_webhook
from annex.workqueue import SYNC_WAIT

log = logging.getLogger(__name__)


def _kind(key: Hashable) -> str:
    return str(key[0]) if isinstance(key, tuple) else "?"


def _synced_for(agent: Agent, kind: str) -> bool:
    if kind == "twins":
        return agent.tenant_synced.is_set()
    if not agent.home_synced.is_set():
        return False
    return kind == "node" or agent.remote_synced()


async def reconcile(agent: Agent, pods: PodOffloader, watches: RemoteWatches,
                    key: Hashable) -> None:
    """One key, its mirrors synced (see `worker`)."""
    assert isinstance(key, tuple)
    match key:
        case ("node",):
            await reconcile_node(agent)
        case ("twins",):
            await asyncio.get_running_loop().run_in_executor(None, watches.follow_twins)
        case ("offloading", namespace):
            await reconcile_offloading(agent, namespace)
        case ("pod", namespace, name):
            await pods.reconcile(namespace, name)


class Parked:
    """Keys taken before their mirrors were listed. Each stays in process in the queue (counted
    as pending, never taken twice) until its side is listed, then goes back in line. Requeueing
    each key every SYNC_WAIT instead kept thousands of keys cycling through the workers during a
    restart's initial listings, competing with them for the interpreter."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._lock = threading.Lock()
        self._keys: set[Hashable] = set()

    def add(self, key: Hashable) -> None:
        with self._lock:
            self._keys.add(key)

    def release_synced(self) -> None:
        with self._lock:
            ready = {key for key in self._keys if _synced_for(self.agent, _kind(key))}
            self._keys -= ready
        for key in ready:
            self.agent.queue.add(key)  # marked dirty while in process: done() requeues it
            self.agent.queue.done(key)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(SYNC_WAIT)
            self.release_synced()


async def worker(agent: Agent, pods: PodOffloader, watches: RemoteWatches,
                 metrics: Metrics, parked: Parked, synced_pods: SyncedPods | None) -> None:
    while True:
        key = await agent.queue.get_async()
        if key is None:
            return
        kind = _kind(key)
        if not _synced_for(agent, kind):
            # Nothing is decided on a mirror still filling: the node waits for the home
            # listings, namespaces and pods for both sides' (a missing ShadowPod or
            # NamespaceMap must not read as "gone").
            parked.add(key)
            continue
        state: PodState | None = None
        if synced_pods is not None and isinstance(key, tuple) and kind == "pod":
            unchanged, state = synced_pods.check(agent, key[1], key[2])
            if unchanged:
                agent.queue.forget(key)
                agent.queue.done(key)
                metrics.reconciled(kind, "unchanged")
                continue
        try:
            await reconcile(agent, pods, watches, key)
            agent.queue.forget(key)
            metrics.reconciled(kind, "success")
            if synced_pods is not None and isinstance(key, tuple) and kind == "pod":
                synced_pods.reconciled(key[1], key[2], state)
        except RetryLater:
            agent.queue.retry(key)
            metrics.reconciled(kind, "retry")
        except Exception as error:  # noqa: BLE001 - one key's failure never stops the others
            metrics.reconciled(kind, "error")
            delay = agent.queue.retry(key)
            log.warning("reconcile %s failed (retry in %.1fs): %s", key, delay,
                        error_message(error))
            log.debug("reconcile %s failed", key, exc_info=True)
        finally:
            agent.queue.done(key)


async def controller(agent: Agent, watches: RemoteWatches, reflection: Reflection,
                     credentials: RemoteCredentials, stop: threading.Event) -> None:
    loop = asyncio.get_running_loop()
    # For the few blocking calls (waiting for the stop, replacing the twins watch, DNS).
    loop.set_default_executor(ThreadPoolExecutor(max_workers=8))
    pods = PodOffloader(agent)
    metrics = Metrics(reflection.queued)
    parked = Parked(agent)
    synced_pods = None
    if agent.config.redis_url:
        synced_pods = SyncedPods(agent.config.redis_url, agent.config.home_cluster_id,
                                 agent.config.remote_cluster_id)
        await synced_pods.load()
    tasks = [asyncio.create_task(worker(agent, pods, watches, metrics, parked, synced_pods))
             for _ in range(agent.config.workers)]
    tasks.append(asyncio.create_task(parked.run()))
    if synced_pods is not None:
        tasks.append(asyncio.create_task(synced_pods.run()))
    tasks.append(asyncio.create_task(watches.start()))
    tasks.append(asyncio.create_task(credentials.run()))
    tasks.append(asyncio.create_task(reflection.run()))
    tasks.append(asyncio.create_task(lease_loop(agent)))
    tasks.append(asyncio.create_task(health_loop(agent)))
    agent.enqueue(("node",))
    servers = [await serve_webhook(agent), await serve_metrics(agent, metrics)]
    await loop.run_in_executor(None, stop.wait)
    for server in servers:
        if server is not None:
            await server.cleanup()
    agent.queue.shutdown()
    reflection.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await agent.home.close()  # the clients' sessions live on this loop
    await agent.remote.close()


async def _configured(config: AgentConfig, home: ClusterApi) -> AgentConfig:
    try:
        return await with_home_apiserver(config, home)
    finally:
        await home.close()  # its session belongs to this loop, not the controller's


def run(config: AgentConfig) -> int:
    home = ClusterApi(load_connection(config.home_kubeconfig, limits=config.home_limits))
    try:
        config = asyncio.run(_configured(config, home))
    except NoHomeApiServerAddress as error:
        log.error("%s", error)
        return 2
    try:
        kubelet = KubeletServer(config)
    except OSError as error:
        log.error("cannot serve the kubelet API on %s:%d: %s", config.kubelet_address,
                  config.kubelet_port, error)
        return 2
    config = dataclasses.replace(config, kubelet_port=kubelet.port)  # port 0: the one bound
    remote = ClusterApi(load_connection(config.remote_kubeconfig, limits=config.remote_limits))
    agent = Agent(config, home, remote)
    reflection = reflection_for(agent)
    credentials = RemoteCredentials(agent)

    def on_home_event(plural: str, event_type: str | None, obj: dict[str, Any]) -> None:
        # The agent's mirrors first (it ignores the kinds it does not watch): reflection reads
        # them too (the token reflector the pods, every reflector the VirtualNode).
        agent.on_home_event(plural, event_type, obj)
        reflection.home_sink(plural, event_type, obj)
        reflection.after_agent_event(plural)
        if plural == "virtualnodes" and home_listed.is_set():
            node_pods.follow(agent.node_name())
            credentials.virtual_node_changed()

    def on_remote_event(plural: str, event_type: str | None, obj: dict[str, Any]) -> None:
        if not reflection.remote_sink(plural, event_type, obj):
            agent.on_remote_event(plural, event_type, obj)
            reflection.after_agent_event(plural)

    def pods_synced() -> None:
        log.info("home cluster listed")
        agent.home_synced.set()

    home_listed = threading.Event()

    def home_synced() -> None:
        # The VirtualNodes are listed: the virtual node's name is known, its pods can be.
        home_listed.set()
        node_pods.follow(agent.node_name())
        credentials.virtual_node_changed()

    node_pods = NodePodsWatch(home.connection, on_home_event, pods_synced,
                              agent.mirrors.pods.values)
    home_operator = OperatorThread(
        home.connection, home_watch(reflection.resources(), reflection.home_label_selectors()),
        on_home_event, home_synced)
    watches = RemoteWatches(agent, on_remote_event, reflection.resources(), reflection)
    stop = threading.Event()

    def request_stop(*_: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    controller_thread = threading.Thread(
        target=lambda: asyncio.run(controller(agent, watches, reflection, credentials, stop)),
        name="controller",
        daemon=True)
    home_operator.start()
    controller_thread.start()
    kubelet.start(agent)
    log.info("home agent %s → %s started (node %s)", config.home_cluster_id,
             config.remote_cluster_id, agent.node_name())
    exit_code = 0
    while not stop.wait(1.0):
        if not (home_operator.is_alive() and node_pods.is_alive() and watches.alive()
                and controller_thread.is_alive() and kubelet.alive()):
            log.error("a component stopped: exiting")
            exit_code = 1
            stop.set()
    home_operator.stop()  # first: it may start a pods watch
    node_pods.stop()
    watches.stop()
    controller_thread.join(10)
    kubelet.stop()
    return exit_code
