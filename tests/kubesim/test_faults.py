"""Fault injection: refuse, black-hole, drop watches, latencies; per cluster and per identity."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from aiohttp import web
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from kubesim.faults import FaultsClient
from tests.helpers import wait_for
from tests.kubesim.test_auth_tokens import client_with_token

pytestmark = pytest.mark.kubesim_only(reason="kubesim's fault injection itself")
CUT = (urllib3.exceptions.HTTPError, ConnectionError, OSError)


class Sim:
    def __init__(self, cluster: Any, admin: client.CoreV1Api, alice: client.CoreV1Api) -> None:
        self.cluster = cluster
        self.admin = admin
        self.alice = alice

    def works(self, api: client.CoreV1Api) -> bool:
        return api.list_namespace(_request_timeout=2) is not None

    def cut(self, api: client.CoreV1Api, timeout: float = 0.5) -> bool:
        try:
            api.list_namespace(_request_timeout=timeout)
        except CUT:
            return True
        except ApiException as error:  # a 401/403 answer is an answer: not cut
            del error
        return False


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    """A cluster of its own (no controllers) with an admin and a user "alice" (cluster-admin)."""
    from kubesim.auth import add_static_token
    from kubesim.cluster import Cluster, ClusterThread

    cluster = Cluster("faulty")
    cluster.controller_names = []  # type: ignore[attr-defined]
    token = add_static_token(cluster, "alice", ("system:masters",))
    with ClusterThread([cluster], tmp_path):
        admin_client = config.new_client_from_config(
            config_file=str(tmp_path / "faulty.kubeconfig"))
        admin_client.configuration.retries = 0
        handle = type("Handle", (), {"api_client": admin_client})()
        alice_client = client_with_token(handle, token)
        yield Sim(cluster, client.CoreV1Api(admin_client), client.CoreV1Api(alice_client))
        alice_client.close()
        admin_client.close()


def test_refusing_the_cluster_stops_it_listening_until_restored(sim: Sim) -> None:
    assert sim.works(sim.admin)
    sim.cluster.faults.refuse()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((sim.cluster.host, sim.cluster.port), timeout=2).close()
    assert sim.cut(sim.admin)
    sim.cluster.faults.restore()
    wait_for(lambda: sim.works(sim.admin))


def test_refusing_one_identity_resets_only_its_connections(sim: Sim) -> None:
    sim.cluster.faults.refuse(user="alice")
    assert sim.cut(sim.alice)
    assert sim.works(sim.admin)
    sim.cluster.faults.restore()
    wait_for(lambda: sim.works(sim.alice))


def test_blackhole_accepts_and_never_answers_until_restored(sim: Sim) -> None:
    sim.cluster.faults.blackhole(user="alice")
    assert sim.cut(sim.alice, timeout=0.3)
    assert sim.works(sim.admin)
    sim.cluster.faults.blackhole()
    connection = socket.create_connection((sim.cluster.host, sim.cluster.port), timeout=2)
    connection.close()  # still accepting
    assert sim.cut(sim.admin, timeout=0.3)
    sim.cluster.faults.restore()
    wait_for(lambda: sim.works(sim.alice) and sim.works(sim.admin))


def test_latency_delays_answers(sim: Sim) -> None:
    sim.cluster.faults.latency(5.0, user="alice")
    assert sim.cut(sim.alice, timeout=0.3)
    assert sim.works(sim.admin)
    sim.cluster.faults.restore()
    assert sim.works(sim.alice)


def _config_map(name: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name))


def test_write_latency_delays_writes_only_and_restore_ends_the_waits(sim: Sim) -> None:
    """As a real server's writes wait for etcd while its reads come from memory: the write is
    held (here far longer than the client waits), reads are not; a held write completes once
    the latency is lifted."""
    sim.cluster.faults.write_latency(30.0, user="alice")
    assert sim.works(sim.alice)  # a read
    with pytest.raises(CUT):
        sim.alice.create_namespaced_config_map("default", _config_map("held"),
                                               _request_timeout=0.5)
    sim.admin.create_namespaced_config_map("default", _config_map("other"))  # not alice
    with pytest.raises(ApiException):
        sim.admin.read_namespaced_config_map("held", "default")
    sim.cluster.faults.restore()
    wait_for(lambda: sim.admin.read_namespaced_config_map("held", "default"), timeout=10)


def test_watch_latency_holds_events_back_without_cutting_streams(sim: Sim) -> None:
    """An event reaches a delayed watcher later than the others; lifted, it arrives on the same
    stream."""
    def stream(api: client.CoreV1Api) -> tuple[list[bytes], threading.Event]:
        response = api.list_namespaced_config_map("default", watch=True,
                                                  _preload_content=False)
        received: list[bytes] = []
        ended = threading.Event()

        def read() -> None:
            try:
                for chunk in response.stream(1024):
                    received.append(chunk)
            except CUT:
                pass
            ended.set()
        threading.Thread(target=read, daemon=True).start()
        return received, ended

    sim.cluster.faults.watch_latency(30.0, user="alice")
    delayed, delayed_ended = stream(sim.alice)
    prompt, _ = stream(sim.admin)
    sim.admin.create_namespaced_config_map("default", _config_map("watched"))
    wait_for(lambda: b"watched" in b"".join(prompt), timeout=10)
    assert b"watched" not in b"".join(delayed)
    sim.cluster.faults.restore()
    wait_for(lambda: b"watched" in b"".join(delayed), timeout=10)
    assert not delayed_ended.is_set()


def test_dropping_watches_cuts_open_streams(sim: Sim) -> None:
    response = sim.alice.list_namespaced_config_map("default", watch=True,
                                                    _preload_content=False)
    ended = threading.Event()

    def read_until_cut() -> None:
        try:
            for _ in response.stream(1024):
                pass
        except CUT:
            pass
        ended.set()

    reader = threading.Thread(target=read_until_cut, daemon=True)
    reader.start()
    sim.cluster.faults.drop_watches(user="alice")
    wait_for(ended.is_set, timeout=10)
    assert sim.works(sim.alice)  # new requests are served


def test_control_endpoint_drives_the_same_faults(sim: Sim) -> None:
    control = FaultsClient(sim.cluster.fault_control.url)
    control.refuse(user="alice")
    assert control.describe()["users"]["alice"]["refused"] is True
    assert sim.cut(sim.alice)
    control.restore()
    assert control.describe() == {"everyone": {"refused": False, "blackholed": False,
                                               "latency": 0.0, "write_latency": 0.0,
                                               "watch_latency": 0.0}, "users": {}}
    wait_for(lambda: sim.works(sim.alice))
    control.write_latency(0.005)
    control.watch_latency(0.001, user="alice")
    assert control.describe()["everyone"]["write_latency"] == 0.005
    assert control.describe()["users"]["alice"]["watch_latency"] == 0.001
    control.restore()


def test_blackhole_silences_open_watches_and_resumes_them_on_restore(sim: Sim) -> None:
    """A stream open before the black-hole is neither cut nor fed while it lasts: a change made
    meanwhile reaches the client only after restore (held bytes are delivered, as when a
    partition heals); a request made during it gets no answer."""
    response = sim.alice.list_namespaced_config_map("default", watch=True,
                                                    _preload_content=False)
    received: list[bytes] = []
    ended = threading.Event()

    def read() -> None:
        try:
            for chunk in response.stream(1024):
                received.append(chunk)
        except CUT:
            pass
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    sim.admin.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="before")))
    wait_for(lambda: b"before" in b"".join(received), timeout=10)

    sim.cluster.faults.blackhole(user="alice")
    sim.admin.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="during")))
    assert sim.cut(sim.alice, timeout=1.0)  # a new request is not answered within its deadline
    assert b"during" not in b"".join(received) and not ended.is_set()

    sim.cluster.faults.restore()
    wait_for(lambda: b"during" in b"".join(received), timeout=10)
    assert not ended.is_set()
    response.release_conn()


def test_blackhole_holds_back_the_answer_of_a_request_in_flight(sim: Sim) -> None:
    sim.cluster.faults.latency(1.0, user="alice")  # keeps the request in flight meanwhile
    outcome: list[bool] = []
    arrived = threading.Event()

    @web.middleware
    async def arriving(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == "/api/v1/namespaces":
            arrived.set()  # then on to the fault middleware, which waits 1 s
        return await handler(request)

    sim.cluster.middlewares.insert(0, arriving)
    asking = threading.Thread(target=lambda: outcome.append(sim.cut(sim.alice, timeout=3.0)))
    asking.start()
    assert arrived.wait(5), "alice's request did not reach the server"
    sim.cluster.faults.blackhole(user="alice")
    asking.join(timeout=10)
    assert outcome == [True]  # no answer within its deadline
    sim.cluster.faults.restore()
    wait_for(lambda: sim.works(sim.alice))
