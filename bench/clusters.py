"""The two clusters a run uses: kubesim's, each in a child process of its own as two control
planes are, or the clusters it is given (E2E_HOME_KUBECONFIG, E2E_REMOTE_KUBECONFIG); and
whether the remote has room for the pods the run would leave there.

    python -m bench.clusters DIR CLUSTER --remote-pods N [--remote-nodes N]
        [--kubesim-latency WRITE_MS,WATCH_MS]

serves one kubesim cluster (what `python -m bench` starts twice; not for direct use).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class CapacityError(Exception):
    """The remote cluster cannot run the pods this run would create."""


def remote_pod_cidr(workers: int) -> str:
    """A /24 for each of `workers` nodes, up to 16,384 (10.128.0.0/10, remapped onto the
    agent's 100.64.0.0/10)."""
    return f"10.128.0.0/{min(16, 24 - (workers - 1).bit_length())}"


def serve(directory: Path, remote_pods: int, only: str,
          latency: tuple[float, float] = (0.0, 0.0), remote_nodes: int = 1) -> None:
    """The `only` kubesim cluster (home or remote: each in a process of its own, as two real
    control planes are), its kubeconfig written to DIR/CLUSTER.kubeconfig; the remote with at
    least `remote_nodes` workers. Prints one JSON line once serving; runs until SIGTERM.
    `latency`: (write, watch) seconds, see --kubesim-latency."""
    from kubesim.cluster import Cluster
    from kubesim.controllers import ControllerSettings

    # kubesim gives each node a /24 of the pod CIDR (at most 254 pods a node) while the CIDR
    # has one for each, smaller slices beyond: past 256 nodes the remote CIDR grows.
    workers = max(1, remote_nodes, math.ceil(remote_pods / 250))
    specs = {"home": (1, "10.10.0.0/16", 110),
             "remote": (workers, remote_pod_cidr(workers), 250)}
    count, cidr, pods = specs[only]

    async def main() -> None:
        cluster = Cluster(only, workers=count, pod_cidr=cidr)
        cluster.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
            workers=count, pod_cidr=cidr, node_prefix=f"{only}-worker",
            worker_cpu="10000", worker_memory="10000Gi", worker_pods=pods)
        await cluster.start(directory)
        cluster.faults.write_latency(latency[0])  # type: ignore[attr-defined]
        cluster.faults.watch_latency(latency[1])  # type: ignore[attr-defined]
        print(json.dumps({"kubeconfig": str(directory / f"{only}.kubeconfig"),
                          "remote_pod_cidr": cidr if only == "remote" else None}), flush=True)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()
        await cluster.stop()

    asyncio.run(main())


def start_kubesim(directory: Path, cluster: str, remote_pods: int, latency: tuple[float, float],
                  remote_nodes: int = 1) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """A kubesim cluster in a child process, and what it printed once serving."""
    log = directory / f"kubesim-{cluster}.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.clusters", str(directory), cluster,
         "--remote-pods", str(remote_pods), "--remote-nodes", str(remote_nodes),
         "--kubesim-latency", ",".join(str(s * 1000) for s in latency)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log.open("wb"))
    assert server.stdout is not None
    line = server.stdout.readline()  # ends with the process at the latest
    if not line:
        server.wait(30)
        raise SystemExit(f"error: kubesim {cluster} did not start (exit code "
                         f"{server.returncode}): see {log}")
    return server, json.loads(line)


def schedulable(node: dict[str, Any]) -> bool:
    """Ready, not cordoned, without a NoSchedule or NoExecute taint (a control plane's)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])
    tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in spec.get("taints") or [])
    return ready and not spec.get("unschedulable") and not tainted


def room_for_pods(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(ready schedulable nodes, the pods they allocate, the pods they run): a node's pods
    are the bound ones that have not ended."""
    usable = {node["metadata"]["name"]: int(str(
        (node.get("status") or {}).get("allocatable", {}).get("pods") or 0))
        for node in nodes if schedulable(node)}
    taken = sum(1 for pod in pods
                if (pod.get("spec") or {}).get("nodeName") in usable
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
    return len(usable), sum(usable.values()), taken


def kubesim_latency(text: str) -> tuple[float, float]:
    """WRITE_MS,WATCH_MS as (write, watch) seconds."""
    write_ms, _, watch_ms = text.partition(",")
    return float(write_ms or 0) / 1000, float(watch_ms or 0) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description="serve one kubesim cluster of a bench run")
    parser.add_argument("directory", type=Path)
    parser.add_argument("cluster", choices=("home", "remote"))
    parser.add_argument("--remote-pods", type=int, required=True,
                        help="the pods the run leaves at the remote (its worker nodes' room)")
    parser.add_argument("--remote-nodes", type=int, default=1,
                        help="the remote's worker nodes at least")
    parser.add_argument("--kubesim-latency", default="0,0", metavar="WRITE_MS,WATCH_MS")
    args = parser.parse_args()
    serve(args.directory, args.remote_pods, args.cluster, kubesim_latency(args.kubesim_latency),
          args.remote_nodes)


if __name__ == "__main__":
    main()
