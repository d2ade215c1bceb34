"""ShadowPods through the remote enforcer against bare pod creates, on one kubesim, in one run.

Starts a simulated cluster, the enforcer as a process with its webhook registered and a Soft
Quota, then (16 client threads each): creates N bare pods (the baseline: the same minimal API
writes without annex), creates N ShadowPods (each admitted by the webhook), and waits until the
enforcer has created all N pods. Prints the rates and their ratio.

    python scripts/bench_remote_enforcer.py [--count 1000] [enforcer flags, e.g. --workers 64]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubesim.cluster import Cluster, ClusterThread  # noqa: E402
from tests.helpers import wait_for  # noqa: E402
from tests.remote_enforcer.conftest import (  # noqa: E402
    ShadowPods,
    make_twin_namespace,
    running_enforcer,
    shadowpod,
)
from tests.remote_enforcer.test_admission import container, set_quota  # noqa: E402

THREADS = 16


def rss_megabytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    args, enforcer_flags = parser.parse_known_args()
    count = args.count
    directory = Path(tempfile.mkdtemp(prefix="bench-enforcer-"))
    thread = ClusterThread([Cluster("remote")], directory)
    thread.start()
    try:
        kubeconfig = directory / "remote.kubeconfig"
        api = config.new_client_from_config(config_file=str(kubeconfig))
        remote = SimpleNamespace(api_client=api, core=client.CoreV1Api(api),
                                 dynamic=DynamicClient(api), kubeconfig=kubeconfig)
        with running_enforcer(remote, kubeconfig, directory, enforcer_flags) as enforcer, \
                ThreadPoolExecutor(THREADS) as pool:
            remote.core.create_namespace({"metadata": {"name": "bare"}})
            start = time.perf_counter()
            list(pool.map(lambda i: remote.core.create_namespaced_pod("bare", {
                "metadata": {"name": f"p{i}"}, "spec": {"containers": [container()]}}),
                range(count)))
            bare = time.perf_counter() - start

            twin = make_twin_namespace(remote, "bench")
            set_quota(remote, twin, "bench", "Soft", {"cpu": "100000", "memory": "100000Gi"})
            shadowpods = ShadowPods(api)
            start = time.perf_counter()
            list(pool.map(lambda i: shadowpods.create(twin, shadowpod(
                f"s{i}", "bench", {"containers": [container()]})), range(count)))
            admitted = time.perf_counter() - start
            wait_for(lambda: len(remote.core.list_namespaced_pod(twin).items) == count,
                     timeout=600, interval=0.2)
            enforced = time.perf_counter() - start
            assert enforcer.process is not None
            rss = rss_megabytes(enforcer.process.pid)
        print(f"count={count} threads={THREADS} enforcer flags={enforcer_flags or 'defaults'}")
        print(f"bare pod creates:              {count / bare:7.0f}/s")
        print(f"ShadowPod creates via webhook: {count / admitted:7.0f}/s "
              f"(ratio to bare {bare / admitted:.2f})")
        print(f"pods created by the enforcer:  {count / enforced:7.0f}/s "
              f"(all {count} after {enforced:.1f}s)")
        print(f"enforcer RSS with {count} ShadowPods and {2 * count} pods: {rss:.0f} MB")
    finally:
        thread.stop()


if __name__ == "__main__":
    main()
