"""The failover scenario (python -m bench --scenarios failover, docs/benchmarks.md) runs end to
end on simulated clusters of its own with a small burst, and reports every figure: each
component's leader killed and replaced while pods are created, nothing made twice, nothing
deleted, nothing converged written again. The latency scenario after it runs on the run's own
agent and enforcer again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKERS = 32
"""The most reconciles a killed leader had under way (the agent's --workers in python -m bench:
10; the enforcer's default: 32), each of which may have been a create."""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("E2E_")}
    output = tmp_path_factory.mktemp("bench") / "bench.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--scenarios", "failover,latency", "--latency-pods", "5",
         "--failover-pods", "150", "--failover-rate", "2", "--json", str(output)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=500, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    found: dict[str, Any] = json.loads(output.read_text())
    print(run.stdout)
    return found


@pytest.mark.timeout(520)
def test_each_leader_is_replaced_during_the_burst_and_nothing_is_duplicated_or_rewritten(
        report: dict[str, Any]) -> None:
    failover = report["failover"]
    assert list(failover["takeovers"]) == ["agent", "enforcer", "controller"]
    for kind, takeover in failover["takeovers"].items():
        assert takeover["takeover_seconds"] > 0, kind
        assert takeover["standby_writes_before"] == {}, kind  # a standby writes nothing
        assert takeover["standby_writes_after"] == {}, kind  # nor the replaced one
        assert takeover["writes_for_unchanged_objects"] == 0, (kind, takeover)
        # a create the killed leader had under way when it died, at most one a worker
        assert takeover["creates_of_existing_objects"] <= WORKERS, (kind, takeover)
    # What the new leaders write follows what the burst changes; the controller's world did not.
    assert failover["takeovers"]["controller"]["new_leader_writes"] == {}
    # The Node's kubelet port is the new leader's; Event copies follow the remote Events.
    not_compared = failover["takeovers"]["agent"]["writes_not_compared"]
    assert "patch nodes/status 1" in not_compared
    assert all(write.split(" ")[1] in {"nodes/status", "events"} for write in not_compared)
    assert failover["burst_pods"] > 0
    for figure in ("duplicated_shadowpods", "duplicated_remote_pods", "remote_pod_deletions",
                   "shadowpod_deletions", "steady_objects_written"):
        assert failover[figure] == 0, figure
    assert failover["steady_objects"] > 3 * 20  # the steady pods on both sides, and more


@pytest.mark.timeout(520)
def test_the_run_s_own_agent_and_enforcer_serve_the_scenarios_after_it(
        report: dict[str, Any]) -> None:
    assert report["latency"]["agent"]["pods"] == 5  # each offloaded by the agent and run
