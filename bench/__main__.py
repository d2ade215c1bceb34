"""The home agent against the raw API limit: offloading N pods and reflecting N ConfigMaps through
the agent and the remote enforcer (real processes), against a bare client doing the minimal API
writes the same work needs, on the same servers, in the same run.

    python -m bench [--pods 1000] [--configmaps N] [--latency-pods 200] [--idle-seconds 60]
        [--workers 10] [--bare-lanes 16] [--agent-flag=--remote-qps=500 ...]
        [--enforcer-flag=... ...] [--json bench-offloading.json] [--scenarios a,b,...]
        [--stream-logs 100] [--stream-execs 20] [--stream-pods 10] [--trace] [--profile]
        [--failover-pods 1000] [--failover-rate 10] [--fragmented-nodes 20]
        [--fragmented-replicas 4] [--fragmented-bare 1] [--pools-nodes 4] [--pools-pods 200]

Clusters: two kubesim clusters, each in a child process of its own as two control planes are
(bench.clusters); or the two clusters E2E_HOME_KUBECONFIG and E2E_REMOTE_KUBECONFIG name
(E2E_REMOTE_POD_CIDR: the remote's pod CIDR, remapped by the agent), real or not. Everything a
run creates is named after it (`bench-<run>`, a Node `bench-bare-node-<run>` for the bare
client's pods, kept alive by a Lease) and removed at its end, also after a failure or Ctrl-C.
The run refuses to start when the remote's ready schedulable nodes lack room for the pods it
would leave there; every wait has a deadline.

Requests are counted by the components themselves (their /metrics:
annex_rest_client_requests_by_resource_total by host, verb and resource) and by the bare
client's own counter, on kubesim and on real clusters alike. Agent and enforcer: peak RSS
(VmHWM) and CPU seconds per scenario from /proc.

The scenarios (bench/scenarios/, each module says what it measures) run in the order given;
by default latency, offloading, configmaps, restart, idle, streams (each leaves its objects
for the next); storage, enforcer, agents, failover, fragmented and pools only when named.

--profile samples the agent with py-spy in the offloading phase and in the restart, from its
start to its convergence (bench.profile), and reports the functions it was in when it ran or
could run (a share of that time, not of its CPU time).
--agent-instructions runs the agent under valgrind's callgrind and reports the instructions it
ran in the offloading phase (from its start to convergence) per pod: unlike its CPU seconds, a
count that does not drift with the machine (the same tree, the same N: within about 1 %), so two
trees compare in one run each. The agent runs about 30 times slower under it: keep N to a few
thousand. Its call graph (callgrind_annotate) is left in the run directory.
The agent and the enforcer run with their defaults (unthrottled clients, as the bare client),
the agent with `--workers`; --agent-flag and --enforcer-flag are appended to their command
lines (e.g. --agent-flag=--redis-url=..., --enforcer-flag=--qps=200).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import trace
from bench.clusters import CapacityError, kubesim_latency, start_kubesim
from bench.components import ComponentExited
from bench.harness import Bench
from bench.names import Names
from bench.report import machine, table
from bench.scenarios import DEFAULT, SCENARIOS, remote_pods_needed
from bench.stream_client import StreamEnded

NUMBERS: tuple[tuple[str, type[int] | type[float], float, str], ...] = (
    ("--pods", int, 1000, "pods of the offloading scenario"),
    ("--latency-pods", int, 200, "pods of the latency scenario, on each path"),
    ("--latency-rate", float, 20.0, "pods created a second in the latency scenario"),
    ("--idle-seconds", float, 60.0, "how long the idle scenario lasts"),
    ("--restarts", int, 1, "times the restart scenario kills and starts the agent (its "
                           "figures: the median run's)"),
    ("--storage-pods", int, 100, "claims (and one pod each) of the storage scenario"),
    ("--enforcer-pods", int, 1000, "bare pods and as many ShadowPods of the enforcer scenario"),
    ("--failover-pods", int, 1000, "most pods the failover scenario's burst creates"),
    ("--failover-rate", float, 10.0, "pods created a second in the failover scenario's burst"),
    ("--fragmented-nodes", int, 20, "the kubesim remote's worker nodes at least, each left 2 "
                                    "cpu free in the fragmented scenario"),
    ("--fragmented-replicas", int, 4, "replicas of each Deployment of the fragmented scenario "
                                      "(one of small pods, one of large ones)"),
    ("--fragmented-bare", int, 1, "pods without a controller of each size in the fragmented "
                                  "scenario"),
    ("--pools-nodes", int, 4, "the kubesim remote's worker nodes at least, half of them in each "
                              "pool of the pools scenario"),
    ("--pools-pods", int, 200, "pods of the pools scenario, half of them requesting a GPU"),
    ("--stream-logs", int, 100, "followed logs (kubectl logs -f) open in the streams scenario"),
    ("--stream-execs", int, 20, "exec sessions (kubectl exec -i ... cat) open in the streams "
                                "scenario, each echoing a line a second"),
    ("--stream-pods", int, 10, "offloaded pods the streams scenario's streams are spread over"),
    ("--workers", int, 10, "the agent's --workers"),
    ("--bare-lanes", int, 16, "the bare client's concurrent requests (the limit it reaches)"),
)
"""The options that are a number: (flag, its type, default, what it sets)."""
SWITCHES = (
    ("--trace", "run the agent traced (bench.trace), trace the benchmark's own client too: the "
                "latency scenario then reports where each path's time goes, step by step"),
    ("--profile", "sample the agent with py-spy during the offloading phase and the restart "
                  "(its stacks in the run directory) and report the functions it was in when "
                  "it ran or could run"),
    ("--agent-instructions", "run the agent under valgrind's callgrind and report the "
                             "instructions it ran a pod in the offloading phase (a figure that "
                             "does not drift with the machine; about 30 times slower)"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench",
                                     description=(__doc__ or "").splitlines()[0])
    for flag, kind, default, text in NUMBERS:
        parser.add_argument(flag, type=kind, default=default, help=f"{text} ({default})")
    parser.add_argument("--configmaps", type=int, default=None,
                        help="ConfigMaps of the configmaps scenario (--pods)")
    parser.add_argument("--compare-root", type=lambda v: Path(v).absolute(), default=None,
                        metavar="OTHER_CHECKOUT",
                        help="the restarts alternate between this tree's agent and the one of "
                             "another checkout (a `git worktree` of another commit), each "
                             "one's median reported: an A/B comparison at the same hour")
    parser.add_argument("--compare-flag", action="append", default=[], metavar="FLAG",
                        help="the restarts alternate between this tree's agent and the same "
                             "agent with this flag too (repeat), each one's median reported, "
                             "e.g. --compare-flag=--redis-url=redis://127.0.0.1:6379/0")
    parser.add_argument("--service-account-token", type=lambda v: v.lower() == "true",
                        default=True, metavar="true|false",
                        help="pods mount their service-account token (then the agent and the "
                             "bare client write a token Secret per pod)")
    parser.add_argument("--agent-flag", action="append", default=[],
                        help="an extra agent flag (repeat), e.g. --agent-flag=--redis-url=...")
    parser.add_argument("--enforcer-flag", action="append", default=[],
                        help="an extra enforcer flag (repeat), e.g. --enforcer-flag=--qps=200")
    parser.add_argument("--scenarios", default=",".join(DEFAULT),
                        help=f"of {', '.join(SCENARIOS)}, run in the order given")
    parser.add_argument("--kubesim-latency", default="0,0", metavar="WRITE_MS,WATCH_MS",
                        help="kubesim's writes wait WRITE_MS (a real server's etcd commit) and "
                             "its watch events WATCH_MS, e.g. 5,1 (kubesim/faults.py)")
    for flag, text in SWITCHES:
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument("--json", default="bench-offloading.json", help="results file")
    args = parser.parse_args(argv)
    if args.restarts < 1:
        parser.error("--restarts must be at least 1")
    unknown = [name for name in args.scenarios.split(",") if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {', '.join(unknown)}: choose of {', '.join(SCENARIOS)}")
    if args.configmaps is None:
        args.configmaps = args.pods
    args.kubesim_latency = kubesim_latency(args.kubesim_latency)
    return args


def _interrupted(*_: Any) -> None:
    raise KeyboardInterrupt


async def run(args: argparse.Namespace, directory: Path, served: dict[str, Any],
              names: Names) -> Bench:
    chosen = args.scenarios.split(",")
    bench = Bench(args, directory, served["kubeconfigs"], served.get("remote_pod_cidr"),
                  served.get("pids", []), names, remote_pods_needed(chosen, args))
    task = asyncio.current_task()
    assert task is not None
    # SIGTERM unwinds as Ctrl-C does (asyncio.run cancels on SIGINT): the cleanup below runs.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    if args.trace:  # the bare client's requests and the watches' events, as the agent's
        trace.install((directory / "trace-bench.jsonl").open("a", buffering=1))
    try:
        await bench.check_capacity()
        try:
            await bench.setup()
            for scenario in chosen:
                started = time.monotonic()
                bench.results[scenario] = await SCENARIOS[scenario].run(bench)
                print(f"[{scenario} done in {time.monotonic() - started:.0f}s]", file=sys.stderr)
        finally:
            if bench.server_pids:  # its own kubesim goes with everything in it
                for component in (bench.agent, bench.enforcer):
                    if component is not None:
                        component.stop()
            else:
                print("[cleaning up]", file=sys.stderr)
                await bench.cleanup()
    finally:
        await bench.close()
    return bench


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, _interrupted)  # until the run's loop handles it
    # Ctrl-C interrupts a run (and its cleanup runs) also where SIGINT came ignored: a script's
    # background job inherits SIG_IGN, and asyncio.run then leaves SIGINT alone.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    directory = Path(tempfile.mkdtemp(prefix="bench-offloading-"))
    names = Names(uuid.uuid4().hex[:6])
    home, remote = os.environ.get("E2E_HOME_KUBECONFIG"), os.environ.get("E2E_REMOTE_KUBECONFIG")
    servers: list[subprocess.Popen[bytes]] = []
    try:
        if home and remote:
            served: dict[str, Any] = {"kubeconfigs": {"home": home, "remote": remote},
                                      "remote_pod_cidr": os.environ.get("E2E_REMOTE_POD_CIDR")}
        else:
            served = {"kubeconfigs": {}, "pids": []}
            chosen = args.scenarios.split(",")
            needed = sum(remote_pods_needed(chosen, args).values())
            nodes = max(args.fragmented_nodes if "fragmented" in chosen else 1,
                        args.pools_nodes if "pools" in chosen else 1)
            for cluster in ("home", "remote"):
                server, answer = start_kubesim(directory, cluster, needed, args.kubesim_latency,
                                               nodes)
                servers.append(server)
                served["kubeconfigs"][cluster] = answer["kubeconfig"]
                served["pids"].append(server.pid)
                served["remote_pod_cidr"] = answer["remote_pod_cidr"] or served.get(
                    "remote_pod_cidr")
        machine_before = machine()
        bench = asyncio.run(run(args, directory, served, names))
    except CapacityError as error:
        raise SystemExit(f"error: {error}") from None
    except (TimeoutError, ComponentExited, StreamEnded) as error:
        raise SystemExit(f"error: {error} (run {names.run}; logs: {directory})") from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise SystemExit(f"interrupted (run {names.run}; logs: {directory})") from None
    finally:
        for server in servers:
            server.send_signal(signal.SIGTERM)
        for server in servers:
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:  # a cluster of many GiB takes long to let go:
                server.kill()  # what it held is not wanted, the run's results are
    report = {"command": " ".join(sys.argv), "clusters": "kubesim" if servers else "real",
              "machine": {**machine_before, "load_average_after": [
                  round(x, 2) for x in os.getloadavg()]},
              "run_id": names.run, "logs": str(directory), **bench.results}
    Path(args.json).write_text(json.dumps(report, indent=2))
    print(f"machine: {report['machine']}")
    print(table(bench.results))
    print(f"results: {args.json}; logs: {directory}")


if __name__ == "__main__":
    main()
