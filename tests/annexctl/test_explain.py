"""annexctl explain: where the home API server reaches a virtual node's kubelet API, and why not
by a Hostname; the pool a pod runs in, and its withdrawal from the provider's offer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from annexctl.explain import kubelet_endpoint
from shared.api.virtual_node import VIRTUAL_NODE
from shared.forge.node import pool_node_name, withdrawal_patch, withdrawn_message
from shared.wellknown import POOL_LABEL, REMOTE_CLUSTER_ID_LABEL, TYPE_LABEL, TYPE_VIRTUAL_NODE
from tests.annexctl.conftest import Annexctl, home_flags
from tests.conftest import ClusterHandle
from tests.home_agent.agentproc import unique_id


def test_explain_names_the_kubelet_endpoint_and_an_unresolvable_hostname() -> None:
    old = {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                                    {"type": "Hostname", "address": "liqo-r"}],
                      "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    endpoint, notes = kubelet_endpoint(old)
    assert endpoint["url"] == "https://10.0.0.7:10250"
    assert any("Hostname" in note for note in notes)
    endpoint, notes = kubelet_endpoint({"status": {}})
    assert endpoint["url"] is None and any("no InternalIP" in note for note in notes)


@pytest.fixture
def on_a_pool(home: ClusterHandle, crds: None) -> Iterator[tuple[str, str]]:
    """A provider's VirtualNode, its pool gpu's node as the agent makes it (labelled with the
    provider and the pool) and a pod bound to it: (pod namespace, node name)."""
    cluster_id, namespace = unique_id("pools"), unique_id("explain")
    node = pool_node_name(f"liqo-{cluster_id}", "gpu")
    home.core.create_namespace({"metadata": {"name": namespace}})
    client.CustomObjectsApi(home.api_client).create_namespaced_custom_object(
        VIRTUAL_NODE.group, VIRTUAL_NODE.version, namespace, VIRTUAL_NODE.plural,
        {**VIRTUAL_NODE.type_meta(), "metadata": {"name": cluster_id},
         "spec": {"clusterId": cluster_id}})
    home.core.create_node({"metadata": {"name": node, "labels": {
        TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: cluster_id, POOL_LABEL: "gpu"}}})
    home.core.create_namespaced_pod(namespace, {"metadata": {"name": "trainer"}, "spec": {
        "nodeName": node, "containers": [{"name": "main", "image": "trainer:1"}]}})
    yield namespace, node
    home.core.delete_node(node)
    client.CustomObjectsApi(home.api_client).patch_namespaced_custom_object(
        VIRTUAL_NODE.group, VIRTUAL_NODE.version, namespace, VIRTUAL_NODE.plural, cluster_id,
        {"metadata": {"finalizers": None}})
    home.core.delete_namespace(namespace)


def test_explain_says_the_pods_pool_and_when_the_offer_withdraws_it(
        annexctl: Annexctl, home: ClusterHandle, on_a_pool: tuple[str, str]) -> None:
    namespace, node = on_a_pool

    def placement() -> list[str]:
        run = annexctl("explain", "pod", f"{namespace}/trainer", *home_flags(home), "-o", "json")
        assert run.code == 0, run.err
        return run.json()["placement"]  # type: ignore[no-any-return]

    said = placement()
    assert said[1] == "in the provider's pool gpu: it runs on that pool's nodes only", said
    assert not any("withdrawn" in reason for reason in said)
    # The offer no longer has the pool: the agent cordons its node, saying why.
    cluster_id = node.removeprefix("liqo-").removesuffix("-gpu")
    why = withdrawn_message(node, "gpu", cluster_id)
    home.core.patch_node(node, withdrawal_patch(
        client.ApiClient().sanitize_for_serialization(home.core.read_node(node)), why))
    said = placement()
    assert said[1:3] == [
        "in the provider's pool gpu: it runs on that pool's nodes only",
        f"withdrawn: {why}; the pod keeps running there, no new pod is placed there"], said
    # Offered again: the cordon lifted, nothing said of a withdrawal.
    home.core.patch_node(node, withdrawal_patch(
        client.ApiClient().sanitize_for_serialization(home.core.read_node(node)), None))
    assert not any("withdrawn" in reason for reason in placement())
