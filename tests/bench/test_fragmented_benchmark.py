"""The fragmented scenario (python -m bench --scenarios fragmented, docs/benchmarks.md) runs end
to end with a few pods on simulated clusters of its own, and on clusters it is given as real ones
are (then it leaves nothing behind), and each pod ends in the one outcome the product gives it: a
small pod offloaded, a large one (no provider node has room for it) returned to the scheduler when
a Deployment's and held when it has no controller, its replacement and the Deployment's later pods
kept off the virtual node by the pod webhook and Running at home; none Pending remotely."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bench.given_clusters import scenario_run

REPO = Path(__file__).resolve().parents[2]
REPLICAS, BARE = 2, 1
NODES = 12
"""Each left 2 cpu free, half of it offered: room on the virtual node for the pods made while
the agent is away, (2 + 1) × (3 + 0.5) cpu."""


@dataclass
class Run:
    fragmented: dict[str, Any]
    printed: str
    left: list[str]
    """What a run on given clusters left there, named as its own ([] on its own kubesim)."""


def bench(env: dict[str, str], output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "--scenarios", "fragmented",
         "--fragmented-nodes", str(NODES), "--fragmented-replicas", str(REPLICAS),
         "--fragmented-bare", str(BARE), "--json", str(output)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400, check=False)


@pytest.fixture(scope="module", params=["its own kubesim", "given clusters"])
def report(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    # On given clusters as on real ones: fragmented by the scenario's provider pods, on clusters
    # that outlive the run; a home worker with room for the large pods the webhook keeps off.
    with scenario_run(request.param, "fragmented", bench, tmp_path_factory, NODES,
                      home_worker_cpu="100") as found:
        yield Run(*found)


def only(**counts: int) -> dict[str, int]:
    """Outcome counts: those named, every other outcome 0."""
    outcomes = ("offloaded", "returned", "held", "kept_off", "home", "silent", "other")
    assert set(counts) <= set(outcomes)
    return {name: counts.get(name, 0) for name in outcomes}


@pytest.mark.timeout(420)
def test_each_pod_ends_in_the_outcome_its_size_and_controller_give_it(
        report: Run) -> None:
    fragmented = report.fragmented
    assert fragmented["nodes_fragmented"] >= NODES
    assert fragmented["one_pod_cpu"] == "2"  # what each node was left
    # Made while the agent was away: the small ones offloaded; of the large ones, the
    # Deployment's returned to the scheduler and the bare one held.
    assert fragmented["while_agent_away"] == {
        "small": only(offloaded=REPLICAS + BARE),
        "large": only(returned=REPLICAS, held=BARE)}
    # Each returned pod's replacement kept off the virtual node by the webhook, Running at home.
    assert fragmented["replacements"] == {"small": only(), "large": only(kept_off=REPLICAS)}
    # Made with the agent serving: judged at creation.
    assert fragmented["agent_serving"] == {
        "small": only(offloaded=REPLICAS), "large": only(kept_off=REPLICAS)}
    # Never Pending remotely: no ShadowPod for a large pod, every remote pod Running.
    assert fragmented["silent"] == 0
    assert fragmented["large_shadowpods"] == fragmented["remote_pods_not_running"] == 0
    assert fragmented["settled_seconds"] > 0
    assert fragmented["scaled_settled_seconds"] > 0


@pytest.mark.timeout(420)
def test_the_report_prints_the_outcomes_and_the_run_leaves_nothing_behind(report: Run) -> None:
    printed = report.printed
    assert f"large made while the agent was away     returned {REPLICAS}, held {BARE}" in printed
    assert "Pending remotely, silent                0 (" in printed
    assert report.left == []
