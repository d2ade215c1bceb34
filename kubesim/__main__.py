"""`python -m kubesim up --dir DIR NAME [--workers N] [--pod-cidr CIDR] [NAME ...]`.

Starts the named clusters in this process, writes DIR/NAME.kubeconfig for each, prints
`NAME URL KUBECONFIG FAULTS_URL` per cluster once all serve, and runs until SIGINT or SIGTERM.
Per-cluster flags also set the workers' capacity (--worker-cpu, --worker-memory, --worker-pods)
and which controllers run (--controllers "*,-scheduler", kube-controller-manager's syntax);
--metrics-resolution SECONDS runs metrics-server's metrics.k8s.io API, scraping the kubelets
that often (off by default, as on a fresh kubeadm cluster).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from kubesim.cluster import Cluster
from kubesim.metricsserver import MetricsServerSettings

USAGE = ("usage: python -m kubesim up --dir DIR NAME [--workers N] [--pod-cidr CIDR] "
         "[--worker-cpu Q] [--worker-memory Q] [--worker-pods N] [--controllers LIST] "
         "[--metrics-resolution SECONDS] "
         "[NAME [...] ...]")
PART2_FLAGS = ("--worker-cpu", "--worker-memory", "--worker-pods", "--controllers")


class UsageError(Exception):
    pass


@dataclass
class ClusterSpec:
    name: str
    workers: int = 1
    pod_cidr: str = "10.0.0.0/16"
    worker_cpu: str = "4"
    worker_memory: str = "8Gi"
    worker_pods: int = 110
    controllers: str = "*"
    metrics_resolution: float | None = None  # metrics-server off


def parse(argv: list[str]) -> tuple[Path, list[ClusterSpec]]:
    """Per-cluster flags follow the name they apply to."""
    if not argv or argv[0] != "up":
        raise UsageError("expected the `up` command")
    directory: Path | None = None
    specs: list[ClusterSpec] = []
    args = iter(argv[1:])
    for arg in args:
        if arg in ("--dir", "--workers", "--pod-cidr", "--metrics-resolution", *PART2_FLAGS):
            value = next(args, None)
            if value is None:
                raise UsageError(f"{arg} needs a value")
            if arg == "--dir":
                directory = Path(value)
            elif not specs:
                raise UsageError(f"{arg} must follow a cluster name")
            elif arg == "--workers":
                if not value.isdigit():
                    raise UsageError("--workers takes a number")
                specs[-1].workers = int(value)
            elif arg == "--metrics-resolution":
                try:
                    specs[-1].metrics_resolution = float(value)
                except ValueError:
                    raise UsageError("--metrics-resolution takes seconds") from None
            elif arg in PART2_FLAGS:
                _set_part2_flag(specs[-1], arg, value)
            else:
                specs[-1].pod_cidr = value
        elif arg.startswith("-"):
            raise UsageError(f"unknown flag {arg}")
        else:
            specs.append(ClusterSpec(arg))
    if directory is None or not specs:
        raise UsageError("--dir and at least one cluster name are required")
    if len({s.name for s in specs}) != len(specs):
        raise UsageError("cluster names must differ")
    return directory, specs


def _set_part2_flag(spec: ClusterSpec, flag: str, value: str) -> None:
    from kubesim.controllers import parse_controller_names

    if flag == "--worker-pods":
        if not value.isdigit():
            raise UsageError("--worker-pods takes a number")
        spec.worker_pods = int(value)
    elif flag == "--controllers":
        try:
            parse_controller_names(value)
        except ValueError as error:
            raise UsageError(str(error)) from None
        spec.controllers = value
    else:
        setattr(spec, flag[2:].replace("-", "_"), value)


def _make_cluster(spec: ClusterSpec) -> Cluster:
    from kubesim.controllers import ControllerSettings, parse_controller_names

    cluster = Cluster(spec.name, workers=spec.workers, pod_cidr=spec.pod_cidr)
    cluster.controller_names = parse_controller_names(spec.controllers)  # type: ignore[attr-defined]
    cluster.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=spec.workers, pod_cidr=spec.pod_cidr, node_prefix=f"{spec.name}-worker",
        worker_cpu=spec.worker_cpu, worker_memory=spec.worker_memory,
        worker_pods=spec.worker_pods)
    if spec.metrics_resolution is not None:
        cluster.metrics_server = MetricsServerSettings(resolution=spec.metrics_resolution)
    return cluster


async def up(directory: Path, specs: list[ClusterSpec]) -> None:
    clusters = [_make_cluster(s) for s in specs]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    started: list[Cluster] = []
    try:
        for cluster in clusters:
            await cluster.start(directory)
            started.append(cluster)
        for cluster in clusters:
            faults = getattr(cluster, "fault_control", None)
            print(cluster.name, cluster.url, cluster.kubeconfig_path,
                  faults.url if faults is not None else "-", flush=True)
        await stop.wait()
    finally:
        for cluster in started:
            await cluster.stop()


def main(argv: list[str] | None = None) -> int:
    try:
        directory, specs = parse(sys.argv[1:] if argv is None else argv)
    except UsageError as error:
        print(f"kubesim: {error}\n{USAGE}", file=sys.stderr)
        return 2
    asyncio.run(up(directory, specs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
