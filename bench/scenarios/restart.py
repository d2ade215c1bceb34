"""restart: the agent is killed (SIGKILL) and started again, --restarts times: seconds until it
is synced with an empty work queue (its /metrics), when it logged its start and the listings of
each side, and its writes meanwhile (target: none but heartbeats). The figures are the median
run's (a restart at N = 50,000 varied by tens of percent from one run to the next on one
machine), each run's beside them; the writes are all the runs'.

A/B comparisons at the same hour on the same clusters: with --compare-root the restarts
alternate with another checkout's agent, with --compare-flag with this tree's agent given more
flags (e.g. --compare-flag=--redis-url=redis://...); each variant's median is reported."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.figures import Rows, non_heartbeat_writes, profile_rows
from bench.harness import ROOT, Bench
from bench.profile import Profiler
from bench.watching import until

MILESTONES = {
    "started": "started (nodes ",  # runner: "home agent A → B started (nodes …)"
    "home listed": "home cluster listed",
    "tenant listed": "remote tenant namespace listed",
    "ShadowPods listed": "ShadowPods listed",
}
"""What the agent logs as it starts and lists each side, by the name the report gives it."""


@dataclass(frozen=True)
class Variant:
    """An agent the restarts take turns with: the tree it runs from, its extra flags."""

    checkout: Path
    flags: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return " ".join([str(self.checkout), *self.flags])


def variants(args: Any) -> list[Variant]:
    """This tree's agent first (the figures), then the ones it is compared with."""
    found = [Variant(ROOT)]
    if args.compare_root is not None:
        found.append(Variant(args.compare_root))
    if args.compare_flag:
        found.append(Variant(ROOT, tuple(args.compare_flag)))
    return found


async def run(bench: Bench) -> dict[str, Any]:
    agent = bench.agent
    assert agent is not None
    turns = variants(bench.args)
    runs: list[dict[str, Any]] = []
    before = bench.counts()
    profile = None
    for attempt in range(bench.args.restarts):
        variant = turns[attempt % len(turns)]
        agent.stop(kill=True)
        agent.start(variant.checkout, variant.flags)
        profiler = (Profiler(agent.pid, bench.directory / "agent-restart.pyspy.txt")
                    if bench.args.profile and attempt == 0 else None)
        converged = await until(bench.agent_converged, 300, "the restarted agent converged",
                                interval=0.1)
        if profiler is not None:
            profile = profiler.stop()
        await asyncio.sleep(2)  # writes that trail the convergence are counted too
        runs.append({"converged_seconds": round(converged - agent.spawned, 2),
                     "listed": {name: agent.logged(text) for name, text in MILESTONES.items()},
                     "agent": agent.figures(), "variant": variant.label})
    if runs[-1]["variant"] != turns[0].label:  # the scenarios after it run this tree's agent
        agent.stop(kill=True)
        agent.start()
        await until(bench.agent_converged, 300, "the restarted agent converged", interval=0.1)
    requests = bench.requests_between(before, bench.counts(), "agent")
    result = {**median_run(run for run in runs if run["variant"] == turns[0].label),
              "writes": non_heartbeat_writes(requests), "requests": requests, "runs": runs}
    if len(turns) > 1:
        result["by_variant"] = {
            variant.label: median_run(run for run in runs if run["variant"] == variant.label)
            for variant in turns}
    if profile is not None:
        result["agent_profile"] = profile
    return result


def remote_pods(args: Any) -> int:
    return 0


def median_run(runs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The run of median convergence time (the slower of the middle two)."""
    ordered = sorted(runs, key=lambda run: run["converged_seconds"])
    return {key: ordered[len(ordered) // 2][key]
            for key in ("converged_seconds", "listed", "agent")}


def rows(result: dict[str, Any]) -> Rows:
    found: Rows = [
        ("restart convergence", f"{result['converged_seconds']} s (target ≤ 30 s), "
         f"non-heartbeat writes {result['writes']} (target 0)"),
        ("  logged, s after its start", ", ".join(
            f"{name} {seconds}" for name, seconds in result["listed"].items())),
        ("agent after restart", f"RSS {result['agent']['rss_mib']} MiB (peak "
         f"{result['agent']['peak_rss_mib']}), CPU {result['agent']['cpu_seconds']} s")]
    if len(result.get("runs", ())) > 1:
        found.append(("  each restart", ", ".join(
            f"{run['converged_seconds']} s (CPU {run['agent']['cpu_seconds']} s)"
            for run in result["runs"])))
    for label, median in result.get("by_variant", {}).items():
        found.append((f"  median of {label}", f"{median['converged_seconds']} s (CPU "
                      f"{median['agent']['cpu_seconds']} s)"))
    found.extend(profile_rows(result.get("agent_profile")))
    return found
