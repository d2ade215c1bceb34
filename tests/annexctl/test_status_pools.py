"""annexctl status: the pools a provider's offer is split into, one row each, with what they
lend and what one pod can get there; a provider without pools says so; its virtual nodes, one
per pool."""

from __future__ import annotations

import io

from annexctl.output import Report, emit
from annexctl.status import pools_table, virtual_node_rows, virtual_nodes_table
from shared.api.virtual_node import VirtualNode
from shared.wellknown import POOL_LABEL, REMOTE_CLUSTER_ID_LABEL


def _rendered(entries: list[dict[str, object]]) -> str:
    stream = io.StringIO()
    emit(Report({}, [pools_table(entries)]), stream=stream)
    return stream.getvalue()


def test_status_shows_each_pool_of_each_offer() -> None:
    gpu = {"name": "gpu", "nodeSelector": {"accelerator": "nvidia"},
           "resources": {"cpu": "4", "memory": "16Gi", "pods": "55", "nvidia.com/gpu": "2"},
           "maxPodResources": {"cpu": "4", "memory": "16Gi"}}
    general = {"name": "general", "nodeSelector": {"tier": "general", "zone": "a"},
               "resources": {"cpu": "10", "memory": "32Gi", "pods": "110"},
               "maxPodResources": {"cpu": "8", "memory": "16Gi"}}
    table = pools_table([{"clusterId": "provider-1", "error": None,
                          "offers": [{"pools": [gpu, general]}]},
                         {"clusterId": "provider-2", "error": None, "offers": [{"pools": []}]}])
    assert table.rows == [
        ["provider-1", "gpu", "accelerator=nvidia", "4", "16Gi", "55", "4", "16Gi"],
        ["provider-1", "general", "tier=general,zone=a", "10", "32Gi", "110", "8", "16Gi"]]
    text = _rendered([{"clusterId": "provider-1", "error": None,
                       "offers": [{"pools": [gpu]}]}])
    assert "Pools:" in text and "accelerator=nvidia" in text
    assert _rendered([{"clusterId": "p", "error": None, "offers": [{"pools": []}]}]) == (
        "Pools: none (each provider is one pool)\n")


def _node(name: str, cluster_id: str, pool: str | None = None, cpu: str = "4",
          cordoned: bool = False) -> dict[str, object]:
    labels = {REMOTE_CLUSTER_ID_LABEL: cluster_id, **({POOL_LABEL: pool} if pool else {})}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"capacity": {"cpu": cpu, "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True",
                                       "reason": "RemoteClusterReady"}]}}


def _virtual_node(cluster_id: str) -> VirtualNode:
    return VirtualNode.model_validate({"metadata": {"name": cluster_id, "namespace": "annex"},
                                       "spec": {"clusterId": cluster_id}})


def test_status_lists_each_pool_node_of_a_provider_and_the_one_node_of_another() -> None:
    nodes = [_node("liqo-east-gpu", "east", "gpu", cpu="4"),
             _node("liqo-east-general", "east", "general", cpu="8", cordoned=True),
             _node("liqo-west", "west", cpu="2")]
    rows = virtual_node_rows([_virtual_node("east"), _virtual_node("west"),
                              _virtual_node("north")], nodes)
    assert [(r["clusterId"], r["node"], r["pool"], r["nodeExists"]) for r in rows] == [
        ("east", "liqo-east-general", "general", True), ("east", "liqo-east-gpu", "gpu", True),
        ("west", "liqo-west", None, True), ("north", "liqo-north", None, False)]
    table = virtual_nodes_table(rows)
    assert table.rows[0][2:6] == ["liqo-east-general", "general",
                                  "True (RemoteClusterReady), cordoned", ""]
    assert table.rows[1][2:4] == ["liqo-east-gpu", "gpu"]
    assert table.rows[3][4] == "no node"
