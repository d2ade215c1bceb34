"""configmaps: N ConfigMaps (--configmaps) created while the agent is stopped, then it starts;
first → last remote copy. The bare client makes one create per copy."""

from __future__ import annotations

import functools
import time
from typing import Any

from annex.api_paths import core_path
from bench.figures import Rows, per_pod
from bench.harness import Bench
from bench.watching import gather_limited, until


async def run(bench: Bench) -> dict[str, Any]:
    count, agent, timeline = bench.args.configmaps, bench.agent, bench.timeline
    assert agent is not None
    results: dict[str, Any] = {}
    body = {"data": {"key": "x" * 64}}
    for label in ("bare", "agent"):
        names = [f"cm-{label}-{i}" for i in range(count)]
        before = bench.counts()  # (after the home ConfigMaps are created, for the agent)
        if label == "agent":
            agent.stop()
            await gather_limited((functools.partial(
                bench.home.create, core_path("configmaps", bench.names.namespace),
                {"metadata": {"name": n}, **body}) for n in names), 32)
            before = bench.counts()
            agent.start()
            twin = bench.twin
        else:
            twin = bench.names.bare_twin
            client = bench.api("remote", "bare")
            started = time.monotonic()  # its first write: the watch may show them late
            await gather_limited((functools.partial(
                client.create, core_path("configmaps", twin),
                {"metadata": {"name": n}, **body}) for n in names), bench.args.bare_lanes)
        done = await until(timeline.all_of(timeline.seen, "remote-configmaps", twin, names),
                           60 + count / 5, f"{count} {label} ConfigMaps at the remote",
                           interval=0.2)
        first = min(timeline.seen[("remote-configmaps", twin, n)] for n in names)
        if label == "bare":
            first = min(first, started)
        results[label] = {
            "configmaps": count, "seconds": round(done - first, 2),
            "per_second": round(count / max(done - first, 1e-3), 1),
            "requests": bench.requests_between(before, bench.counts(), label)}
        if label == "agent":
            await until(bench.agent_converged, 120, "the agent converged", interval=0.5)
            results[label]["agent"] = agent.figures()
    results["ratio"] = round(results["agent"]["per_second"] / results["bare"]["per_second"], 2)
    return results


def remote_pods(args: Any) -> int:
    return 0


def rows(result: dict[str, Any]) -> Rows:
    found: Rows = []
    for label in ("bare", "agent"):
        r = result[label]
        found.append((f"configmaps {label}", f"{r['configmaps']} in {r['seconds']} s = "
                      f"{r['per_second']}/s; requests/object "
                      f"{per_pod(r['requests'], r['configmaps'])}"))
    found.append(("configmaps ratio agent/bare", str(result["ratio"])))
    return found
