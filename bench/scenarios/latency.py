"""latency: pods created one at a time (--latency-rate a second) with the agent running; per
pod, from watches: bound (created with nodeName) → ShadowPod created → remote pod Running →
ShadowPod status Running (the enforcer's) → home pod Running. "Added" is what the agent adds:
(ShadowPod − bound) + (home Running − ShadowPod status Running). The bare client does the same
pods the same way (its added: (ShadowPod − bound) + (home Running − remote Running)).
The two paths take turns pod by pod, so that both meet the same servers and the same machine:
measured one after the other, a change of load between them (another process, a compaction, a
quota resync) showed as the agent's difference, by tens of milliseconds on a real API server.
With --trace: where each path's time goes, step by step, and the agent's event-loop stalls."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from annex.api_paths import core_path
from bench import bare, trace
from bench.figures import Rows, percentiles, spread
from bench.harness import Bench
from bench.watching import until

STAGES = ("bound_to_shadowpod", "shadowpod_to_remote_running",
          "remote_running_to_shadowpod_status", "status_to_home_running", "added")


async def run(bench: Bench) -> dict[str, Any]:
    await until(bench.agent_converged, 120, "the agent converged", interval=0.5)
    started = time.monotonic()
    result: dict[str, Any] = await measure(bench, ("agent", "bare"), "lat")
    if bench.args.trace:
        result["trace"] = steps(bench, started, time.monotonic())
    return result


def remote_pods(args: Any) -> int:
    return 2 * int(args.latency_pods)


async def measure(bench: Bench, labels: tuple[str, ...], prefix: str) -> dict[str, Any]:
    """--latency-pods pods per path (label: the agent's or the bare client's), named
    PREFIX-LABEL-i, created one at a time, --latency-rate a second, the paths in turn; each
    path's stages."""
    interval, names = 1.0 / bench.args.latency_rate, bench.names
    places = {label: (names.namespace, bench.twin, bench.node) if label == "agent"
              else (names.bare_namespace, names.bare_twin, names.bare_node) for label in labels}
    pods: dict[str, list[str]] = {label: [] for label in labels}
    created: dict[str, float] = {}
    bare_tasks = []
    for i in range(bench.args.latency_pods):
        for label in labels:
            namespace, _, node = places[label]
            name = f"{prefix}-{label}-{i}"
            pod = await bench.home.create(core_path("pods", namespace), bench.pod(name, node))
            created[name] = bench.created[name] = time.monotonic()
            pods[label].append(name)
            if label == "bare":
                bare_tasks.append(asyncio.create_task(bare.offload(
                    bench.api("home", "bare"), bench.api("remote", "bare"), names,
                    bench.timeline, [pod], bench.args.bare_lanes, bench.phase_timeout())))
            await asyncio.sleep(interval)
    for label in labels:
        await until(bench.timeline.all_of(bench.timeline.running, "home-pods",
                                          places[label][0], pods[label]),
                    120, f"{prefix}-{label} latency pods Running at home")
    await asyncio.gather(*bare_tasks)
    return {label: stages(bench, places[label][0], places[label][1], pods[label], created)
            for label in labels}


def stages(bench: Bench, namespace: str, twin: str, pods: list[str],
           created: dict[str, float]) -> dict[str, Any]:
    """Per-pod stage durations. The agent's own share ("added") is bound → ShadowPod created
    plus ShadowPod status Running (written by the enforcer) → home pod Running; the bare
    client's is bound → ShadowPod plus remote pod Running → home pod Running."""
    t = bench.timeline
    found: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for name in pods:
        shadow = t.seen.get(("remote-shadowpods", twin, name))
        remote = t.running.get(("remote-pods", twin, name))
        status = t.running.get(("remote-shadowpods", twin, name), remote)
        home = t.running.get(("home-pods", namespace, name))
        if shadow is None or remote is None or status is None or home is None:
            continue
        if namespace == bench.names.bare_namespace:
            status = remote  # the bare client reads the pod itself
        found["bound_to_shadowpod"].append(shadow - created[name])
        found["shadowpod_to_remote_running"].append(remote - shadow)
        found["remote_running_to_shadowpod_status"].append(status - remote)
        found["status_to_home_running"].append(home - status)
        found["added"].append((shadow - created[name]) + (home - status))
    return {**{stage: percentiles(values) for stage, values in found.items()},
            "pods": len(found["added"])}


def steps(bench: Bench, start: float, end: float) -> dict[str, Any]:
    """--trace: where each latency pod's time went, step by step, on the agent's path (its
    trace) and the bare client's (the benchmark's own), and the agent's event-loop stalls
    meanwhile."""
    t, names = bench.timeline, bench.names
    times: dict[str, dict[str, float]] = {}
    for name, created in bench.created.items():
        namespace, twin = ((names.namespace, bench.twin) if name.startswith("lat-agent-")
                           else (names.bare_namespace, names.bare_twin))
        found = {"created": created,
                 "shadowpod": t.seen.get(("remote-shadowpods", twin, name)),
                 "remote_running": t.running.get(("remote-pods", twin, name)),
                 "shadowpod_running": t.running.get(("remote-shadowpods", twin, name)),
                 "home_running": t.running.get(("home-pods", namespace, name))}
        times[name] = {k: v for k, v in found.items() if v is not None}
    agent = trace.read(bench.directory / "trace-agent.jsonl")
    by_path = trace.breakdown(
        agent, trace.read(bench.directory / "trace-bench.jsonl"),
        {"namespace": names.namespace, "twin": bench.twin,
         "bare_namespace": names.bare_namespace, "bare_twin": names.bare_twin}, times)
    return {**{path: {step: percentiles(values) for step, values in found.items()}
               for path, found in by_path.items()},
            "agent_loop_stalls": trace.stalls(agent, start, end)}


def rows(result: dict[str, Any]) -> Rows:
    found: Rows = []
    for label in ("agent", "bare"):
        for stage in STAGES:
            found.append((f"latency {label} {stage}", spread(result[label][stage])))
    agent_p50, bare_p50 = (result[label]["added"].get("p50_ms") for label in ("agent", "bare"))
    if agent_p50 is not None and bare_p50 is not None:
        found.append(("latency added by the agent over the bare client",
                      f"p50 {agent_p50 - bare_p50:.1f} ms (target ≤ 30 ms)"))
    traced: dict[str, Any] = result.get("trace") or {}
    for label in ("agent", "bare") if traced else ():
        for step, p in traced[label].items():
            found.append((f"  {label} {step}", f"p50 {p.get('p50_ms')} ms, p90 "
                          f"{p.get('p90_ms')} ms"))
    if traced:
        stalled = traced["agent_loop_stalls"]
        found.append(("  agent event loop stalls (> 2 ms)",
                      f"{stalled['count']}, {stalled['seconds']} s in all, longest "
                      f"{stalled['longest_ms']} ms"))
    return found
