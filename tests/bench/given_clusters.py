"""Two kubesim clusters that outlive a benchmark's run, given to it as real ones are
(E2E_HOME_KUBECONFIG, E2E_REMOTE_KUBECONFIG), and what a run left there; a scenario run on its
own kubesim or on those."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.bench.test_benchmark_on_given_clusters import PREFIXES


@contextmanager
def given_clusters(directory: Path, remote_workers: int,
                   home_worker_cpu: str | None = None) -> Iterator[dict[str, str]]:
    """The clusters, serving their kubeconfigs in `directory`: the environment a run gets."""
    from kubesim.cluster import Cluster, ClusterThread
    from kubesim.controllers import ControllerSettings

    home = Cluster("home", pod_cidr="10.10.0.0/16")
    if home_worker_cpu is not None:
        home.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
            workers=1, pod_cidr="10.10.0.0/16", node_prefix="home-worker",
            worker_cpu=home_worker_cpu)
    remote = Cluster("remote", pod_cidr="10.20.0.0/16")
    remote.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=remote_workers, pod_cidr="10.20.0.0/16", node_prefix="remote-worker")
    thread = ClusterThread([home, remote], directory)
    thread.start()
    try:
        yield {"E2E_HOME_KUBECONFIG": str(directory / "home.kubeconfig"),
               "E2E_REMOTE_KUBECONFIG": str(directory / "remote.kubeconfig"),
               "E2E_REMOTE_POD_CIDR": "10.20.0.0/16"}
    finally:
        thread.stop()


def left_behind(directory: Path) -> list[str]:
    """The namespaces, nodes and webhook configurations on either cluster named as a run's."""
    found: list[str] = []
    for cluster in ("home", "remote"):
        api = config.new_client_from_config(config_file=str(directory / f"{cluster}.kubeconfig"))
        core, admission = client.CoreV1Api(api), client.AdmissionregistrationV1Api(api)
        found += [n.metadata.name for n in core.list_namespace().items]
        found += [n.metadata.name for n in core.list_node().items]
        found += [w.metadata.name for w in
                  admission.list_mutating_webhook_configuration().items]
        found += [w.metadata.name for w in
                  admission.list_validating_webhook_configuration().items]
    return sorted(name for name in found if name.startswith((*PREFIXES, "pods.bench-")))


Bench = Callable[[dict[str, str], Path], "subprocess.CompletedProcess[str]"]
"""Runs the benchmark with an environment, writing its results to a path."""


@contextmanager
def scenario_run(where: str, scenario: str, bench: Bench,
                 tmp_path_factory: pytest.TempPathFactory, remote_workers: int,
                 home_worker_cpu: str | None = None,
                 changed: Callable[[Path], list[str]] = lambda directory: []
                 ) -> Iterator[tuple[dict[str, Any], str, list[str]]]:
    """`scenario`'s results, what the run printed and, on given clusters (`where`), what it
    left there named as its own and what `changed` finds it left changed ([] on its own
    kubesim)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("E2E_")}
    output = tmp_path_factory.mktemp("bench") / "bench.json"
    if where == "its own kubesim":
        run = bench(env, output)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        yield json.loads(output.read_text())[scenario], run.stdout, []
        return
    directory = tmp_path_factory.mktemp("given")
    with given_clusters(directory, remote_workers, home_worker_cpu) as given:
        run = bench({**env, **given}, output)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        yield (json.loads(output.read_text())[scenario], run.stdout,
               left_behind(directory) + changed(directory))
