"""End to end: Liqo's per-pod annotations, carried over. `liqo.io/api-server-support`
(`disabled`: no API server set up; `remote`: the provider's, as an account of the twin
namespace) and `liqo.io/remote-runtime-class-name` (within the provider's podPolicy)."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import ClusterHandle
from tests.e2e.conftest import Peer
from tests.e2e.test_offloading import offloaded, remote_pods, running_and_ready
from tests.e2e.test_reflection_tokens import token_pod, token_secret
from tests.helpers import wait_for
from tests.home_agent.play import read_pod


def annotated_token_pod(name: str, **annotations: str) -> dict[str, Any]:
    pod = token_pod(name)
    pod["metadata"]["annotations"] = annotations
    return pod


def remote_running(remote: ClusterHandle, twin: str, name: str) -> dict[str, Any]:
    """The remote pod `name` once Running and Ready, as a dict."""
    return wait_for(lambda: (pod := remote_pods(remote, twin).get(name)) is not None and (
        running_and_ready(found := remote.api_client.sanitize_for_serialization(pod))) and found,
        timeout=60, message=f"the remote pod {name} Running and Ready")  # type: ignore[no-any-return]


def token_sources(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [source for volume in pod["spec"].get("volumes") or []
            for source in (volume.get("projected") or {}).get("sources") or []
            if "serviceAccountToken" in source]


def env_names(pod: dict[str, Any]) -> set[str]:
    return {variable["name"] for container in pod["spec"]["containers"]
            for variable in container.get("env") or []}


def test_api_server_support_per_pod_home_disabled_and_remote(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    """Three pods projecting the same tokens: unannotated (the home API server, the agent's
    default), `disabled` and `remote`."""
    peer()
    twin = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, token_pod("home-api"))
    home.core.create_namespaced_pod(namespace, annotated_token_pod(
        "no-api", **{"liqo.io/api-server-support": "disabled"}))
    home.core.create_namespaced_pod(namespace, annotated_token_pod(
        "remote-api", **{"liqo.io/api-server-support": "remote"}))

    pointed_home = remote_running(remote, twin, "home-api")
    assert "KUBERNETES_SERVICE_HOST" in env_names(pointed_home)
    assert token_secret(remote, twin, "home-api") is not None

    disabled = remote_running(remote, twin, "no-api")
    assert token_sources(disabled) == []
    assert "no-api-token" not in json.dumps(disabled["spec"]["volumes"])
    assert "KUBERNETES_SERVICE_HOST" not in env_names(disabled)
    assert disabled["spec"]["automountServiceAccountToken"] is False

    provider_api = remote_running(remote, twin, "remote-api")
    assert provider_api["spec"]["serviceAccountName"] == "default"  # the twin namespace's
    assert provider_api["spec"]["automountServiceAccountToken"] is True
    # its projected tokens are the provider's kubelet's to mint, as for any pod there
    assert sorted(s["serviceAccountToken"]["expirationSeconds"]
                  for s in token_sources(provider_api)) == [600, 3607]
    assert "KUBERNETES_SERVICE_HOST" not in env_names(provider_api)
    for name in ("no-api", "remote-api"):
        assert token_secret(remote, twin, name) is None, f"no home token for {name}"
        wait_for(lambda name=name: running_and_ready(read_pod(home, namespace, name)),
                 timeout=60, message=f"{name} Running and Ready at home")


def remote_creation_failure(home: ClusterHandle, namespace: str, name: str) -> str | None:
    """The message of the pod's RemoteCreationFailed condition, None while it has none."""
    status = read_pod(home, namespace, name).get("status") or {}
    return next((c.get("message", "") for c in status.get("conditions") or []
                 if c.get("type") == "RemoteCreationFailed"), None)


def test_what_the_provider_refuses_of_the_annotations_shows_on_the_home_pod(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    """A runtime class the consumer's podPolicy does not allow (none by default), and a remote
    ServiceAccount the twin namespace does not have."""
    peer()
    twin = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, annotated_token_pod(
        "sandboxed", **{"liqo.io/remote-runtime-class-name": "gvisor"}))
    home.core.create_namespaced_pod(namespace, annotated_token_pod(
        "reader", **{"liqo.io/api-server-support": "remote",
                     "liqo.io/remote-service-account-name": "reader"}))
    refused = wait_for(lambda: remote_creation_failure(home, namespace, "sandboxed"), timeout=60,
                       message="the runtime class refused")
    assert 'runtime class "gvisor" is not allowed' in refused
    assert "podPolicy.allowedRuntimeClasses" in refused
    missing = wait_for(lambda: remote_creation_failure(home, namespace, "reader"), timeout=60,
                       message="the missing remote account reported")
    assert 'serviceaccount "reader" not found' in missing
    assert set(remote_pods(remote, twin)) == set()


def test_a_runtime_class_the_provider_allows_runs_the_remote_pod(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    """The provider has the RuntimeClass and lists it in the consumer's
    podPolicy.allowedRuntimeClasses: the annotation names the remote pod's runtime."""
    import uuid

    from kubernetes import client

    from tests.remote_enforcer.test_pod_policy import set_consumer_pod_policy

    agent = peer()
    runtime_class = f"annex-e2e-{uuid.uuid4().hex[:8]}"
    runtime_classes = client.NodeV1Api(remote.api_client)
    runtime_classes.create_runtime_class({"metadata": {"name": runtime_class},
                                          "handler": "runc"})
    try:
        set_consumer_pod_policy(remote, agent.tenant_namespace, agent.home_id,
                                allowedRuntimeClasses=[runtime_class])
        twin = offloaded(home, namespace)
        home.core.create_namespaced_pod(namespace, annotated_token_pod(
            "sandboxed", **{"liqo.io/remote-runtime-class-name": runtime_class}))
        pod = remote_running(remote, twin, "sandboxed")
        assert pod["spec"]["runtimeClassName"] == runtime_class
        assert "runtimeClassName" not in read_pod(home, namespace, "sandboxed")["spec"]
    finally:
        runtime_classes.delete_runtime_class(runtime_class)
