"""`helm uninstall` of both charts leaves nothing behind and hangs on nothing.

One scenario: both charts installed (what their templates render; the components run as local
processes with their charts' identities, as annex-demo runs them), `annexctl peer`, the home
controller spawning the agent, a namespace offloaded with a pod running remotely. Then each
release is uninstalled as Helm does it: its pre-delete hooks rendered from the chart, their
ServiceAccount and RBAC created in hook-weight order, the hook Job's command run as that
ServiceAccount (its RBAC is what lets it work), the hook objects deleted once it succeeded, then
every object of the release deleted (and its component stopped, as the kubelet stops the pods of
a deleted Deployment). Afterwards no annex object, finalizer, Node, twin namespace or RBAC
object made by annex is left on either cluster, and nothing is terminating.

The installation is tests/charts/releases.py's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from annexctl.cli import main as annexctl
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.virtual_node import VIRTUAL_NODE
from shared.wellknown import (
    ORIGIN_CLUSTER_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    SCHEDULING_ENABLED_LABEL,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
)
from tests.charts.releases import Release, items, peered_with_a_pod
from tests.conftest import ClusterHandle
from tests.helpers import wait_for

INSTANCE = "app.kubernetes.io/instance"


@dataclass
class Scenario:
    home: ClusterHandle
    remote: ClusterHandle
    home_id: str
    provider_id: str
    workload: str  # the offloaded home namespace
    twin: str
    home_release: Release
    provider_release: Release
    hooks: dict[str, subprocess.CompletedProcess[str]]
    unpeer: int  # annexctl unpeer's exit code afterwards


@pytest.fixture(scope="module")
def uninstalled(home: ClusterHandle, remote: ClusterHandle,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    directory = tmp_path_factory.mktemp("uninstall")
    peered = peered_with_a_pod(home, remote, directory)
    try:
        assert remote.core.read_namespaced_pod("web", peered.twin)
        hooks = peered.uninstall(directory)
        unpeer = annexctl([
            "unpeer", "--kubeconfig", str(home.kubeconfig), "--remote-kubeconfig",
            str(remote.kubeconfig), "--cluster-id", peered.home_id, "--remote-cluster-id",
            peered.provider_id, "-n", peered.home_release.namespace, "--timeout", "30"])
        yield Scenario(home, remote, peered.home_id, peered.provider_id, peered.workload,
                       peered.twin, peered.home_release, peered.provider, hooks, unpeer)
    finally:
        peered.clean_up()


def gone(leftovers: Any) -> list[str]:
    """What is left once the garbage collector and namespace deletions had their time."""
    try:
        wait_for(lambda: not leftovers(), timeout=60, interval=0.5)
    except AssertionError:
        pass
    left: list[str] = leftovers()
    return left


def test_both_hooks_succeed_and_unpeer_finds_nothing_hanging(uninstalled: Scenario) -> None:
    for side, done in uninstalled.hooks.items():
        assert done.returncode == 0, f"{side} hook: {done.stdout}"
    assert "VirtualNode" in uninstalled.hooks["home"].stdout
    assert uninstalled.unpeer == 0


def test_nothing_annex_made_is_left_at_home(uninstalled: Scenario) -> None:
    home, release = uninstalled.home, uninstalled.home_release
    namespace = release.namespace
    assert not items(home, VIRTUAL_NODE.api_version, VIRTUAL_NODE.kind, namespace=namespace)
    assert not items(home, "v1", "Node", label_selector=(
        f"{TYPE_LABEL}={TYPE_VIRTUAL_NODE},{REMOTE_CLUSTER_ID_LABEL}={uninstalled.provider_id}"))
    assert not [f for f in items(home, FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind)
                if f["metadata"]["name"] == uninstalled.provider_id]
    # The user's NamespaceOffloading stays, without any agent's finalizer, and the namespace
    # without the agents' label; the standalone pod went with the drain.
    (offloading,) = items(home, NAMESPACE_OFFLOADING.api_version, NAMESPACE_OFFLOADING.kind,
                          namespace=uninstalled.workload)
    assert not offloading["metadata"].get("finalizers")
    labels = home.core.read_namespace(uninstalled.workload).metadata.labels or {}
    assert SCHEDULING_ENABLED_LABEL not in labels
    assert not home.core.list_namespaced_pod(uninstalled.workload).items

    def leftovers() -> list[str]:
        """Everything in the release namespace, and the release's cluster-wide RBAC."""
        found = []
        for api_version, kind in (("v1", "ServiceAccount"), ("v1", "Secret"),
                                  ("v1", "ConfigMap"), ("coordination.k8s.io/v1", "Lease"),
                                  ("apps/v1", "Deployment"), ("policy/v1", "PodDisruptionBudget"),
                                  ("rbac.authorization.k8s.io/v1", "Role"),
                                  ("rbac.authorization.k8s.io/v1", "RoleBinding")):
            found += [f"{kind} {i['metadata']['name']}"
                      for i in items(home, api_version, kind, namespace=namespace)
                      if not i["metadata"]["name"].startswith("default")
                      and i["metadata"]["name"] != "kube-root-ca.crt"]
        for kind in ("ClusterRole", "ClusterRoleBinding", "RoleBinding"):
            found += [f"{kind} {i['metadata']['name']}" for i in items(
                home, "rbac.authorization.k8s.io/v1", kind,
                label_selector=f"{INSTANCE}={release.name}")]
        return found

    assert gone(leftovers) == []


def test_nothing_annex_made_is_left_on_the_provider(uninstalled: Scenario) -> None:
    remote, release = uninstalled.remote, uninstalled.provider_release

    def leftovers() -> list[str]:
        found = [f"Namespace {n.metadata.name}" for n in remote.core.list_namespace(
            label_selector=f"{ORIGIN_CLUSTER_LABEL}={uninstalled.home_id}").items]
        found += [f"Namespace {n.metadata.name}" for n in remote.core.list_namespace().items
                  if n.metadata.name == f"annex-tenant-{uninstalled.home_id}"]
        found += [f"NamespaceMap {m['metadata']['namespace']}/{m['metadata']['name']}"
                  for m in items(remote, NAMESPACE_MAP.api_version, NAMESPACE_MAP.kind)
                  if m["metadata"]["namespace"] == f"annex-tenant-{uninstalled.home_id}"]
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            found += [f"{kind} {i['metadata']['name']}" for i in items(
                remote, "rbac.authorization.k8s.io/v1", kind,
                label_selector=f"{INSTANCE}={release.name}")]
        found += [f"ServiceAccount {i['metadata']['name']}" for i in items(
            remote, "v1", "ServiceAccount", namespace=release.namespace)
            if i["metadata"]["name"] != "default"]
        found += [f"Lease {i['metadata']['name']}" for i in items(  # the replicas' election
            remote, "coordination.k8s.io/v1", "Lease", namespace=release.namespace)]
        return found

    assert gone(leftovers) == []
    assert uninstalled.twin not in {n.metadata.name for n in remote.core.list_namespace().items}
