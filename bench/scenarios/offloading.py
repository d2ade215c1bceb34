"""offloading: N pods created while the agent is stopped, then the agent starts; rate = N over
first ShadowPod → last home pod Running. The bare client (--bare-lanes concurrent requests)
takes N pods the same way, writing the objects the agent's forge makes for them: create the
ShadowPod and, as the pods mount their service-account token, first request the token at home
and create the token Secret at the remote → wait for the remote pod Running → patch the home
pod's status. Ratio = agent rate / bare rate (target ≥ 0.5). Each phase ends once its work has
settled (the agent's reflection drained, the enforcer's ShadowPod statuses written: on the bare
path these trail the pods), so that the next starts on a quiet system; requests and CPU are
counted until then. Between the phases the bare client's pods go, with their ShadowPods, token
Secrets, remote pods and Events (bare_removed_seconds; the latency scenario's bare pods with
them), so that the agent's phase does not start on clusters holding the bare client's phase's
objects.

The agent's CPU per pod is all its CPU in its phase (from its start, listings included) over
N; --profile samples it with py-spy in that phase, --agent-instructions counts the instructions
it ran (under valgrind's callgrind)."""

from __future__ import annotations

import time
from typing import Any

from bench import bare
from bench.api_calls import count_objects
from bench.figures import Rows, per_pod, profile_rows, writes_per_object
from bench.harness import Bench
from bench.processes import callgrind_instructions, cpu_seconds
from bench.profile import Profiler
from bench.watching import until


async def run(bench: Bench) -> dict[str, Any]:
    count = bench.args.pods
    agent, enforcer, timeline = bench.agent, bench.enforcer, bench.timeline
    assert agent is not None and enforcer is not None
    results: dict[str, Any] = {}
    for label in ("bare", "agent"):
        namespace = bench.names.namespace if label == "agent" else bench.names.bare_namespace
        twin = bench.twin if label == "agent" else bench.names.bare_twin
        names = [f"{label}-{i}" for i in range(count)]
        if label == "agent":
            agent.stop()
        pods = await bench.create_pods(namespace, names,
                                       bench.node if label == "agent" else bench.names.bare_node)
        # What the bare client's path holds at the remote as the phase starts.
        bare_remote = {kind: await count_objects(bench.remote, path)
                       for kind, path in bare.remote_collections(bench.names).items()}
        before, enforcer_cpu = bench.counts(), cpu_seconds(enforcer.pid)
        server_cpu = bench.kubesim_cpu()
        script_cpu = time.process_time()
        started = time.monotonic()
        profiler = None
        if label == "agent":
            agent.start()
            if bench.args.profile:
                profiler = Profiler(agent.pid, bench.directory / "agent-offloading.pyspy.txt")
        else:
            await bare.offload(bench.api("home", "bare"), bench.api("remote", "bare"),
                               bench.names, timeline, pods, bench.args.bare_lanes,
                               bench.phase_timeout())
        done = await until(timeline.all_of(timeline.running, "home-pods", namespace, names),
                           bench.phase_timeout(), f"{count} {label} pods Running at home",
                           interval=0.2)
        first = min(timeline.seen[("remote-shadowpods", twin, n)] for n in names)
        if label == "bare":
            # Its first write, which a watch busy in the same process may show late.
            first = min(first, started)
        if label == "agent":
            # Requests are counted until the agent has nothing left to do, reflection
            # (remote Events, tokens) included, not only until the pods run.
            await until(bench.agent_converged, 120 + count / 10, "the agent converged",
                        interval=0.5)
            converged = time.monotonic()
        # ... and until the enforcer has written every ShadowPod's Running status, which on
        # the bare path (it reads the remote pods itself) trails the phase: left running,
        # that backlog would load the server during the next phase.
        settled = await until(timeline.all_of(timeline.running, "remote-shadowpods", twin,
                                              names),
                              120 + count / 10, f"{count} {label} ShadowPod statuses",
                              interval=0.2)
        after = bench.counts()
        result: dict[str, Any] = {
            "pods": count, "seconds": round(done - first, 2),
            "pods_per_second": round(count / (done - first), 1),
            "settled_seconds": round(settled - first, 2),
            "requests": bench.requests_between(before, after,
                                               "agent" if label == "agent" else "bare"),
            "enforcer_requests": bench.requests_between(before, after, "enforcer"),
            "enforcer_cpu_seconds": round(cpu_seconds(enforcer.pid) - enforcer_cpu, 2),
            "kubesim_cpu_seconds": round(sum(bench.kubesim_cpu()) - sum(server_cpu), 2)
            if bench.server_pids else "n/a",
            "kubesim_cpu_seconds_by_cluster": dict(zip(
                ("home", "remote"), (round(after - before, 2) for before, after in zip(
                    server_cpu, bench.kubesim_cpu(), strict=True)), strict=False)),
            # the script itself (driver, watches, bare client) shares the machine too
            "script_cpu_seconds": round(time.process_time() - script_cpu, 2),
            "bare_objects_at_remote_at_start": bare_remote}
        if label == "agent":
            result["agent_start_to_first_shadowpod_s"] = round(first - agent.spawned, 2)
            result["converged_seconds"] = round(converged - first, 2)
            result["agent"] = agent.figures()
            # All its CPU since it started (listing both clusters included) over the pods.
            result["agent_cpu_ms_per_pod"] = round(
                1000 * result["agent"]["cpu_seconds"] / count, 2)
            if bench.args.agent_instructions:
                result["agent_instructions_per_pod"] = round(
                    callgrind_instructions(agent.pid, bench.directory) / count)
            if profiler is not None:
                result["agent_profile"] = profiler.stop()
        results[label] = result
        if label == "bare":
            # Left in place, the bare client's pods (the latency scenario's too) would make
            # the agent's phase, which runs second, carry the bare client's objects as well
            # (on kubesim, every pass of Python's collector walks every stored object, and the
            # passes grow with the heap).
            results["bare_removed_seconds"] = await bare.remove(
                bench.home, bench.remote, bench.names, 120 + count / 20)
    results["ratio"] = round(results["agent"]["pods_per_second"]
                             / results["bare"]["pods_per_second"], 2)
    return results


def remote_pods(args: Any) -> int:
    return 2 * int(args.pods)


def rows(result: dict[str, Any]) -> Rows:
    found: Rows = []
    for label in ("bare", "agent"):
        r = result[label]
        converged = (f"; everything reflected after {r['converged_seconds']} s"
                     if "converged_seconds" in r else "")
        found.append((f"offloading {label}", f"{r['pods']} pods in {r['seconds']} s = "
                      f"{r['pods_per_second']} pods/s{converged}; every ShadowPod's "
                      f"status written after {r['settled_seconds']} s"))
        found.append((f"  {label} requests/pod", per_pod(r["requests"], r["pods"])))
        found.append((f"  {label} writes/pod", writes_per_object(r["requests"], r["pods"])))
        found.append((f"  enforcer requests/pod ({label})",
                      per_pod(r["enforcer_requests"], r["pods"])
                      + f", enforcer CPU {r['enforcer_cpu_seconds']} s, kubesim CPU "
                      f"{r['kubesim_cpu_seconds']} s {r.get('kubesim_cpu_seconds_by_cluster')}"
                      f", this script's CPU "
                      f"{r.get('script_cpu_seconds', 'n/a')} s"))
    found.append(("offloading ratio agent/bare", f"{result['ratio']} (target ≥ 0.5)"))
    agent = result["agent"]["agent"]
    found.append(("agent after offloading", f"RSS {agent['rss_mib']} MiB (peak "
                  f"{agent['peak_rss_mib']}), CPU {agent['cpu_seconds']} s (system "
                  f"{agent.get('cpu_system_seconds')} s) = "
                  f"{result['agent'].get('agent_cpu_ms_per_pod')} ms/pod"))
    if "agent_instructions_per_pod" in result["agent"]:
        found.append(("  agent instructions",
                      f"{result['agent']['agent_instructions_per_pod']:,}"
                      " a pod (callgrind, from its start to convergence)"))
    found.extend(profile_rows(result["agent"].get("agent_profile")))
    return found
