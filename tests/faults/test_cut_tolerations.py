"""A cut longer than the cluster's default toleration (item 2). A NotReady virtual node
is tainted not-ready/unreachable NoExecute, and DefaultTolerationSeconds gives every pod 300 s
of tolerance: the taint manager used to evict the home pods of a long cut, their ReplicaSet to
replace them and the agent to delete their remote pods on reconnection. The pod webhook now
gives pods of offloaded namespaces the VirtualNode's `notReadyTolerationSeconds` instead:

- unset (the default): the pods outlive a cut longer than the cluster's default, and nothing is
  deleted remotely when the link comes back;
- a finite value: the pods are evicted after it (long before the cluster's 300 s), and once the
  link is back their replacements take over remotely.

kubesim shortens the clock: the home cluster's DefaultTolerationSeconds is set to a few seconds
for the first test (a witness pod outside the offloaded namespace shows the default eviction
happened), so the cut lasts past it without waiting five minutes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import ClusterHandle
from tests.e2e.conftest import consumer_user
from tests.faults import fleet
from tests.faults.conftest import System
from tests.helpers import wait_for
from tests.home_agent.play import custom, read_pod
from tests.home_agent.test_remote_health import ready_condition
from tests.home_agent.webhook import mutating_webhook_configuration, webhook_serving

REPLICAS = 2
SHORT_DEFAULT = 3  # seconds: the home cluster's DefaultTolerationSeconds in the first test
FINITE = 2  # seconds: the VirtualNode's setting in the second test (the cluster's stays 300)
HEALTH_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
VIRTUAL_NODE_TOLERATION = {"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists",
                           "effect": "NoExecute"}
WEB = {"app": "web"}

pytestmark = pytest.mark.kubesim_only(reason="cuts the agent off the remote API server "
                                             "(faults.refuse, faults.blackhole) and shortens the "
                                             "home API server's default tolerations (its "
                                             "DefaultTolerationSeconds plugin), neither of which "
                                             "a real API server can be told to do")


@pytest.fixture
def steered(home: ClusterHandle, system: Any, tmp_path: Path) -> Iterator[Any]:
    """steered() → a `System` whose agent also serves the pod webhook for its namespace."""
    registered: list[str] = []
    registrations = client.AdmissionregistrationV1Api(home.api_client)

    def start() -> System:
        serving = webhook_serving(tmp_path)
        running: System = system(*serving.flags)
        wait_for(lambda: home.core.read_namespace(running.namespace).metadata.labels.get(
            "liqo.io/scheduling-enabled") == "true", timeout=30, message="namespace labelled")
        name = f"annex-faults-{running.namespace}"
        registrations.create_mutating_webhook_configuration(
            mutating_webhook_configuration(name, serving, running.namespace))
        registered.append(name)
        return running

    yield start
    for name in registered:
        registrations.delete_mutating_webhook_configuration(name)


@pytest.fixture
def short_default_tolerations(home: ClusterHandle) -> Iterator[None]:
    """The home cluster's DefaultTolerationSeconds (kube-apiserver's
    --default-not-ready-toleration-seconds and --default-unreachable-...) at SHORT_DEFAULT."""
    plugin = home.sim.api.admission.default_tolerations
    previous = dict(plugin.seconds)
    home.run(lambda: setattr(plugin, "seconds", dict.fromkeys(previous, SHORT_DEFAULT)))
    yield
    home.run(lambda: setattr(plugin, "seconds", previous))


@pytest.fixture
def witness_namespace(home: ClusterHandle, namespace: str) -> Iterator[str]:
    """A namespace that is not offloaded: its pods keep the cluster's default tolerations."""
    name = f"{namespace}-w"
    home.core.create_namespace({"metadata": {"name": name}})
    yield name
    home.core.delete_namespace(name)


def create_web(home: ClusterHandle, namespace: str) -> None:
    """Plain pods (no toleration, no affinity): the webhook steers them onto the virtual node."""
    client.AppsV1Api(home.api_client).create_namespaced_deployment(namespace, {
        "metadata": {"name": "web"},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": WEB},
                 "template": {"metadata": {"labels": WEB},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}})


def running_web(home: ClusterHandle, remote: ClusterHandle, running: System, count: int,
                message: str, excluding: frozenset[str] = frozenset()) -> frozenset[str]:
    """Wait for `count` web pods (not among `excluding`) offloaded and Running; their names."""
    names = wait_for(lambda: len(
        found := frozenset(fleet.home_pods(home, running.namespace)) - excluding) == count
        and found, timeout=60, message=f"{message}: {count} pods at home")
    fleet.wait_converged(home, remote, running.namespace, running.twin, set(names), message)
    return names


def health_tolerations(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in pod["spec"].get("tolerations") or [] if t.get("key") in HEALTH_TAINTS]


def node_tainted(home: ClusterHandle, node: str) -> bool:
    taints = home.core.read_node(node).spec.taints or []
    return any(t.key in HEALTH_TAINTS and t.effect == "NoExecute" for t in taints)


def going(home: ClusterHandle, namespace: str, name: str) -> bool:
    """Deleted or being deleted."""
    try:
        return bool(read_pod(home, namespace, name)["metadata"].get("deletionTimestamp"))
    except ApiException as error:
        if error.status == 404:
            return True
        raise


def test_by_default_offloaded_pods_outlive_a_cut_longer_than_the_default_toleration(
        home: ClusterHandle, remote: ClusterHandle, steered: Any,
        short_default_tolerations: None, witness_namespace: str) -> None:
    running = steered()
    node, namespace = running.agent.node_name, running.namespace
    create_web(home, namespace)
    names = running_web(home, remote, running, REPLICAS, "web offloaded")
    uids = {name: read_pod(home, namespace, name)["metadata"]["uid"] for name in names}
    for name in names:  # the webhook's tolerations replaced DefaultTolerationSeconds' ones
        assert health_tolerations(read_pod(home, namespace, name)) == [
            {"key": key, "operator": "Exists", "effect": "NoExecute"} for key in HEALTH_TAINTS]
    for pod in fleet.remote_pods(remote, running.twin).values():  # the provider's own defaults
        assert health_tolerations(pod) and all(
            t.get("tolerationSeconds") is not None for t in health_tolerations(pod))
    # A pod of a namespace that is not offloaded, on the same node, with the cluster's default.
    home.core.create_namespaced_pod(witness_namespace, {
        "metadata": {"name": "witness"},
        "spec": {"nodeName": node, "tolerations": [VIRTUAL_NODE_TOLERATION],
                 "containers": [{"name": "main", "image": "nginx:1.25"}]}})
    assert {t.get("tolerationSeconds") for t in health_tolerations(
        read_pod(home, witness_namespace, "witness"))} == {SHORT_DEFAULT}

    faults = remote.sim.faults
    faults.refuse(user=consumer_user(running.agent.home_id))
    try:
        wait_for(lambda: node_tainted(home, node), timeout=30,
                 message="the virtual node NotReady and tainted NoExecute")
        wait_for(lambda: going(home, witness_namespace, "witness"), timeout=60,
                 message="the default toleration ran out: the witness is evicted")
        at_home = fleet.home_pods(home, namespace)
        assert {name: pod["metadata"]["uid"] for name, pod in at_home.items()} == uids
        assert not any(pod["metadata"].get("deletionTimestamp") for pod in at_home.values())
        # A home change during the cut, to know when the agent has caught up afterwards.
        client.AppsV1Api(home.api_client).patch_namespaced_deployment_scale(
            "web", namespace, {"spec": {"replicas": REPLICAS + 1}})
    finally:
        faults.restore()
    wait_for(lambda: ready_condition(home, node).status == "True", timeout=30,
             message="Ready again")
    running_web(home, remote, running, REPLICAS + 1, "the scale-up applied after the cut")
    assert {name: read_pod(home, namespace, name)["metadata"]["uid"] for name in names} == uids
    assert running.history.first_deletion("remote/shadowpods") == {}
    assert running.history.first_deletion("remote/pods") == {}


def test_a_finite_toleration_restores_eviction_after_it(
        home: ClusterHandle, remote: ClusterHandle, steered: Any) -> None:
    running = steered()
    node, namespace = running.agent.node_name, running.namespace
    custom(home).create_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", namespace, "virtualnodes", {
            "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
            "metadata": {"name": "provider"},
            "spec": {"clusterId": running.agent.remote_id, "notReadyTolerationSeconds": FINITE}})
    wait_for(lambda: (custom(home).get_namespaced_custom_object(
        "offloading.liqo.io", "v1beta1", namespace, "virtualnodes", "provider").get("status")
        or {}).get("nodeName") == node, timeout=30, message="the agent follows the VirtualNode")
    create_web(home, namespace)
    evicted = running_web(home, remote, running, REPLICAS, "web offloaded")
    for name in evicted:
        assert health_tolerations(read_pod(home, namespace, name)) == [
            {"key": key, "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": FINITE} for key in HEALTH_TAINTS]

    faults = remote.sim.faults
    faults.refuse(user=consumer_user(running.agent.home_id))
    try:
        # Long before the cluster's own 300 s.
        wait_for(lambda: all(going(home, namespace, name) for name in evicted), timeout=60,
                 message=f"the web pods evicted {FINITE} s into the cut")
        for name in evicted:
            conditions = read_pod(home, namespace, name)["status"].get("conditions") or []
            assert {"type": "DisruptionTarget", "reason": "DeletionByTaintManager"}.items() <= (
                next(c for c in conditions if c["type"] == "DisruptionTarget").items())
    finally:
        faults.restore()
    wait_for(lambda: ready_condition(home, node).status == "True", timeout=30,
             message="Ready again")
    replacements = running_web(home, remote, running, REPLICAS, "the replacements offloaded",
                               excluding=evicted)
    assert not replacements & evicted
    assert set(running.history.first_deletion("remote/shadowpods")) == evicted
