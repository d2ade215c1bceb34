"""The pools scenario (python -m bench --scenarios pools, docs/benchmarks.md) runs end to end with
a few pods on simulated clusters of its own, and on clusters it is given as real ones are (then it
leaves nothing behind, the provider's nodes as they were): each pod is placed on its pool's
virtual node by its requests, runs remotely on that pool's nodes only, and the report says so
per pool."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.bench.given_clusters import scenario_run

REPO = Path(__file__).resolve().parents[2]
PODS, NODES = 16, 4


@dataclass
class Run:
    pools: dict[str, Any]
    printed: str
    left: list[str]
    """What a run on given clusters left there, named as its own, and the remote nodes it left
    a pool label or GPUs on ([] on its own kubesim)."""


def bench(env: dict[str, str], output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "--scenarios", "pools", "--pools-nodes", str(NODES),
         "--pools-pods", str(PODS), "--json", str(output)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def changed_nodes(directory: Path) -> list[str]:
    """The remote nodes with a run's pool label or GPUs still on them."""
    api = config.new_client_from_config(config_file=str(directory / "remote.kubeconfig"))
    return sorted(node.metadata.name for node in client.CoreV1Api(api).list_node().items
                  if any(key.startswith("bench.annex/pool") for key in node.metadata.labels or {})
                  or "nvidia.com/gpu" in (node.status.capacity or {})
                  or "nvidia.com/gpu" in (node.status.allocatable or {}))


@pytest.fixture(scope="module", params=["its own kubesim", "given clusters"])
def report(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    with scenario_run(request.param, "pools", bench, tmp_path_factory, NODES,
                      changed=changed_nodes) as found:
        yield Run(*found)


@pytest.mark.timeout(320)
def test_each_pod_is_placed_and_runs_in_the_pool_its_requests_steer_it_to(report: Run) -> None:
    pools = report.pools
    assert pools["provider_nodes"] == {"general": NODES // 2, "gpu": NODES // 2}
    for pool in ("general", "gpu"):
        each = pools[pool]
        assert each["pods"] == each["placed"] == each["offloaded"] == PODS // 2, pool
        assert each["outside_pool"] == 0, pool
        assert each["seconds"] > 0 and each["pods_per_second"] > 0, pool


@pytest.mark.timeout(320)
def test_the_report_prints_each_pool_and_the_run_leaves_nothing_behind(report: Run) -> None:
    half = PODS // 2
    assert report.printed.count(f"{half} pods: placed on its node {half}, Running remotely "
                                f"{half}, ") == 2
    assert report.printed.count("outside the pool 0") == 2
    assert report.left == []
