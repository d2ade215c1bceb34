"""Many offloaded pods at once: creating and deleting them in parallel, reading both sides in
one request each (raw JSON: deserializing hundreds of pods into models costs more than the
test), and the convergence the fault tests wait for."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY, running_and_ready
from tests.faults.history import DELETE_AT_HOME, Lister, pods_of, shadow_pods_of
from tests.finish import finishing_container
from tests.helpers import WaitTimeout, wait_for

LABELS = {"app": "fleet"}
PARALLEL_REQUESTS = 8


def pod_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{index:04d}" for index in range(count)]


def pod_body(name: str, node_name: str, exit_code: int | None = None) -> dict[str, Any]:
    """A pod bound to the virtual node, as the scheduler leaves a pod of a Remote-offloaded
    namespace (binding is not what these tests are about): a server, or with an `exit_code` a
    job that is never restarted and ends with that code once `tests.finish.finish` says so."""
    container = ({"name": "main", "image": "nginx:1.25"} if exit_code is None
                 else finishing_container(exit_code))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": LABELS},
            "spec": {"nodeName": node_name,
                     "restartPolicy": "Always" if exit_code is None else "Never",
                     "containers": [container], **REMOTE_STRATEGY}}


BATCH = 25
"""Operations of a burst sent at once."""

Plan = list[list[tuple[str, str]]]
"""A burst: batches of ("create" | "delete", pod name)."""


def burst_plan(rng: random.Random, names: list[str], deletions: int) -> Plan:
    """Every pod created in order, `deletions` of them deleted at a random later batch than
    their creation's."""
    doomed = set(rng.sample(names, deletions))
    timed: list[tuple[int, int, str, str]] = []
    for index, name in enumerate(names):
        timed.append((index, 0, "create", name))
        if name in doomed:
            timed.append((index + rng.randint(BATCH, 6 * BATCH), 1, "delete", name))
    timed.sort()
    operations = [(action, name) for _, _, action, name in timed]
    return [operations[i:i + BATCH] for i in range(0, len(operations), BATCH)]


def still_planned(plan: Plan, index: int) -> set[str]:
    """The pods batches from `index` on create or delete."""
    return {name for batch in plan[index:] for _, name in batch}


def deleted_by(plan: Plan, index: int) -> set[str]:
    """The pods batches up to `index` delete (their remote pods may still run a while)."""
    return {name for batch in plan[:index + 1] for action, name in batch if action == "delete"}


def run_burst(home: ClusterHandle, system: Any, plan: Plan,
              after_batch: Callable[[int], None]) -> set[str]:
    """Send the plan's batches to `system` (a conftest.System) one after the other, calling
    `after_batch(index)` after each (where faults strike); the deletions are logged in its
    history. Returns the pods deleted."""
    deleted: set[str] = set()
    for index, batch in enumerate(plan):
        create_pods(home, system.namespace, [n for action, n in batch if action == "create"],
                    system.agent.node_name)
        doomed = [name for action, name in batch if action == "delete"]
        system.history.action(DELETE_AT_HOME, doomed)
        delete_pods(home, system.namespace, doomed)
        deleted |= set(doomed)
        after_batch(index)
    return deleted


def in_parallel(action: Callable[[str], Any], names: Iterable[str]) -> None:
    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        for _ in pool.map(action, names):
            pass


def create_pods(home: ClusterHandle, namespace: str, names: Iterable[str], node_name: str,
                jobs: Mapping[str, int] | None = None) -> None:
    """Pods bound to `node_name`; those named in `jobs` are jobs ending with the exit code
    given there (`pod_body`)."""
    in_parallel(lambda name: home.core.create_namespaced_pod(namespace, pod_body(
        name, node_name, (jobs or {}).get(name))), names)


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


@dataclass(frozen=True)
class Expected:
    """What both sides converge to: `pods` exist at home and have a ShadowPod; each runs
    remotely and at home, but `finished` ones, which ended in the given phase on both sides;
    `collected` ones of those have no remote pod any more (as the pod garbage collector
    leaves terminated pods)."""

    pods: set[str]
    finished: Mapping[str, str] = field(default_factory=dict)
    collected: set[str] = field(default_factory=set)


def divergence(home: ClusterHandle, remote: ClusterHandle, namespace: str, twin: str,
               expected: Expected) -> str:
    """What keeps the two sides from `expected`, with nothing terminating left over; "" once
    they hold exactly that."""
    at_home = home_pods(home, namespace)
    shadows, pods = shadow_pods(remote, twin), remote_pods(remote, twin)
    problems = []
    for side, objects, wanted in (
            ("home pods", at_home, expected.pods), ("ShadowPods", shadows, expected.pods),
            ("remote pods", pods, expected.pods - expected.collected)):
        if set(objects) != wanted or live(objects) != wanted:
            problems.append(f"{side}: missing {sorted(wanted - live(objects))[:5]}, extra "
                            f"{sorted(set(objects) - wanted)[:5]}, terminating "
                            f"{sorted(set(objects) - live(objects))[:5]}")
    for name in sorted(expected.pods & set(at_home)):
        wanted_phase = expected.finished.get(name, "Running")
        remote_phase = phase(pods[name]) if name in pods else wanted_phase
        ready = wanted_phase != "Running" or running_and_ready(at_home[name])
        if (remote_phase, phase(at_home[name]), ready) != (wanted_phase, wanted_phase, True):
            problems.append(f"{name}: remote {remote_phase}, home {phase(at_home[name])} "
                            f"(ready: {ready}), wanted {wanted_phase}")
    return "; ".join(problems[:10])


def wait_converged(home: ClusterHandle, remote: ClusterHandle, namespace: str, twin: str,
                   expected: Expected | set[str], message: str, timeout: float = 180) -> None:
    """Wait until `divergence` is empty (a set: those pods, all running); say what was left
    when it does not get there."""
    if not isinstance(expected, Expected):
        expected = Expected(expected)
    try:
        wait_for(lambda: not divergence(home, remote, namespace, twin, expected),
                 timeout=timeout, interval=0.2)
    except WaitTimeout as error:
        left = divergence(home, remote, namespace, twin, expected)
        raise WaitTimeout(f"{message}: {left}") from error
