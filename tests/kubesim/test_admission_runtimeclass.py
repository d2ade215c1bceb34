"""RuntimeClass admission on pod creation (also on real clusters): a pod naming a RuntimeClass
that does not exist is refused; the class's overhead becomes the pod's and its scheduling
constraints are merged into the pod's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.helpers import refusal
from tests.kubesim.test_controllers_cluster import pod_manifest


@pytest.fixture
def runtime_class(home: Any) -> Iterator[str]:
    name = f"sandbox-{uuid.uuid4().hex[:8]}"
    api = client.NodeV1Api(home.api_client)
    api.create_runtime_class({
        "metadata": {"name": name}, "handler": "runsc",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
        "scheduling": {"nodeSelector": {"sandbox": "gvisor"},
                       "tolerations": [{"key": "sandbox", "operator": "Exists",
                                        "effect": "NoSchedule"}]}})
    yield name
    api.delete_runtime_class(name)


def test_a_pod_naming_a_missing_runtime_class_is_refused(home: Any, namespace: str) -> None:
    message = refusal(lambda: home.core.create_namespaced_pod(
        namespace, pod_manifest("sandboxed", runtimeClassName="no-such-class")))
    assert message == ('pods "sandboxed" is forbidden: pod rejected: RuntimeClass '
                       '"no-such-class" not found')
    message = refusal(lambda: home.core.create_namespaced_pod(
        namespace, pod_manifest("heavy", overhead={"cpu": "1"})))
    assert message == ('pods "heavy" is forbidden: pod rejected: Pod Overhead set without '
                       'corresponding RuntimeClass defined Overhead')


def test_the_runtime_class_gives_its_overhead_and_scheduling(home: Any, namespace: str,
                                                            runtime_class: str) -> None:
    pod = home.core.create_namespaced_pod(namespace, pod_manifest(
        "sandboxed", runtimeClassName=runtime_class, nodeSelector={"disk": "ssd"}))
    assert pod.spec.overhead == {"cpu": "250m", "memory": "64Mi"}
    assert pod.spec.node_selector == {"disk": "ssd", "sandbox": "gvisor"}
    assert any(t.key == "sandbox" and t.effect == "NoSchedule" for t in pod.spec.tolerations)
    conflict = refusal(lambda: home.core.create_namespaced_pod(namespace, pod_manifest(
        "elsewhere", runtimeClassName=runtime_class, nodeSelector={"sandbox": "kata"})))
    assert conflict == ('pods "elsewhere" is forbidden: conflict: '
                        "runtimeClass.scheduling.nodeSelector[sandbox] = gvisor; "
                        "pod.spec.nodeSelector[sandbox] = kata")
