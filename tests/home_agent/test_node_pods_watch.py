"""The agent watches only the home pods bound to its virtual node, as a kubelet does (a
`spec.nodeName` field selector): pods elsewhere never reach it. When the virtual node's name
changes (it can come from the VirtualNode), the watch follows, and the pods of the old name
leave as DELETED. Against the `home` cluster: kubesim, or a real one."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from annex.kube import load_connection
from annex.mirror import Mirror
from home_agent.watches import NodePodsWatch, node_pods_watch
from shared.api.builtin import PODS
from tests.conftest import ClusterHandle
from tests.helpers import wait_for

T = TypeVar("T")


def test_the_pod_watch_selects_the_node_by_field() -> None:
    assert node_pods_watch("liqo-remote-1").queries == {
        PODS.resource: {"fieldSelector": "spec.nodeName=liqo-remote-1"}}


class Seen:
    """The sink: what the watch delivered, as the agent's pod mirror holds it."""

    def __init__(self) -> None:
        self.mirror = Mirror()
        self.deleted: list[str] = []
        self.synced = threading.Event()

    def sink(self, plural: str, event_type: str | None, obj: dict[str, Any]) -> None:
        assert plural == "pods"
        self.mirror.apply(event_type, obj)
        if event_type == "DELETED":
            self.deleted.append(obj["metadata"]["name"])

    def names(self) -> set[str]:
        return {name for _, name in self.mirror.keys()}


class OnLoop:
    """The agent's event loop, on a thread of its own: the watch is driven there, as the
    agent's VirtualNode route drives it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, function: Callable[[], T]) -> T:
        async def on_loop() -> T:
            return function()
        return asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result(timeout=10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def seen_pods(home: ClusterHandle) -> Iterator[tuple[Seen, NodePodsWatch, OnLoop]]:
    seen, on_loop = Seen(), OnLoop()
    watch = NodePodsWatch(load_connection(str(home.kubeconfig)), seen.sink, seen.synced.set,
                          seen.mirror.values)
    yield seen, watch, on_loop
    on_loop.call(watch.stop)
    on_loop.close()


def _pod(home: ClusterHandle, namespace: str, name: str, node: str | None) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "nginx:1.25"}],
                            # never scheduled anywhere else while the test looks
                            "nodeSelector": {"annex.test/nowhere": "true"}}
    if node:
        spec["nodeName"] = node
    home.core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})


def test_only_pods_bound_to_the_node_arrive_and_a_new_name_moves_the_watch(
        home: ClusterHandle, namespace: str,
        seen_pods: tuple[Seen, NodePodsWatch, OnLoop]) -> None:
    seen, watch, on_loop = seen_pods
    first, second = (f"virtual-{uuid.uuid4().hex[:8]}" for _ in range(2))
    _pod(home, namespace, "on-first", first)
    on_loop.call(lambda: watch.follow([first]))
    wait_for(seen.synced.is_set, message="the node's pods listed")
    assert seen.names() == {"on-first"}
    _pod(home, namespace, "on-second", second)
    _pod(home, namespace, "unbound", None)
    _pod(home, namespace, "on-first-too", first)
    wait_for(lambda: "on-first-too" in seen.names(), message="a new pod of the node watched")
    assert seen.names() == {"on-first", "on-first-too"}

    on_loop.call(lambda: watch.follow([first]))  # the same name: the watch stays
    on_loop.call(lambda: watch.follow([second]))
    wait_for(lambda: seen.names() == {"on-second"},
             message="the old name's pods left, the new name's listed")
    assert sorted(seen.deleted) == ["on-first", "on-first-too"]
    assert watch.node_names == {second} and on_loop.call(watch.is_alive)


def test_each_pool_node_has_its_watch_and_a_node_dropped_takes_only_its_pods(
        home: ClusterHandle, namespace: str,
        seen_pods: tuple[Seen, NodePodsWatch, OnLoop]) -> None:
    """A provider with pools is one node per pool: one watch a node, as one kubelet a node."""
    seen, watch, on_loop = seen_pods
    gpu, cpu, zone = (f"virtual-{uuid.uuid4().hex[:8]}-{pool}" for pool in ("gpu", "cpu", "zone"))
    _pod(home, namespace, "on-gpu", gpu)
    _pod(home, namespace, "on-cpu", cpu)
    on_loop.call(lambda: watch.follow([gpu, cpu]))
    wait_for(seen.synced.is_set, message="both nodes' pods listed")
    assert seen.names() == {"on-gpu", "on-cpu"}
    on_loop.call(lambda: watch.follow([gpu, cpu, zone]))  # a pool more
    _pod(home, namespace, "on-zone", zone)
    wait_for(lambda: "on-zone" in seen.names(), message="the new pool's node's pods watched")
    on_loop.call(lambda: watch.follow([gpu, zone]))  # a pool withdrawn and its node gone
    wait_for(lambda: seen.names() == {"on-gpu", "on-zone"}, message="the dropped node's pods left")
    assert seen.deleted == ["on-cpu"]
    assert watch.node_names == {gpu, zone} and on_loop.call(watch.is_alive)
