"""`python -m kubesim up --dir DIR NAME [--workers N] [--pod-cidr CIDR] [NAME ...]`.

Starts the named clusters in this process, writes DIR/NAME.kubeconfig for each, prints
`NAME URL KUBECONFIG` per cluster once all serve, and runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from kubesim.cluster import Cluster

USAGE = ("usage: python -m kubesim up --dir DIR NAME [--workers N] [--pod-cidr CIDR] "
         "[NAME [--workers N] [--pod-cidr CIDR] ...]")


class UsageError(Exception):
    pass


@dataclass
class ClusterSpec:
    name: str
    workers: int = 1
    pod_cidr: str = "10.0.0.0/16"


def parse(argv: list[str]) -> tuple[Path, list[ClusterSpec]]:
    """Per-cluster flags follow the name they apply to."""
    if not argv or argv[0] != "up":
        raise UsageError("expected the `up` command")
    directory: Path | None = None
    specs: list[ClusterSpec] = []
    args = iter(argv[1:])
    for arg in args:
        if arg in ("--dir", "--workers", "--pod-cidr"):
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


async def up(directory: Path, specs: list[ClusterSpec]) -> None:
    clusters = [Cluster(s.name, workers=s.workers, pod_cidr=s.pod_cidr) for s in specs]
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
            print(cluster.name, cluster.url, cluster.kubeconfig_path, flush=True)
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
