"""enforcer (by name only: --scenarios enforcer): ShadowPods through the remote enforcer
against bare pod creates, on the remote cluster, --bare-lanes requests at once each. First
--enforcer-pods pods created directly (the baseline: the same minimal API writes without
annex), then as many ShadowPods, each admitted by the enforcer's webhook against a Soft Quota of
the bare client's consumer; until the enforcer has created all their pods. The rates, their
ratio, and the enforcer's RSS holding them. Its objects are removed at its end."""

from __future__ import annotations

import functools
import time
from typing import Any

from annex.api_paths import core_path, custom_path
from bench.api_calls import created
from bench.figures import Rows
from bench.harness import Bench
from bench.watching import gather_limited, until, until_async
from shared.api.quota import QUOTA, LimitsEnforcement
from shared.api.shadowpod import SHADOWPOD
from shared.ownership import ownership_labels

LABELS = {"app": "bench-enforcer"}
CONTAINER = {"name": "main", "image": "nginx",
             "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}


async def run(bench: Bench) -> dict[str, Any]:
    assert bench.enforcer is not None
    count, lanes, names = bench.args.enforcer_pods, bench.args.bare_lanes, bench.names
    twin, client = names.bare_twin, bench.api("remote", "bare")
    pods, shadowpods = core_path("pods", twin), custom_path(SHADOWPOD, twin)
    quota = custom_path(QUOTA, twin, "bench-enforcer")
    await created(bench.remote.create(custom_path(QUOTA, twin), {
        **QUOTA.type_meta(),
        "metadata": {"name": "bench-enforcer"},
        "spec": {"consumerClusterId": names.bare_consumer,
                 "limitsEnforcement": LimitsEnforcement.SOFT.value,
                 "resources": {"cpu": "100000", "memory": "100000Gi"}}}))
    started = time.monotonic()
    await gather_limited((functools.partial(client.create, pods, {
        "metadata": {"name": f"enf-bare-{i}", "labels": LABELS},
        "spec": {"containers": [CONTAINER]}}) for i in range(count)), lanes)
    bare_seconds = time.monotonic() - started
    shadowed = [f"enf-{i}" for i in range(count)]
    started = time.monotonic()
    await gather_limited((functools.partial(client.create, shadowpods, {
        **SHADOWPOD.type_meta(),
        "metadata": {"name": name, "labels": {
            **ownership_labels(names.bare_consumer, names.provider_id), **LABELS}},
        "spec": {"pod": {"containers": [CONTAINER]}}}) for name in shadowed), lanes)
    admitted_seconds = time.monotonic() - started
    enforced = await until(bench.timeline.all_of(bench.timeline.seen, "remote-pods", twin,
                                                 shadowed),
                           bench.phase_timeout(), f"the enforcer's {count} pods", interval=0.2)
    result = {
        "pods": count,
        "bare_creates_per_second": round(count / bare_seconds, 1),
        "shadowpod_creates_per_second": round(count / admitted_seconds, 1),
        "ratio": round(bare_seconds / admitted_seconds, 2),
        "enforced_seconds": round(enforced - started, 2),
        "enforced_per_second": round(count / (enforced - started), 1),
        "enforcer": bench.enforcer.figures()}
    selector = {"labelSelector": "app=bench-enforcer"}
    timeout = 120 + count / 20
    await bench.remote.request("DELETE", shadowpods, query=selector, timeout=timeout)
    await bench.remote.request("DELETE", pods, query=selector, timeout=timeout)
    await bench.remote.delete(quota)

    async def gone() -> bool:
        return not await bench.remote.list(pods, "app=bench-enforcer")
    await until_async(gone, timeout, "the enforcer scenario's pods removed")
    return result


def remote_pods(args: Any) -> int:
    return 2 * int(args.enforcer_pods)


def rows(result: dict[str, Any]) -> Rows:
    count = result["pods"]
    return [
        ("enforcer: bare pod creates", f"{result['bare_creates_per_second']}/s"),
        ("  ShadowPod creates via webhook", f"{result['shadowpod_creates_per_second']}/s "
         f"(ratio to bare {result['ratio']})"),
        ("  pods created by the enforcer", f"{result['enforced_per_second']}/s (all {count} "
         f"after {result['enforced_seconds']} s)"),
        ("  enforcer", f"RSS {result['enforcer']['rss_mib']} MiB with {count} ShadowPods and "
         f"{2 * count} pods, CPU {result['enforcer']['cpu_seconds']} s")]
