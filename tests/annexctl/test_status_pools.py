"""annexctl status: the pools a provider's offer is split into, one row each, with what they
lend and what one pod can get there; a provider without pools says so."""

from __future__ import annotations

import io

from annexctl.output import Report, emit
from annexctl.status import pools_table


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
