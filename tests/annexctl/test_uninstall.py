"""`annexctl uninstall` when the components that should clean up are not running: the home
controller gone (a VirtualNode held by its drain finalizer, an agent's finalizer on a
NamespaceOffloading, the agent's Node left) and the enforcer gone (a NamespaceMap held by its
finalizer, its twin namespace still there). Within its timeout it ends what hangs, removes only
what annex made, and says so; the home side fails, naming what the provider may still hold.
The running components' side of the story is tests/charts/test_uninstall.py's."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.virtual_node import FINALIZER, VIRTUAL_NODE
from shared.forge.namespace_offloading import finalizer_name
from shared.ownership import ownership_labels
from shared.wellknown import (
    REMOTE_CLUSTER_ID_LABEL,
    TENANT_NAMESPACE_LABEL,
    TWIN_NAMESPACES_FINALIZER,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
)
from tests.annexctl.conftest import Annexctl, home_flags
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id

NAMESPACE_DELETION = 60
"""Seconds the uninstall waits for the twin namespaces to go: a real namespace controller
deletes every kind of content first, seconds on a loaded machine."""


def _custom(cluster: ClusterHandle) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client)


def _gone(read: Any, *args: Any) -> bool:
    try:
        read(*args)
    except client.ApiException as error:
        return error.status == 404
    return False


def test_home_without_its_controller_ends_the_drain_and_fails_saying_what_is_left(
        annexctl: Annexctl, home: ClusterHandle, crds: None, namespace: str) -> None:
    release_namespace, provider = unique_id("annex-home"), unique_id("provider")
    home.core.create_namespace({"metadata": {"name": release_namespace}})
    vn, no = VIRTUAL_NODE, NAMESPACE_OFFLOADING
    _custom(home).create_namespaced_custom_object(vn.group, vn.version, release_namespace,
                                                  vn.plural, {
        "apiVersion": vn.api_version, "kind": vn.kind,
        "metadata": {"name": provider, "finalizers": [FINALIZER]},
        "spec": {"clusterId": provider, "kubeconfigSecretRef": {"name": "kubeconfig"}}})
    _custom(home).create_namespaced_custom_object(no.group, no.version, namespace, no.plural, {
        "apiVersion": no.api_version, "kind": no.kind,
        "metadata": {"name": "offloading",
                     "finalizers": [finalizer_name(provider), "example.com/users-own"]},
        "spec": {}})
    node = f"liqo-{provider}"
    home.core.create_node({"metadata": {"name": node, "labels": {
        TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: provider}}})
    other = unique_id("not-annex")  # a Node of that name pattern annex did not make
    home.core.create_node({"metadata": {"name": other, "labels": {
        REMOTE_CLUSTER_ID_LABEL: provider}}})
    try:
        run = annexctl("uninstall", "--side", "home", *home_flags(home), "-n",
                       release_namespace, "--release", unique_id("r"), "--timeout", "2")

        assert run.code == 1
        assert f"VirtualNode {release_namespace}/{provider} was not drained in 1s" in run.err
        assert f"the provider {provider} may keep the twins of {namespace}/offloading" in run.err
        wait_for(lambda: _gone(_custom(home).get_namespaced_custom_object, vn.group,
                               vn.version, release_namespace, vn.plural, provider),
                 timeout=30, interval=0.2, message="the VirtualNode no longer held")
        offloading = _custom(home).get_namespaced_custom_object(
            no.group, no.version, namespace, no.plural, "offloading")
        assert offloading["metadata"]["finalizers"] == ["example.com/users-own"]
        assert _gone(home.core.read_node, node)
        assert home.core.read_node(other)  # no virtual-node label: not annex's
    finally:
        _custom(home).patch_namespaced_custom_object(
            no.group, no.version, namespace, no.plural, "offloading",
            {"metadata": {"finalizers": []}})
        home.core.delete_node(other)
        home.core.delete_namespace(release_namespace)


def test_provider_without_its_enforcer_deletes_only_its_twins_then_the_finalizer(
        annexctl: Annexctl, remote: ClusterHandle, crds: None) -> None:
    provider, consumer = unique_id("provider"), unique_id("home")
    tenant, twin, foreign = (unique_id("annex-tenant"), unique_id("twin"),
                             unique_id("someones"))
    remote.core.create_namespace({"metadata": {"name": tenant, "labels": {
        TENANT_NAMESPACE_LABEL: "true", REMOTE_CLUSTER_ID_LABEL: consumer}}})
    remote.core.create_namespace({"metadata": {"name": twin,
                                               "labels": ownership_labels(consumer, provider)}})
    # Named in the map's status, but made by another provider: not this one's to delete.
    remote.core.create_namespace({"metadata": {"name": foreign,
                                               "labels": ownership_labels(consumer, "other")}})
    nm = NAMESPACE_MAP
    _custom(remote).create_namespaced_custom_object(nm.group, nm.version, tenant, nm.plural, {
        "apiVersion": nm.api_version, "kind": nm.kind,
        "metadata": {"name": consumer, "finalizers": [TWIN_NAMESPACES_FINALIZER]},
        "spec": {"desiredMapping": {"demo": twin, "other": foreign}}})
    _custom(remote).patch_namespaced_custom_object_status(
        nm.group, nm.version, tenant, nm.plural, consumer, {"status": {"currentMapping": {
            "demo": {"remoteNamespace": twin, "phase": "Accepted"},
            "other": {"remoteNamespace": foreign, "phase": "Accepted"}}}})
    try:
        run = annexctl("uninstall", "--side", "provider", "--kubeconfig", str(remote.kubeconfig),
                       "--cluster-id", provider, "--timeout", str(NAMESPACE_DELETION), "-o",
                       "json")

        assert run.code == 0, run.err
        actions = {(o["kind"], o["name"]): o["action"] for o in run.json()["objects"]}
        assert actions[("Namespace", twin)] == "deleted (twin)"
        assert actions[(nm.kind, f"{tenant}/{consumer}")] == (
            f"finalizer {TWIN_NAMESPACES_FINALIZER} removed")
        assert ("Namespace", foreign) not in actions
        assert _gone(remote.core.read_namespace, twin)
        wait_for(lambda: _gone(_custom(remote).get_namespaced_custom_object, nm.group,
                               nm.version, tenant, nm.plural, consumer),
                 timeout=30, interval=0.2, message="the NamespaceMap gone")
        assert remote.core.read_namespace(foreign).status.phase == "Active"
    finally:
        for name in (tenant, foreign):
            remote.core.delete_namespace(name)
