"""End to end: service-account token reflection, with the remote
enforcer and the home agent as real processes. An offloaded pod's remote copy reads its token
from a Secret in the twin namespace: a home-cluster token bound to the home pod, with the home
namespace beside it, refreshed before it expires, gone with the pod, and never there with
`--enable-apiserver-support=false`."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shared.forge.pod_tokens import service_account_token_key
from tests.conftest import ClusterHandle
from tests.e2e.conftest import Peer
from tests.e2e.test_offloading import REMOTE_STRATEGY, offloaded, remote_pods, running_and_ready
from tests.helpers import wait_for
from tests.kubesim.test_auth_tokens import client_with_token

SHORT_LIVED = "short-lived"
TOKEN_KEY = service_account_token_key(SHORT_LIVED, "token")


def token_pod(name: str) -> dict[str, Any]:
    """A pod projecting (besides the default kube-api-access volume) a 10-minute token: the
    shortest the API server issues, so a small refresh fraction refreshes it in seconds."""
    return {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "app", "image": "nginx:1.25", "volumeMounts": [
            {"name": SHORT_LIVED, "mountPath": "/var/run/secrets/short-lived"}]}],
        "volumes": [{"name": SHORT_LIVED, "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 600, "path": "token"}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                "fieldPath": "metadata.namespace"}}]}}]}}],
        **REMOTE_STRATEGY}}


def token_secret(remote: ClusterHandle, twin: str, pod: str) -> dict[str, str] | None:
    """The pod's token Secret's data, decoded; None when there is none."""
    try:
        secret = remote.core.read_namespaced_secret(f"{pod}-token", twin)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return {key: base64.b64decode(value).decode() for key, value in (secret.data or {}).items()}


def home_user_of(home: ClusterHandle, token: str, namespace: str) -> str:
    """Whom the home API server takes the token for: a fresh namespace's service account may
    not list pods, and the refusal names the user."""
    with client_with_token(home, token) as api_client:
        try:
            client.CoreV1Api(api_client).list_namespaced_pod(namespace)
        except ApiException as error:
            assert error.status == 403, error.body
            message = json.loads(error.body)["message"]
            return str(message.split('User "')[1].split('"')[0])
    raise AssertionError("the default service account was allowed to list pods")


def test_an_offloaded_pod_reads_home_tokens_of_its_service_account_and_its_home_namespace(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()
    twin = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, token_pod("app"))
    data = wait_for(lambda: token_secret(remote, twin, "app"), timeout=60,
                    message="the pod's token Secret in the twin namespace")
    assert data["namespace"] == namespace
    assert home_user_of(home, data[TOKEN_KEY], namespace) == (
        f"system:serviceaccount:{namespace}:default")
    wait_for(lambda: running_and_ready(remote.api_client.sanitize_for_serialization(
        remote.core.read_namespaced_pod("app", twin))), timeout=60,
        message="the remote pod, mounting the Secret, Running and Ready")

    home.core.delete_namespaced_pod("app", namespace)
    wait_for(lambda: token_secret(remote, twin, "app") is None, timeout=60,
             message="the token Secret deleted with the pod")


def advertised_home_apiserver(home: ClusterHandle) -> tuple[set[str], int]:
    """The ready addresses and the https port of the home API servers, as they advertise them
    in the `kubernetes` Service's EndpointSlice (none from an API server that serves only on
    loopback, as the envtest harness's does on a machine without another address: skipped)."""
    slices = client.DiscoveryV1Api(home.api_client).list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes").items
    [primary] = [s for s in slices if s.metadata.name == "kubernetes"] or [None]
    if primary is None or not primary.endpoints:
        pytest.skip("the home API server advertises no address (kube-apiserver publishes none "
                    "for a loopback address)")
    [port] = [p.port for p in primary.ports if p.name == "https"]
    return {e.addresses[0] for e in primary.endpoints if e.conditions.ready is not False}, port


def test_by_default_an_offloaded_pod_reaches_the_home_api_server_it_advertises(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    addresses, port = advertised_home_apiserver(home)
    peer()  # no --home-apiserver-host: as the chart installs the agent by default
    twin = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, token_pod("app"))
    pod = wait_for(lambda: remote_pods(remote, twin).get("app"), timeout=60,
                   message="the remote pod")
    for container in pod.spec.containers:
        env = {e.name: e.value for e in container.env or []}
        assert env["KUBERNETES_SERVICE_HOST"] in addresses, env
        assert env["KUBERNETES_SERVICE_PORT"] == str(port)
        host = env["KUBERNETES_SERVICE_HOST"]
        assert env["KUBERNETES_PORT"] == f"tcp://{f'[{host}]' if ':' in host else host}:{port}"


def test_tokens_are_refreshed_before_they_expire(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer("--token-refresh-fraction", "0.005")  # 3 s into a 10-minute token
    twin = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, token_pod("app"))
    first = wait_for(lambda: token_secret(remote, twin, "app"), timeout=60,
                     message="the pod's token Secret")[TOKEN_KEY]
    refreshed = wait_for(lambda: (token_secret(remote, twin, "app") or {}).get(TOKEN_KEY) not in
                         (None, first) and token_secret(remote, twin, "app"), timeout=60,
                         message="a new token in the Secret")
    assert home_user_of(home, refreshed[TOKEN_KEY], namespace) == (
        f"system:serviceaccount:{namespace}:default")


def test_without_apiserver_support_no_token_leaves_home(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer("--enable-apiserver-support=false")
    twin = offloaded(home, namespace)
    home.core.create_namespaced_pod(namespace, token_pod("app"))
    wait_for(lambda: running_and_ready(remote.api_client.sanitize_for_serialization(
        remote.core.read_namespaced_pod("app", twin))), timeout=60,
        message="the remote pod Running and Ready")
    remote_pod = remote.api_client.sanitize_for_serialization(
        remote.core.read_namespaced_pod("app", twin))
    assert "app-token" not in json.dumps(remote_pod["spec"].get("volumes") or [])
    assert token_secret(remote, twin, "app") is None
