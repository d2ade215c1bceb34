"""Two kubesim clusters that outlive a benchmark's run, given to it as real ones are
(E2E_HOME_KUBECONFIG, E2E_REMOTE_KUBECONFIG), and what a run left there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
