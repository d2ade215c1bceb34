"""The offloading benchmark (python -m bench, docs/benchmarks.md) runs end to end at a small N on
simulated clusters of its own, every scenario but storage, and reports every figure. Its bare
client makes the writes per pod the agent makes, the agent's copies of remote Events apart:
that is what makes the ratio against it a ratio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PODS = 20
LATENCY_PODS = 5
STREAM_LOGS, STREAM_EXECS = 5, 2
ENFORCER_PODS = 10
CONFIGMAPS = 150
"""Past a twin namespace's default bound (100 ConfigMaps): the benchmark's Quotas make room."""

# Writes that are not offloading: the agent's Event copies are reflection, Leases heartbeats,
# its node's status follows the provider's offer (which moves as the bare client's pods go).
NOT_OFFLOADING = ("events", "leases", "nodes/status")


def offloading_writes(requests: dict[str, Any]) -> Counter[str]:
    """The writes per resource (whatever the verb: a status can be patched or replaced)."""
    written: Counter[str] = Counter()
    for verb_resource, count in requests["by_verb"].items():
        verb, resource = verb_resource.split("|", 1)
        if verb in ("create", "update", "patch", "delete") and resource not in NOT_OFFLOADING:
            written[resource] += count
    return written


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # The script's own kubesim, even when the e2e variables point at real clusters: this tests
    # the script (test_benchmark_on_given_clusters runs it on clusters it is given).
    env = {name: value for name, value in os.environ.items() if not name.startswith("E2E_")}
    output = tmp_path_factory.mktemp("bench") / "bench.json"
    same_tree = output.parent / "same-tree"  # an A/B comparison's B, here the same code
    same_tree.symlink_to(REPO)
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--pods", str(PODS), "--configmaps", str(CONFIGMAPS),
         "--latency-pods", str(LATENCY_PODS), "--idle-seconds", "2",
         "--stream-logs", str(STREAM_LOGS), "--stream-execs", str(STREAM_EXECS),
         "--stream-pods", "2", "--restarts", "3", "--compare-root", str(same_tree),
         "--compare-flag=--workers=4", "--enforcer-pods", str(ENFORCER_PODS),
         "--scenarios", "latency,offloading,configmaps,restart,idle,streams,enforcer,agents",
         "--trace", "--json", str(output)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=280, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    found: dict[str, Any] = json.loads(output.read_text())
    return found


@pytest.mark.timeout(300)
def test_the_bare_client_writes_what_the_agent_writes_to_offload_the_same_pods(
        report: dict[str, Any]) -> None:
    offloading = report["offloading"]
    for cluster in ("home", "remote"):
        bare = offloading_writes(offloading["bare"]["requests"][cluster])
        agent = offloading_writes(offloading["agent"]["requests"][cluster])
        assert bare == agent, cluster
    # ... which are, per pod, the ShadowPod and the token Secret remotely, the TokenRequest and
    # the status at home (the benchmark's pods mount their service-account token).
    assert offloading_writes(offloading["bare"]["requests"]["remote"]) == {
        "shadowpods": PODS, "secrets": PODS}
    assert offloading_writes(offloading["bare"]["requests"]["home"]) == {
        "serviceaccounts/token": PODS, "pods/status": PODS}


@pytest.mark.timeout(300)
def test_the_agent_phase_starts_without_the_bare_client_pods(report: dict[str, Any]) -> None:
    """The bare client's pods and their remote objects go before the agent's phase, the
    latency scenario's with them (theirs are all the bare client's phase starts with)."""
    offloading = report["offloading"]
    assert offloading["bare"]["bare_objects_at_remote_at_start"]["pods"] == LATENCY_PODS
    assert offloading["bare"]["bare_objects_at_remote_at_start"]["shadowpods"] == LATENCY_PODS
    assert offloading["agent"]["bare_objects_at_remote_at_start"] == {
        "pods": 0, "shadowpods": 0, "secrets": 0}
    assert offloading["bare_removed_seconds"] > 0


@pytest.mark.timeout(300)
def test_every_figure_is_reported(report: dict[str, Any]) -> None:
    offloading = report["offloading"]
    assert offloading["bare"]["pods"] == offloading["agent"]["pods"] == PODS
    assert offloading["ratio"] > 0
    for phase in ("bare", "agent"):
        assert offloading[phase]["settled_seconds"] >= offloading[phase]["seconds"] > 0
    assert offloading["agent"]["agent"]["peak_rss_mib"] > 0
    assert report["latency"]["agent"]["pods"] == LATENCY_PODS
    assert report["latency"]["agent"]["added"]["p50_ms"] > 0
    assert report["configmaps"]["agent"]["per_second"] > 0
    assert report["restart"]["converged_seconds"] > 0
    # three restarts taking turns: this tree's agent, another tree's, this one with a flag more;
    # each one's median
    runs = report["restart"]["runs"]
    assert [run["variant"] for run in runs[::2]] == [str(REPO), f"{REPO} --workers=4"]
    assert runs[1]["variant"].endswith("/same-tree")
    by_variant = report["restart"]["by_variant"]
    assert [by_variant[run["variant"]]["converged_seconds"] for run in runs] == [
        run["converged_seconds"] for run in runs]
    assert report["restart"]["converged_seconds"] == runs[0]["converged_seconds"]
    # when the restarted agent logged its start and each side's listing, after its start
    for run in runs:
        assert set(run["listed"]) == {"started", "home listed", "tenant listed",
                                      "ShadowPods listed"}
        assert all(0 < seconds <= run["converged_seconds"]
                   for seconds in run["listed"].values()), run["listed"]
    # Unchanged objects are not written again after a restart, nor while idle.
    assert report["restart"]["writes"] == {"home": 0, "remote": 0}
    assert report["idle"]["writes_per_minute"] == {"home": 0, "remote": 0}
    # A second agent for the same provider: what it listed and watched to converge, its RSS.
    second = report["agents"]
    assert second["converged_seconds"] > 0 and second["agent"]["rss_mib"] > 0
    assert second["to_converge"]["remote"]["watches"] > 0
    assert second["to_converge"]["home"]["lists"] > 0
    assert set(second["idle_writes_per_minute"]) == {"first", "second"}


@pytest.mark.timeout(300)
def test_the_latency_is_measured_with_and_without_streams_through_the_home_api_server(
        report: dict[str, Any]) -> None:
    streams = report["streams"]
    assert (streams["logs"], streams["execs"], streams["pods"]) == (STREAM_LOGS, STREAM_EXECS, 2)
    # Every followed log showed the remote container's first line and every exec session
    # echoed its lines (through the home API server and the agent), and all were still open
    # when the measurement with them ended.
    assert streams["open_at_end"] == STREAM_LOGS + STREAM_EXECS
    assert streams["exec_echoes"] >= STREAM_EXECS
    assert streams["exec_echo_round_trip"]["p50_ms"] > 0
    for measured in ("latency_without", "latency_with"):
        assert streams[measured]["pods"] == LATENCY_PODS
        assert streams[measured]["added"]["p50_ms"] > 0
    assert isinstance(streams["added_p50_change_percent"], float)
    assert streams["agent"]["rss_mib"] > 0
    assert streams["agent_before"]["rss_mib"] > 0


@pytest.mark.timeout(300)
def test_a_traced_run_says_where_each_paths_latency_goes(report: dict[str, Any]) -> None:
    trace = report["latency"]["trace"]
    # The agent's steps, each from its own trace: its watch, its queue, its work, the request.
    # The agent's steps, each from its own trace (its watch, its queue, its work, the
    # request), in both directions, and the bare client's from the benchmark's.
    for path, steps in (("agent", 10), ("bare", 6)):
        assert len(trace[path]) == steps
        assert [step[0] for step in trace[path]] == sorted(step[0] for step in trace[path])
        assert all(found.get("p50_ms") is not None for found in trace[path].values()), path
    assert trace["agent"]["1 API: ShadowPod POST"]["p50_ms"] > 0
    assert trace["bare"]["1 API: ShadowPod POST"]["p50_ms"] > 0
    stalls = trace["agent_loop_stalls"]  # none, or some, each longer than 2 ms
    assert (stalls["count"] == 0) == (stalls["seconds"] == 0) == (stalls["longest_ms"] == 0)
    assert stalls["seconds"] * 1000 >= stalls["longest_ms"] >= (2.0 if stalls["count"] else 0)


@pytest.mark.timeout(300)
def test_shadowpods_through_the_enforcers_webhook_are_measured_against_bare_pod_creates(
        report: dict[str, Any]) -> None:
    enforcer = report["enforcer"]
    assert enforcer["pods"] == ENFORCER_PODS
    for rate in ("bare_creates_per_second", "shadowpod_creates_per_second",
                 "enforced_per_second"):
        assert enforcer[rate] > 0, rate
    assert enforcer["enforcer"]["rss_mib"] > 0
