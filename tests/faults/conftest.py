"""Fault-suite fixtures: the end-to-end system (the remote enforcer and the home agent as real
processes against the `home` and `remote` clusters), with the flags that make faults show in
seconds, a namespace offloaded to it and a watch history of both sides.

On kubesim and on envtest's control planes the suite has a pair of clusters of its own, whose
remote workers take the hundreds of pods the faults are tried with (a kubelet's default is 110
pods, one worker), and which the rest of the test session does not load. Each test withdraws
what it offloaded before its agent stops (see `system`), so the remote cluster holds one
test's pods at a time however many runs the suite makes."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import ON_REAL_CLUSTERS, REAL_HOME, REAL_REMOTE, ClusterHandle, _handle
from tests.e2e import conftest as e2e
from tests.e2e.conftest import Peer
from tests.e2e.test_offloading import offloaded
from tests.envtest.plugin import envtest_clusters, envtest_requested
from tests.faults.history import History, Recorder, pods_of, shadow_pods_of
from tests.helpers import wait_for
from tests.home_agent.agentproc import Process, install_crds
from tests.home_agent.conftest import RunningAgent
from tests.home_agent.play import namespace_offloading
from tests.remote_enforcer.conftest import Enforcer

# The end-to-end fixtures, reused as they are.
start_agent = e2e.start_agent
peer = e2e.peer
pytest_runtest_makereport = e2e.pytest_runtest_makereport

FAST = ("--home-qps", "1000", "--home-burst", "1000", "--remote-qps", "1000",
        "--remote-burst", "1000", "--workers", "20", "--log-level", "INFO")
"""Client throttling out of the way: the tests are about faults, not about rate limits."""


FAULT_BURST = int(os.environ.get("FAULT_BURST", "100"))
"""Pods created per run of the agent-crash test (the issue's scale: 500), the largest load the
suite puts on the remote cluster but for the 200-pod cut."""

REMOTE_WORKER_PODS = 250  # a node's /24 pod CIDR holds 254 addresses
REMOTE_WORKERS = max(4, math.ceil(2 * FAULT_BURST / REMOTE_WORKER_PODS))
"""Room for twice the largest load: one test's pods, and what a failed run that could not
withdraw its own left behind."""

WITHDRAWAL = 180  # seconds for the agent and the enforcer to take down a test's offloaded pods


@pytest.fixture(scope="package")
def clusters(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ClusterHandle]]:
    if ON_REAL_CLUSTERS:
        assert REAL_HOME and REAL_REMOTE
        yield {"home": _handle("home", Path(REAL_HOME)),
               "remote": _handle("remote", Path(REAL_REMOTE))}
        return
    if envtest_requested(request.config):  # two real control planes of the suite's own
        with envtest_clusters(request.config, tmp_path_factory.mktemp("envtest-faults"),
                              remote_workers=REMOTE_WORKERS,
                              worker_pods=REMOTE_WORKER_PODS) as kubeconfigs:
            handles = {name: _handle(name, path) for name, path in kubeconfigs.items()}
            yield handles
            for handle in handles.values():
                handle.api_client.close()
        return
    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    home, remote = Cluster("home"), Cluster("remote", workers=REMOTE_WORKERS)
    remote.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=REMOTE_WORKERS, pod_cidr=remote.pod_cidr, node_prefix="remote-worker",
        worker_pods=REMOTE_WORKER_PODS, kubelet_events=False)
    directory = tmp_path_factory.mktemp("kubesim-faults")
    with ClusterThread([home, remote], directory) as thread:
        handles = {sim.name: _handle(sim.name, directory / f"{sim.name}.kubeconfig", sim, thread)
                   for sim in (home, remote)}
        yield handles
        for handle in handles.values():
            handle.api_client.close()


@pytest.fixture(scope="package")
def home(clusters: dict[str, ClusterHandle]) -> ClusterHandle:
    return clusters["home"]


@pytest.fixture(scope="package")
def remote(clusters: dict[str, ClusterHandle]) -> ClusterHandle:
    return clusters["remote"]


@pytest.fixture(scope="package")
def crds(home: ClusterHandle, remote: ClusterHandle) -> None:
    install_crds(home)
    install_crds(remote)


@pytest.fixture(scope="package")
def enforcer(remote: ClusterHandle, crds: None,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforcer]:
    """The end-to-end enforcer, once for the whole suite (tests that kill it start it again)."""
    with e2e.e2e_enforcer(remote, tmp_path_factory.mktemp("enforcer")) as process:
        yield process


@dataclass
class System:
    """One peering: the agent, the home namespace it offloads and that namespace's twin."""

    agent: RunningAgent
    namespace: str
    twin: str
    history: History
    restarts: int = 0

    def crash_agent(self) -> None:
        """SIGKILL the agent and start it again at once, with the same flags and identity."""
        crashed = self.agent.process
        crashed.kill()
        crashed.stop()  # closes its log
        self.restarts += 1
        log = crashed.log_path.with_name(f"{crashed.log_path.stem}.{self.restarts}.log")
        arguments = [str(argument) for argument in crashed.popen.args[1:]]  # type: ignore[index]
        self.agent.process = Process(arguments, log)  # the same flags and identity


@pytest.fixture
def system(home: ClusterHandle, remote: ClusterHandle, namespace: str,
           peer: Peer) -> Iterator[Any]:
    """system(*flags) → a `System`: an agent peered with the enforcer's cluster (fast client
    limits plus `flags`), `namespace` offloaded, and from then on every event of the home pods,
    the remote pods and the ShadowPods recorded in its history."""
    recorders: list[Recorder] = []

    def start(*flags: str) -> System:
        agent = peer(*FAST, *flags)
        twin = offloaded(home, namespace)
        history = History()
        for lister, source in ((pods_of(home, namespace), "home/pods"),
                               (pods_of(remote, twin), "remote/pods"),
                               (shadow_pods_of(remote, twin), "remote/shadowpods")):
            recorders.append(Recorder(lister, source, history))
            recorders[-1].start()
        return System(agent, namespace, twin, history)

    yield start
    for recorder in recorders:
        recorder.stop()
    for recorder in recorders:
        recorder.join()
    if recorders:  # a system was started: withdraw it while its agent still runs
        withdraw(home, remote, namespace)


def withdraw(home: ClusterHandle, remote: ClusterHandle, namespace: str) -> None:
    """Delete the offloaded home namespace and wait until the agent and the enforcer have taken
    its twin, with every remote pod and ShadowPod in it, off the remote cluster (the
    NamespaceOffloading's finalizer holds the home namespace until then): the next test starts
    from an empty remote cluster."""
    twin = str((namespace_offloading(home, namespace).get("status") or {})
               .get("remoteNamespaceName") or "")
    home.core.delete_namespace(namespace)

    wait_for(lambda: not exists(home, namespace) and not (twin and exists(remote, twin)),
             timeout=WITHDRAWAL, interval=0.2,
             message=f"{namespace} and its twin {twin} withdrawn")


def exists(cluster: ClusterHandle, namespace: str) -> bool:
    try:
        cluster.core.read_namespace(namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True
