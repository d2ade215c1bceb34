"""The offloading benchmark on clusters it is given (E2E_HOME_KUBECONFIG, E2E_REMOTE_KUBECONFIG),
as it runs on real ones: here two kubesim clusters that outlive its runs. It runs twice on the
same clusters and leaves nothing behind, binds no pod to a node that does not exist (a
controller-manager's pod garbage collector would delete it), counts writes from the
components' own request counters, and refuses to start when the remote cannot run its pods."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.bench.test_offloading_benchmark import offloading_writes
from tests.helpers import wait_for

REPO = Path(__file__).resolve().parents[2]
PODS, LATENCY_PODS = 10, 3
REMOTE_PODS = 40
"""The remote's pod capacity (one worker): room for a run, not for a big one."""
PREFIXES = ("bench-", "annex-tenant-bench-", "liqo-bench-", "shadowpods.bench-")
"""What a run names its namespaces, nodes and webhook configuration."""


@dataclass
class Given:
    directory: Path
    home: client.CoreV1Api
    remote: client.CoreV1Api
    admission: client.AdmissionregistrationV1Api
    orphans: set[str] = field(default_factory=set)
    """Home pods seen bound to a node that did not exist."""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("E2E_")}
        return {**env, "E2E_HOME_KUBECONFIG": str(self.directory / "home.kubeconfig"),
                "E2E_REMOTE_KUBECONFIG": str(self.directory / "remote.kubeconfig")}

    def bench(self, *flags: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bench", "--latency-pods", str(LATENCY_PODS),
             "--idle-seconds", "1", *flags],
            cwd=REPO, env=self.env(), capture_output=True, text=True, timeout=timeout,
            check=False)

    def left(self) -> list[str]:
        """What runs named as theirs that is still there, on either cluster."""
        names = [n.metadata.name for api in (self.home, self.remote)
                 for n in api.list_namespace().items]
        names += [n.metadata.name for n in self.home.list_node().items]
        names += [w.metadata.name for w in
                  self.admission.list_validating_webhook_configuration().items]
        return sorted(n for n in names if n.startswith(PREFIXES))


def _watch_for_orphans(home: client.CoreV1Api, orphans: set[str], stop: threading.Event) -> None:
    """What the pod garbage collector looks for: pods bound to a node that does not exist."""
    while not stop.wait(0.2):
        nodes = {n.metadata.name for n in home.list_node().items}
        for pod in home.list_pod_for_all_namespaces().items:
            if pod.spec.node_name and pod.spec.node_name not in nodes:
                orphans.add(f"{pod.metadata.namespace}/{pod.metadata.name} on "
                            f"{pod.spec.node_name}")


@pytest.fixture(scope="module")
def given(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Given]:
    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    directory = tmp_path_factory.mktemp("given")
    home = Cluster("home", pod_cidr="10.10.0.0/16")
    remote = Cluster("remote", pod_cidr="10.20.0.0/16")
    remote.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=1, pod_cidr="10.20.0.0/16", node_prefix="remote-worker",
        worker_pods=REMOTE_PODS)
    thread = ClusterThread([home, remote], directory)
    thread.start()
    apis = [config.new_client_from_config(config_file=str(directory / f"{name}.kubeconfig"))
            for name in ("home", "remote")]
    found = Given(directory, client.CoreV1Api(apis[0]), client.CoreV1Api(apis[1]),
                  client.AdmissionregistrationV1Api(apis[1]))
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_for_orphans, args=(found.home, found.orphans, stop),
                               daemon=True)
    watcher.start()
    try:
        yield found
    finally:
        stop.set()
        watcher.join(10)
        thread.stop()


@pytest.fixture(scope="module")
def reports(given: Given, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Two runs, one after the other, on the same clusters."""
    found = []
    for attempt in range(2):
        output = tmp_path_factory.mktemp("bench") / f"run-{attempt}.json"
        run = given.bench("--pods", str(PODS), "--scenarios", "latency,offloading",
                          "--json", str(output))
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        found.append(json.loads(output.read_text()))
    return found


@pytest.mark.timeout(600)
def test_it_runs_twice_on_the_same_clusters_and_leaves_nothing_behind(
        given: Given, reports: list[dict[str, Any]]) -> None:
    assert [r["clusters"] for r in reports] == ["real", "real"]
    assert reports[0]["run_id"] != reports[1]["run_id"]
    assert given.left() == []


@pytest.mark.timeout(600)
def test_no_pod_is_ever_bound_to_a_node_that_does_not_exist(
        given: Given, reports: list[dict[str, Any]]) -> None:
    assert all(r["offloading"]["bare"]["pods"] == PODS for r in reports)
    assert given.orphans == set()


@pytest.mark.timeout(600)
def test_writes_are_counted_by_the_components_themselves(reports: list[dict[str, Any]]) -> None:
    offloading = reports[-1]["offloading"]
    for cluster in ("home", "remote"):
        assert (offloading_writes(offloading["bare"]["requests"][cluster])
                == offloading_writes(offloading["agent"]["requests"][cluster])), cluster
    assert offloading_writes(offloading["agent"]["requests"]["remote"]) == {
        "shadowpods": PODS, "secrets": PODS}
    # The enforcer creates a pod per ShadowPod, the agent's and the bare client's alike.
    for label in ("bare", "agent"):
        enforcer = offloading[label]["enforcer_requests"]["remote"]["by_verb"]
        assert enforcer["create|pods"] == PODS


@pytest.mark.timeout(120)
def test_a_remote_without_room_for_the_pods_is_refused_before_anything_is_created(
        given: Given) -> None:
    before = given.left()
    run = given.bench("--pods", str(REMOTE_PODS), timeout=60)
    # the agent's and the bare client's pods, the streams scenario's 10 pods and its two
    # latency measurements
    needed = 2 * (REMOTE_PODS + LATENCY_PODS) + 10 + 2 * LATENCY_PODS
    assert run.returncode != 0
    assert run.stderr.startswith("error: the remote cluster has room for "), run.stderr
    assert f"this run needs {needed}" in run.stderr
    assert given.left() == before


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_an_interrupted_run_removes_what_it_created(given: Given, signum: int,
                                                    tmp_path: Path) -> None:
    before = given.left()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench", "--pods", str(PODS), "--latency-pods",
         str(PODS), "--latency-rate", "1", "--scenarios", "latency,offloading", "--json",
         str(tmp_path / "run.json")],
        cwd=REPO, env=given.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Interrupted in its first scenario, once the bare client's node is there.
        wait_for(lambda: process.poll() is not None or any(
            n.startswith("bench-bare-node-") for n in given.left()),
            timeout=120, message="the run set up", interval=0.5)
        assert process.poll() is None, process.communicate()
        process.send_signal(signum)
        _, err = process.communicate(timeout=200)
    finally:
        process.kill()
    assert process.returncode != 0
    assert "interrupted (run " in err
    assert given.left() == before
