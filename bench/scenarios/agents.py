"""agents: what one more home agent for the same provider costs, as an agent per pool's virtual
node would: a second agent is started beside the first (its own node name and ports, the same
kubeconfigs) until it has converged, then both are watched while nothing changes. Reported: the
second agent's requests to converge (lists and watches, by cluster), its writes, its RSS, and
its idle writes beside the first agent's in the same window. The second agent and its node are
removed afterwards.

The other design, one agent serving every pool of its provider, adds per pool one watch of the
pods bound to its node and that node's heartbeats (`heartbeat writes/minute` of the idle
scenario, per node): the figures here are what it saves."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from typing import Any

from annex.api_paths import core_path
from bench import components
from bench.components import BY_RESOURCE, scrape
from bench.figures import WRITE_VERBS, Rows
from bench.harness import Bench
from bench.processes import free_port
from bench.watching import until


def _counts(bench: Bench, port: int) -> Counter[str]:
    """`cluster|verb|resource` → requests, from an agent's /metrics on `port`."""
    hosts = bench.hosts()
    found: Counter[str] = Counter()
    for labels, value in scrape(port, BY_RESOURCE):
        found[f"{hosts.get(labels['host'], labels['host'])}|{labels['verb']}|"
              f"{labels['resource']}"] += int(value)
    return found


def _summary(delta: Counter[str]) -> dict[str, Any]:
    """Per cluster: requests, lists, watches and writes."""
    found: dict[str, Any] = {}
    for cluster in ("home", "remote"):
        mine = {key.split("|", 1)[1]: n for key, n in delta.items()
                if key.startswith(cluster + "|")}
        found[cluster] = {
            "requests": sum(mine.values()),
            "watches": sum(n for key, n in mine.items() if key.startswith("watch|")),
            "lists": sum(n for key, n in mine.items() if key.startswith("list|")),
            "writes": sum(n for key, n in mine.items() if key.split("|")[0] in WRITE_VERBS),
            "most": dict(Counter(mine).most_common(4))}
    return found


def _writes(delta: Counter[str]) -> int:
    return sum(side["writes"] for side in _summary(delta).values())


async def run(bench: Bench) -> dict[str, Any]:
    assert bench.agent is not None
    node = f"{bench.names.namespace}-second"
    directory = bench.directory / "agent-2"
    directory.mkdir(exist_ok=True)
    shutil.copy(bench.directory / "home-ca.crt", directory / "home-ca.crt")
    ports = {"metrics": free_port(), "kubelet": free_port()}
    second = components.agent(bench.args, bench.kubeconfigs, bench.names, directory,
                              bench.remote_pod_cidr, ports)
    first_before = bench.counts()["agent"]
    second.start(flags=("--node-name", node))
    try:
        converged = await until(lambda: second.running() and components.agent_converged(
            ports["metrics"]), 300, "the second agent converged", interval=0.2)
        await asyncio.sleep(2)  # writes that trail the convergence are counted too
        start = _counts(bench, ports["metrics"])
        figures = second.figures()
        first_idle_before = bench.counts()["agent"]
        await asyncio.sleep(bench.args.idle_seconds)  # the measurement's length
        idle = _counts(bench, ports["metrics"]) - start
        first_idle = bench.counts()["agent"] - first_idle_before
        first_during = bench.counts()["agent"] - first_before
    finally:
        second.stop()
        await bench.home.delete_if_exists(core_path("nodes", name=node))
    per_minute = 60.0 / bench.args.idle_seconds
    return {"converged_seconds": round(converged - second.spawned, 2),
            "to_converge": _summary(start), "agent": figures,
            "idle_writes_per_minute": {
                "second": round(_writes(idle) * per_minute, 1),
                "first": round(_writes(first_idle) * per_minute, 1)},
            "first_agent_during": _summary(first_during),
            "first_agent": bench.agent.figures()}


def remote_pods(args: Any) -> int:
    return 0


def rows(result: dict[str, Any]) -> Rows:
    converge = result["to_converge"]
    return [
        ("second agent: converged", f"{result['converged_seconds']} s"),
        *((f"second agent to converge, {side}",
           f"{c['requests']} requests: {c['lists']} lists, {c['watches']} watches, "
           f"{c['writes']} writes; most: "
           + ", ".join(f"{key} {n}" for key, n in c["most"].items()))
          for side, c in converge.items()),
        ("second agent RSS", f"{result['agent']['rss_mib']} MiB (the first: "
                             f"{result['first_agent']['rss_mib']} MiB)"),
        ("idle writes/minute", f"second {result['idle_writes_per_minute']['second']}, first "
                               f"{result['idle_writes_per_minute']['first']}")]
