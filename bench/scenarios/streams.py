"""streams: --stream-logs followed logs and --stream-execs exec sessions (`cat`, sent a line a
second) opened through the home API server, as kubectl opens them, on --stream-pods offloaded
pods: the agent's latency (as in latency, agent path only) measured before they open and while
they are open (target: p50 of the added latency changes by less than 10 %), the agent's RSS
with them open. The home API server reaches the agent's kubelet API at this machine's address
on its route (E2E_AGENT_ADDRESS overrides it) and is verified with the home cluster CA
(kube-root-ca.crt). A stream that ends early fails the run; all are closed at its end."""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

from annex.api_paths import core_path
from bench.figures import Rows, percentiles, spread
from bench.harness import TOLERATIONS, Bench
from bench.scenarios import latency
from bench.stream_client import STREAM_CONTAINER, STREAM_FIRST_LINE, StreamEnded, Streams
from bench.watching import gather_limited, until


async def run(bench: Bench) -> dict[str, Any]:
    """The streams spread over the pods in turn, open while the agent's latency is measured,
    against the same measurement just before they open."""
    args, namespace = bench.args, bench.names.namespace
    names = [f"stream-{i}" for i in range(args.stream_pods)]
    await gather_limited((functools.partial(
        bench.home.create, core_path("pods", namespace), stream_pod(name, bench.node))
        for name in names), 32)
    await until(bench.timeline.all_of(bench.timeline.running, "home-pods", namespace, names),
                bench.phase_timeout(), f"{len(names)} stream pods Running at home")
    assert bench.agent is not None
    await until(bench.agent_converged, 120, "the agent converged", interval=0.5)
    without = (await latency.measure(bench, ("agent",), "lat-without-streams"))["agent"]
    before, requests_before = bench.agent.figures(), bench.counts()
    opened = Streams(bench.kubeconfigs["home"])
    try:
        started = time.monotonic()
        await asyncio.gather(
            *(opened.open("log", namespace, names[i % len(names)])
              for i in range(args.stream_logs)),
            *(opened.open("exec", namespace, names[i % len(names)])
              for i in range(args.stream_execs)))
        open_seconds = time.monotonic() - started
        with_streams = (await latency.measure(bench, ("agent",), "lat-with-streams"))["agent"]
        agent = bench.agent.figures()
        still_open = opened.still_open()
    finally:
        await opened.close()
    requests = bench.requests_between(requests_before, bench.counts(), "agent")
    if opened.ended:
        raise StreamEnded(f"{len(opened.ended)} streams ended while open: "
                          + "; ".join(opened.ended[:5]))
    p50 = (without["added"].get("p50_ms"), with_streams["added"].get("p50_ms"))
    return {
        "pods": len(names), "logs": args.stream_logs, "execs": args.stream_execs,
        "open_seconds": round(open_seconds, 2), "open_at_end": still_open,
        "exec_echo_round_trip": percentiles(opened.round_trips),
        "exec_echoes": len(opened.round_trips),
        "latency_without": without, "latency_with": with_streams,
        "added_p50_change_percent": round(100 * (p50[1] - p50[0]) / p50[0], 1)
        if p50[0] is not None and p50[1] is not None and p50[0] else None,
        "agent_before": before, "agent": agent, "requests": requests}


def remote_pods(args: Any) -> int:
    """Its pods and two latency measurements on the agent's path."""
    return int(args.stream_pods + 2 * args.latency_pods)


def stream_pod(name: str, node: str) -> dict[str, Any]:
    """A pod that prints a first line (a followed log shows it has opened), then waits (execs
    run `cat` in it); busybox's programs, which kubesim's runtime has too."""
    return {"metadata": {"name": name, "labels": {"app": "bench-streams"}},
            "spec": {"nodeName": node, "tolerations": TOLERATIONS,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": STREAM_CONTAINER, "image": "busybox:1.36",
                                     "command": ["sh", "-c",
                                                 f"echo {STREAM_FIRST_LINE}; sleep 86400"]}]}}


def rows(result: dict[str, Any]) -> Rows:
    found: Rows = [("streams open", f"{result['logs']} followed logs and {result['execs']} exec "
                    f"sessions on {result['pods']} pods, opened in {result['open_seconds']} s, "
                    f"{result['open_at_end']} open at the end")]
    for label in ("without", "with"):
        found.append((f"latency agent added, {label} streams",
                      spread(result[f"latency_{label}"]["added"])))
    found.append(("  p50 change with the streams",
                  f"{result['added_p50_change_percent']} % (target < 10 %)"))
    echo = result["exec_echo_round_trip"]
    found.append(("exec echo round trip", f"p50 {echo.get('p50_ms')} ms, p99 "
                  f"{echo.get('p99_ms')} ms over {result['exec_echoes']} lines"))
    found.append(("agent with the streams open", f"RSS {result['agent']['rss_mib']} MiB "
                  f"(before: {result['agent_before']['rss_mib']}), peak "
                  f"{result['agent']['peak_rss_mib']} MiB"))
    return found
