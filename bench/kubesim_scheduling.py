"""Pods scheduled and started per second by kubesim's scheduler and kubelet, 3 simulated workers.

Creates N pods at once through the in-process API and waits until every one is Running (bound,
with an IP and ready containers). Prints the rate.
Usage: python -m bench.kubesim_scheduling [N]   (N <= 750: each node has a /24, 250 pod slots)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from kubesim.cluster import Cluster
from kubesim.controllers import ControllerSettings


async def main(count: int) -> None:
    cluster = Cluster("bench", workers=3)
    cluster.controller_settings = ControllerSettings(  # type: ignore[attr-defined]
        workers=3, node_prefix="bench-worker", worker_pods=250)
    with tempfile.TemporaryDirectory() as directory:
        await cluster.start(Path(directory))
        api = cluster.api
        pods = api.kinds.get("", "v1", "pods")
        assert pods is not None
        running = 0
        done = asyncio.Event()

        async def count_running() -> None:
            nonlocal running
            seen: set[str] = set()
            async for event in api.watch(pods, "default"):
                obj = event["object"]
                if obj.get("status", {}).get("phase") == "Running":
                    seen.add(obj["metadata"]["name"])
                    if len(seen) == count:
                        done.set()
                        return

        watcher = asyncio.create_task(count_running())
        started_wall, started_cpu = time.perf_counter(), time.process_time()
        for index in range(count):
            await api.create(pods, "default", {"metadata": {"name": f"p-{index}"}, "spec": {
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}})
        created = time.perf_counter() - started_wall
        await asyncio.wait_for(done.wait(), timeout=600)
        wall = time.perf_counter() - started_wall
        cpu = time.process_time() - started_cpu
        watcher.cancel()
        await cluster.stop()
    print(f"{count} pods created in {created:.2f} s; all Running after {wall:.2f} s "
          f"({cpu:.2f} s CPU): {count / wall:.0f} pods scheduled and started per second "
          f"with 3 simulated workers")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 600))
