"""`helm upgrade` of a running peering from the charts' previous version to this one touches no
workload: no offloaded pod restarted, no remote pod made again, no reflected object rewritten.

The previous version is the repository at the parent of the commit that stopped shipping the
CRDs in crds/ (chart 0.1.0 as first published: CRDs installed once, never upgraded): its charts
installed, its components run from its own source tree, peered, a namespace offloaded with a
pod and a ConfigMap. Then the upgrade as Helm and the kubelets make it: the CRDs taken
over as docs/operations.md says, every object of this version's charts created or patched where
it differs (the CRDs too), the components stopped and started again from this tree with this
version's command lines (the controller makes the agent's Deployment again when its spec
changed, and the agent runs from it).
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shared.api.shadowpod import SHADOWPOD
from shared.wellknown import ROOT_CA_REMOTE_NAME
from tests.charts.releases import Peered, Release, peered_with_a_pod
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.agentproc import REPO

FIRST_TEMPLATED_CRDS = "charts/home-agent/crds"
"""The path whose removal made the CRDs templates: its last commit's parent is the previous
version."""


def previous_version(directory: Path) -> Path:
    """The repository as it was before the CRDs became templates, extracted to `directory`."""
    def git(*args: str) -> bytes:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                              check=True).stdout

    if git("rev-parse", "--is-shallow-repository").strip() == b"true":
        # A shallow clone holds no earlier version to upgrade from (`git fetch --unshallow`).
        pytest.skip("the clone is shallow: the previous version is not in its history")
    removed = git("log", "-1", "--format=%H", "--", FIRST_TEMPLATED_CRDS).decode().strip()
    assert removed, f"no commit touched {FIRST_TEMPLATED_CRDS}"
    with tarfile.open(fileobj=io.BytesIO(git("archive", f"{removed}^")), mode="r") as archive:
        archive.extractall(directory, filter="data")
    assert (directory / FIRST_TEMPLATED_CRDS).is_dir()
    return directory


@dataclass
class Observed:
    """What must not change: uids of the pods, resourceVersions of the reflected objects (the
    ConfigMap and the namespace's root CA copy)."""

    home_pod: tuple[str, str]  # uid, the container's start time
    remote_pod: str
    shadowpod: str
    reflected: dict[str, str]

    @classmethod
    def of(cls, peered: Peered) -> Observed:
        home, remote = peered.home.core, peered.remote.core
        pod = home.read_namespaced_pod("web", peered.workload)
        shadowpod = peered.remote.dynamic.resources.get(
            api_version=SHADOWPOD.api_version, kind=SHADOWPOD.kind).get(
            name="web", namespace=peered.twin)
        reflected = {name: remote.read_namespaced_config_map(
            name, peered.twin).metadata.resource_version
            for name in ("settings", ROOT_CA_REMOTE_NAME)}
        return cls((pod.metadata.uid, str(pod.status.start_time)),
                   remote.read_namespaced_pod("web", peered.twin).metadata.uid,
                   shadowpod.metadata.uid, reflected)


@dataclass
class Upgraded:
    before: Observed
    after: Observed
    crds: dict[str, dict[str, Any]]


def take_over_crds(cluster: ClusterHandle, release: Release) -> None:
    """docs/operations.md: the CRDs a crds/ directory installed, marked as the release's."""
    resource = cluster.dynamic.resources.get(api_version="apiextensions.k8s.io/v1",
                                             kind="CustomResourceDefinition")
    for path in sorted((REPO / "charts" / release.chart / "files" / "crds").glob("*.yaml")):
        name = f"{path.stem.split('_', 1)[1]}.{path.stem.split('_', 1)[0]}"
        resource.patch(name=name, content_type="application/merge-patch+json", body={
            "metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"},
                         "annotations": {"meta.helm.sh/release-name": release.name,
                                         "meta.helm.sh/release-namespace": release.namespace}}})


@pytest.fixture(scope="module")
def upgraded(home: ClusterHandle, remote: ClusterHandle,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upgraded]:
    directory = tmp_path_factory.mktemp("upgrade")
    old = previous_version(tmp_path_factory.mktemp("previous"))
    peered = peered_with_a_pod(home, remote, directory, source=old)
    try:
        home.core.create_namespaced_config_map(peered.workload, {
            "metadata": {"name": "settings"}, "data": {"greeting": "hello"}})
        wait_for(lambda: Observed.of(peered), timeout=60, interval=0.2,
                 message="the ConfigMaps reflected")
        before = Observed.of(peered)

        peered.stop_components()
        for side, release in (("provider", peered.provider), ("home", peered.home_release)):
            take_over_crds(release.cluster, release)
            current = Release(release.cluster, release.chart, release.values, release.name,
                              release.namespace)
            release.upgrade(current)
            setattr(peered, "provider" if side == "provider" else "home_release", current)
        peered.start_components(directory, generation="2")
        peered.node_ready()
        # The agent is at work again: a ConfigMap made now is reflected, after the relist of
        # everything it found (a work queue takes keys in the order they came).
        home.core.create_namespaced_config_map(peered.workload, {"metadata": {"name": "marker"}})
        wait_for(lambda: remote.core.read_namespaced_config_map("marker", peered.twin),
                 timeout=60, interval=0.2, message="the upgraded agent reflects")
        crds = {crd["metadata"]["name"]: crd for crd in (
            dict(c) for c in home.dynamic.resources.get(
                api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").get(
                ).to_dict()["items"])}
        yield Upgraded(before, Observed.of(peered), crds)
        peered.uninstall(directory)
    finally:
        peered.clean_up()


def test_no_pod_restarted_or_made_again(upgraded: Upgraded) -> None:
    assert upgraded.after.home_pod == upgraded.before.home_pod
    assert upgraded.after.remote_pod == upgraded.before.remote_pod
    assert upgraded.after.shadowpod == upgraded.before.shadowpod


def test_no_reflected_object_rewritten(upgraded: Upgraded) -> None:
    assert upgraded.after.reflected == upgraded.before.reflected


def test_the_crds_are_the_release_s_and_kept_on_uninstall(upgraded: Upgraded) -> None:
    crd = upgraded.crds["virtualnodes.offloading.liqo.io"]
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
