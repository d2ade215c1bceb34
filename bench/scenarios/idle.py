"""idle: the agent's writes a minute with nothing changing (target: heartbeats only), and what
the components and the simulated clusters hold then."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.figures import Rows, heartbeat_writes, non_heartbeat_writes, scale
from bench.harness import Bench
from bench.processes import proc_status


async def run(bench: Bench) -> dict[str, Any]:
    assert bench.agent is not None and bench.enforcer is not None
    seconds = bench.args.idle_seconds
    before = bench.counts()
    await asyncio.sleep(seconds)  # the measurement's length, not a wait for something
    requests = bench.requests_between(before, bench.counts(), "agent")
    per_minute = 60.0 / seconds
    return {
        "seconds": seconds,
        "writes_per_minute": scale(non_heartbeat_writes(requests), per_minute),
        "heartbeat_writes_per_minute": scale(heartbeat_writes(requests), per_minute),
        "requests": requests, "agent": bench.agent.figures(),
        "enforcer": bench.enforcer.figures(),
        # what the simulated clusters cost, holding everything the run made
        "kubesim_rss_mib": dict(zip(("home", "remote"), (
            round(proc_status(pid, "VmRSS"), 1) for pid in bench.server_pids), strict=False))}


def remote_pods(args: Any) -> int:
    return 0


def rows(result: dict[str, Any]) -> Rows:
    found: Rows = [
        ("idle writes/minute", f"{result['writes_per_minute']} (target 0), heartbeats "
         f"{result['heartbeat_writes_per_minute']}"),
        ("agent idle", f"RSS {result['agent']['rss_mib']} MiB (target ≤ 250 MB with N pods and "
         f"N objects), peak {result['agent']['peak_rss_mib']} MiB"),
        ("enforcer idle", f"RSS {result['enforcer']['rss_mib']} MiB, peak "
         f"{result['enforcer']['peak_rss_mib']} MiB, CPU {result['enforcer']['cpu_seconds']} s")]
    if result.get("kubesim_rss_mib"):
        found.append(("kubesim RSS", ", ".join(f"{side} {mib} MiB"
                                               for side, mib in result["kubesim_rss_mib"].items())))
    return found
