"""Many offloaded pods at once: creating and deleting them in parallel, reading both sides in
one request each (raw JSON: deserializing hundreds of pods into models costs more than the
test), and the convergence the fault tests wait for."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY, running_and_ready
from tests.faults.history import Lister, pods_of, shadow_pods_of
from tests.helpers import WaitTimeout, wait_for

LABELS = {"app": "fleet"}
PARALLEL_REQUESTS = 8


def pod_names(prefix: str, count: int, start: int = 0) -> list[str]:
    return [f"{prefix}-{index:04d}" for index in range(start, start + count)]


def pod_body(name: str, node_name: str, restart_policy: str = "Always") -> dict[str, Any]:
    """A pod bound to the virtual node, as the scheduler leaves a pod of a Remote-offloaded
    namespace (binding is not what these tests are about)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": LABELS},
            "spec": {"nodeName": node_name, "restartPolicy": restart_policy,
                     "containers": [{"name": "main", "image": "nginx:1.25"}],
                     **REMOTE_STRATEGY}}


def in_parallel(action: Callable[[str], Any], names: Iterable[str]) -> None:
    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        for _ in pool.map(action, names):
            pass


def create_pods(home: ClusterHandle, namespace: str, names: Iterable[str], node_name: str,
                restart_never: Collection[str] = ()) -> None:
    """Pods bound to `node_name`; those named in `restart_never` run to completion."""
    in_parallel(lambda name: home.core.create_namespaced_pod(namespace, pod_body(
        name, node_name, "Never" if name in restart_never else "Always")), names)


def delete_pods(cluster: ClusterHandle, namespace: str, names: Iterable[str]) -> None:
    def delete(name: str) -> None:
        try:
            cluster.core.delete_namespaced_pod(name, namespace)
        except ApiException as error:
            if error.status != 404:
                raise
    in_parallel(delete, names)


def listed(lister: Lister) -> dict[str, dict[str, Any]]:
    """Every object of a collection by name, terminating ones included."""
    response = lister(_preload_content=False, _request_timeout=60)
    return {item["metadata"]["name"]: item for item in json.loads(response.data)["items"]}


def home_pods(home: ClusterHandle, namespace: str) -> dict[str, dict[str, Any]]:
    return listed(pods_of(home, namespace))


def remote_pods(remote: ClusterHandle, twin: str) -> dict[str, dict[str, Any]]:
    return listed(pods_of(remote, twin))


def shadow_pods(remote: ClusterHandle, twin: str) -> dict[str, dict[str, Any]]:
    return listed(shadow_pods_of(remote, twin))


def live(objects: dict[str, dict[str, Any]]) -> set[str]:
    return {name for name, item in objects.items()
            if not item["metadata"].get("deletionTimestamp")}


def phase(item: dict[str, Any]) -> str:
    return str((item.get("status") or {}).get("phase") or "")


def divergence(home: ClusterHandle, remote: ClusterHandle, namespace: str, twin: str,
               expected: set[str], terminal: Collection[str] = ()) -> str:
    """What keeps the two sides from holding exactly `expected`, nothing terminating left over,
    each pod Running (and Ready at home) on both sides but the `terminal` ones, which are
    Succeeded on both sides; "" once converged."""
    at_home = home_pods(home, namespace)
    shadows, pods = shadow_pods(remote, twin), remote_pods(remote, twin)
    problems = []
    for side, objects in (("home pods", at_home), ("ShadowPods", shadows),
                          ("remote pods", pods)):
        if set(objects) != expected or live(objects) != expected:
            problems.append(f"{side}: missing {sorted(expected - live(objects))[:5]}, extra "
                            f"{sorted(set(objects) - expected)[:5]}, terminating "
                            f"{sorted(set(objects) - live(objects))[:5]}")
    for name in sorted(expected & set(at_home) & set(pods)):
        wanted = "Succeeded" if name in terminal else "Running"
        if (phase(pods[name]), phase(at_home[name])) != (wanted, wanted) or (
                wanted == "Running" and not running_and_ready(at_home[name])):
            problems.append(f"{name}: remote {phase(pods[name])}, home {phase(at_home[name])} "
                            f"(ready: {running_and_ready(at_home[name])}), wanted {wanted}")
    return "; ".join(problems[:10])


def wait_converged(home: ClusterHandle, remote: ClusterHandle, namespace: str, twin: str,
                   expected: set[str], message: str, terminal: Collection[str] = (),
                   timeout: float = 180) -> None:
    """Wait until `divergence` is empty; say what was left when it does not get there."""
    try:
        wait_for(lambda: not divergence(home, remote, namespace, twin, expected, terminal),
                 timeout=timeout, interval=0.2)
    except WaitTimeout as error:
        left = divergence(home, remote, namespace, twin, expected, terminal)
        raise WaitTimeout(f"{message}: {left}") from error
