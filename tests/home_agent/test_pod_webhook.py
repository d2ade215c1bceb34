"""The pod webhook applies the namespace's pod offloading strategy to new pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.play import offload_namespace, read_pod
from tests.home_agent.webhook import mutating_webhook_configuration, webhook_serving

TOLERATION = {"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists",
              "effect": "NoExecute"}
REQUIREMENT = {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}


def create_pod(home: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}})
    return read_pod(home, namespace, name)


@pytest.mark.kubesim_only  # the home API server must reach the agent on loopback
@pytest.mark.parametrize("strategy", ["Remote", "LocalAndRemote", "Local"])
def test_new_pods_get_the_namespace_strategy(home: ClusterHandle, namespace: str,
                                             start_agent: Any, tmp_path: Path,
                                             strategy: str) -> None:
    serving = webhook_serving(tmp_path)
    start_agent(*serving.flags)
    offload_namespace(home, namespace, podOffloadingStrategy=strategy)
    wait_for(lambda: home.core.read_namespace(namespace).metadata.labels.get(
        "liqo.io/scheduling-enabled") == "true", timeout=30,
        message="the agent labels the offloaded namespace for the webhook")
    registrations = client.AdmissionregistrationV1Api(home.api_client)
    name = f"annex-test-{namespace}"
    registrations.create_mutating_webhook_configuration(
        mutating_webhook_configuration(name, serving, namespace))
    try:
        pod = create_pod(home, namespace, "web")
    finally:
        registrations.delete_mutating_webhook_configuration(name)
    spec = pod["spec"]
    tolerated = TOLERATION in (spec.get("tolerations") or [])
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms") or []
    required = any(REQUIREMENT in (t.get("matchExpressions") or []) for t in terms)
    assert (tolerated, required) == {"Remote": (True, True), "LocalAndRemote": (True, False),
                                     "Local": (False, False)}[strategy]
