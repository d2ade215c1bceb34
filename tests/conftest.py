"""Cluster fixtures: `home` and `remote` are simulated by kubesim unless E2E_HOME_KUBECONFIG and
E2E_REMOTE_KUBECONFIG name two real clusters, in which case the same tests run against those."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from tests.envtest.plugin import envtest_clusters, envtest_requested
from tests.envtest.plugin import pytest_addoption as pytest_addoption
from tests.envtest.plugin import pytest_configure as pytest_configure
from tests.envtest.plugin import pytest_report_header as pytest_report_header
from tests.helpers import wait_for

# Hypothesis' per-example deadline is a timed assertion: on a loaded 2-core machine it fails
# correct code at random. Speed is measured by benchmark scripts, never by tests.
settings.register_profile("annex", deadline=None)
settings.load_profile("annex")

REAL_HOME = os.environ.get("E2E_HOME_KUBECONFIG")
REAL_REMOTE = os.environ.get("E2E_REMOTE_KUBECONFIG")
ON_REAL_CLUSTERS = bool(REAL_HOME and REAL_REMOTE)


@dataclass
class ClusterHandle:
    name: str
    kubeconfig: Path
    api_client: client.ApiClient
    core: client.CoreV1Api
    dynamic: DynamicClient
    sim: Any  # kubesim.cluster.Cluster, or None on a real cluster
    thread: Any = None  # the kubesim ClusterThread serving it, or None

    def run(self, function: Any) -> Any:
        """Run a function on the simulated cluster's loop (kubesim only)."""
        assert self.thread is not None, "kubesim only"
        return self.thread.run(function)


def _handle(name: str, kubeconfig: Path, sim: Any = None, thread: Any = None) -> ClusterHandle:
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    return ClusterHandle(name, kubeconfig, api_client, client.CoreV1Api(api_client),
                         DynamicClient(api_client), sim, thread)


@pytest.fixture(scope="session")
def clusters(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ClusterHandle]]:
    if ON_REAL_CLUSTERS:
        assert REAL_HOME and REAL_REMOTE
        yield {"home": _handle("home", Path(REAL_HOME)),
               "remote": _handle("remote", Path(REAL_REMOTE))}
        return
    if envtest_requested(request.config):  # two real control planes of this session's own
        with envtest_clusters(request.config, tmp_path_factory.mktemp("envtest")) as kubeconfigs:
            yield {name: _handle(name, path) for name, path in kubeconfigs.items()}
        return
    from kubesim.cluster import Cluster, ClusterThread

    directory = tmp_path_factory.mktemp("kubesim")
    sims = [Cluster("home"), Cluster("remote")]
    thread = ClusterThread(sims, directory)
    thread.start()
    try:
        handles = {sim.name: _handle(sim.name, directory / f"{sim.name}.kubeconfig", sim, thread)
                   for sim in sims}
        yield handles
        for handle in handles.values():
            handle.api_client.close()
    finally:
        thread.stop()


@pytest.fixture(scope="session")
def home(clusters: dict[str, ClusterHandle]) -> ClusterHandle:
    return clusters["home"]


@pytest.fixture(scope="session")
def remote(clusters: dict[str, ClusterHandle]) -> ClusterHandle:
    return clusters["remote"]


@pytest.fixture
def namespace(home: ClusterHandle) -> Iterator[str]:
    """A fresh namespace on `home`, with its `default` ServiceAccount (until the service account
    controller has made it, the API server refuses pods there), deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    home.core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: home.core.read_namespaced_service_account("default", name), timeout=60,
             message=f"the default ServiceAccount of namespace {name}")
    yield name
    try:
        home.core.delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise


def marker_reason(item: pytest.Item, name: str) -> str | None:
    """The reason a test gives for its `name` marker (None without the marker); a marker
    without one stops the run: every test that does not run everywhere says why."""
    marker = item.get_closest_marker(name)
    if marker is None:
        return None
    reason = marker.kwargs.get("reason") or ""
    if not reason:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name}(reason=...) must say what "
                                "it needs that the clusters it skips lack")
    return str(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """kubesim_only tests skip on real control planes, local_clusters tests on clusters named
    by E2E_HOME_KUBECONFIG / E2E_REMOTE_KUBECONFIG (envtest's run on this machine)."""
    for item in items:
        kubesim_only = marker_reason(item, "kubesim_only")
        local = marker_reason(item, "local_clusters")
        if kubesim_only is not None and (ON_REAL_CLUSTERS or envtest_requested(config)):
            item.add_marker(pytest.mark.skip(reason=f"kubesim only: {kubesim_only}"))
        elif local is not None and ON_REAL_CLUSTERS:
            item.add_marker(pytest.mark.skip(reason=f"clusters on this machine only: {local}"))


SHARED_FIXTURE_PACKAGES = ("tests/faults/",)
"""Packages whose fixtures are package-scoped (the fault suite's own clusters and enforcer):
under pytest-xdist one worker runs all of their modules, so they are set up once."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` (the README's test command): each test file runs whole on one worker,
    so its module fixtures (enforcers, agents) start once, and each package of
    SHARED_FIXTURE_PACKAGES runs whole on one worker too."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SuiteScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for package in SHARED_FIXTURE_PACKAGES:
                if nodeid.startswith(package):
                    return package
            return super()._split_scope(nodeid)

    return SuiteScheduling(config, log)
