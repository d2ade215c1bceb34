"""The whole annexctl story with the real components: `peer` mints the identity an agent then
runs with, `offload` extends a namespace, `status` shows the virtual node, the provider's offer,
the extended namespace, the offloaded pod and a FailedReflection warning, `explain pod` says
why the pod is on the virtual node and what its remote spec is, `unoffload` and `unpeer` undo
it all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shared.api.quota import NODE_HEALTH_TOLERATIONS, QUOTA
from tests.annexctl.conftest import Annexctl, home_flags, minted_kubeconfig, peer_flags
from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id
from tests.remote_enforcer.conftest import PROVIDER_ID, Enforcer


@pytest.fixture
def agent_namespace(home: ClusterHandle, remote: ClusterHandle) -> Iterator[str]:
    """Where peer puts the kubeconfig Secret and the test its VirtualNode (the home chart's
    namespace); deleted afterwards, VirtualNode included, so no later agent sees it."""
    name = unique_id("annex-system")
    yield name
    virtual_nodes = home.dynamic.resources.get(api_version="offloading.liqo.io/v1beta1",
                                               kind="VirtualNode")
    try:
        virtual_nodes.delete(namespace=name, name=PROVIDER_ID)
    except ApiException as error:
        if error.status != 404:
            raise
    # Other tests' agents serve the same provider id: they must not find this VirtualNode.
    wait_for(lambda: not virtual_nodes.get(namespace=name).items, timeout=30,
             message="the test's VirtualNode is gone")
    try:
        home.core.delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise


BORROWED = {"key": "example.com/borrowed", "operator": "Exists"}


def allow_borrowed_toleration(remote: ClusterHandle, consumer: str) -> None:
    """The provider lets the consumer's pods carry the offloadingPatch's toleration: the Quota
    `peer` made lists it in its pod policy (closed by default)."""
    quotas = client.CustomObjectsApi(remote.api_client)
    quota = next(q for q in quotas.list_cluster_custom_object(
        QUOTA.group, QUOTA.version, QUOTA.plural)["items"]
        if q["spec"]["consumerClusterId"] == consumer)
    quotas.patch_namespaced_custom_object(
        QUOTA.group, QUOTA.version, quota["metadata"]["namespace"], QUOTA.plural,
        quota["metadata"]["name"],
        {"spec": {"podPolicy": {"allowedTolerations": [*NODE_HEALTH_TOLERATIONS, BORROWED]}}})


def _virtual_node(home: ClusterHandle, namespace: str, secret: str) -> None:
    """What the home-agent chart creates per remote."""
    resource = home.dynamic.resources.get(api_version="offloading.liqo.io/v1beta1",
                                          kind="VirtualNode")
    resource.create(namespace=namespace, body={
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
        "metadata": {"name": PROVIDER_ID},
        "spec": {"clusterId": PROVIDER_ID, "kubeconfigSecretRef": {"name": secret},
                 "offloadingPatch": {"tolerations": [BORROWED]}}})


def _mine(entries: list[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    return next(entry for entry in entries if entry[key] == value)


def test_peer_offload_status_explain_unoffload_unpeer(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, enforcer: Enforcer,
        start_agent: Any, namespace: str, agent_namespace: str, tmp_path: Path) -> None:
    home_id = unique_id("home")
    flags = peer_flags(home, remote, home_id, PROVIDER_ID, agent_namespace)
    assert annexctl("peer", *flags).code == 0
    allow_borrowed_toleration(remote, home_id)
    secret = f"{PROVIDER_ID}-kubeconfig"
    _virtual_node(home, agent_namespace, secret)
    agent = start_agent(remote_kubeconfig=minted_kubeconfig(home, agent_namespace, secret,
                                                            tmp_path),
                        remote_id=PROVIDER_ID, home_id=home_id)

    run = annexctl("offload", "namespace", namespace, *home_flags(home),
                   "--pod-strategy", "Remote", "--timeout", "60")
    assert run.code == 0, run.err
    remote_namespace = f"{namespace}-{home_id}"
    assert f"{PROVIDER_ID}: Accepted: namespace extended to '{remote_namespace}'" in run.out
    # A ConfigMap the provider already has under that name, not annex's: a FailedReflection.
    remote.core.create_namespaced_config_map(remote_namespace, {"metadata": {"name": "taken"}})
    home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "taken"}})
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}], **REMOTE_STRATEGY}})

    last: list[Any] = []

    def settled() -> dict[str, Any] | None:
        run = annexctl("status", *home_flags(home), "-o", "json")
        assert run.code == 0, run.err
        report = run.json()
        last[:] = [report]
        node = _mine(report["pods"], "node", agent.node_name)
        warned = any(w["reason"] == "FailedReflection" and w["namespace"] == namespace
                     for w in report["warnings"])
        running = home.core.read_namespaced_pod("web", namespace).status.phase == "Running"
        # >= 1: pods other tests left on the same virtual node may still be going away.
        return report if running and node["phases"]["Running"] >= 1 and warned else None

    try:
        report = wait_for(settled, timeout=90, interval=0.5,
                          message="status shows the pod running remotely and the warning")
    except AssertionError:
        print("last status:", last)
        raise
    vn = _mine(report["virtualNodes"], "namespace", agent_namespace)
    assert (vn["clusterId"], vn["node"], vn["ready"]["status"]) == (
        PROVIDER_ID, agent.node_name, "True")
    offer = _mine(report["offers"], "clusterId", PROVIDER_ID)
    assert offer["error"] is None and offer["offers"][0]["namespace"] == agent.tenant_namespace
    assert offer["offers"][0]["labels"]["topology.kubernetes.io/region"] == "eu-west"
    extended = _mine(report["namespaceOffloadings"], "namespace", namespace)
    assert (extended["phase"], extended["remoteNamespaceName"]) == ("Ready", remote_namespace)

    table = annexctl("status", *home_flags(home))
    assert table.code == 0
    for text in ("Virtual nodes:", agent.node_name, "True (RemoteClusterReady)", "eu-west",
                 remote_namespace, "FailedReflection", "ConfigMap/taken"):
        assert text in table.out

    explained = annexctl("explain", "pod", f"{namespace}/web", *home_flags(home), "-o", "json")
    assert explained.code == 0, explained.err
    why = explained.json()
    assert why["remoteClusterId"] == PROVIDER_ID
    assert any("virtual node" in reason for reason in why["placement"])
    assert BORROWED in why["remoteSpec"]["tolerations"]  # the offloadingPatch
    assert {"op": "remove", "path": "/nodeName"} in why["changes"]
    assert why["shadowPod"]["found"] and why["shadowPod"]["matchesForged"]
    advertised = home.core.read_node(agent.node_name).status
    assert why["kubeletEndpoint"] == {
        "address": advertised.addresses[0].address,
        "port": advertised.daemon_endpoints.kubelet_endpoint.port,
        "url": f"https://{advertised.addresses[0].address}:"
               f"{advertised.daemon_endpoints.kubelet_endpoint.port}"}
    text = annexctl("explain", "pod", f"{namespace}/web", *home_flags(home)).out
    assert f"runs on virtual node {agent.node_name}" in text
    assert f"-nodeName: {agent.node_name}" in text and "+- key: example.com/borrowed" in text

    assert annexctl("unoffload", "namespace", namespace, *home_flags(home)).code == 0
    wait_for(lambda: not any(o["namespace"] == namespace for o in annexctl(
        "status", *home_flags(home), "--no-offers", "-o", "json").json()["namespaceOffloadings"]),
        timeout=60, message="the namespace is no longer extended")
    agent.process.stop()  # the user removes the remote from the home chart first
    run = annexctl("unpeer", *flags)
    assert run.code == 0, run.err
    assert f"annex-tenant-{home_id}" in run.out and "deleted" in run.out
    # Its VirtualNode drained and deleted (the chart's remotes should drop it), the virtual
    # node the stopped agent left removed.
    assert "drained and deleted" in run.out
    assert agent.node_name not in {n.metadata.name for n in home.core.list_node().items}
