"""TokenRequest tokens and RBAC confinement, through the API (also on real clusters)."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import pod_manifest


def client_with_token(home: Any, token: str) -> client.ApiClient:
    configuration = copy.copy(home.api_client.configuration)
    configuration.refresh_api_key_hook = None  # it would put the kubeconfig's token back
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    configuration.cert_file = configuration.key_file = None
    return client.ApiClient(configuration)


def request_token(home: Any, namespace: str, account: str, **spec: Any) -> Any:
    return home.core.create_namespaced_service_account_token(
        account, namespace, {"spec": spec})


@pytest.fixture
def other_namespace(home: Any) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    home.core.create_namespace({"metadata": {"name": name}})
    yield name
    home.core.delete_namespace(name)


def forbidden(action: Any) -> Any:
    with pytest.raises(ApiException) as error:
        action()
    assert error.value.status == 403
    return json.loads(error.value.body)


def test_token_request_returns_a_token_with_audiences_and_expiry(home, namespace) -> None:
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    answer = request_token(home, namespace, "robot", expirationSeconds=900)
    assert answer.status.token
    assert answer.status.expiration_timestamp is not None
    assert answer.spec.expiration_seconds == 900
    assert answer.spec.audiences  # the API server's own audiences by default
    with pytest.raises(ApiException) as too_short:
        request_token(home, namespace, "robot", expirationSeconds=599)
    assert too_short.value.status == 422
    assert "may not specify a duration less than 10 minutes" in json.loads(
        too_short.value.body)["message"]


def test_service_account_is_confined_to_the_namespaces_it_is_bound_in(
        home, namespace, other_namespace) -> None:
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "robot-reads-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": namespace}]})
    token = request_token(home, namespace, "robot").status.token
    with client_with_token(home, token) as robot_client:
        robot = client.CoreV1Api(robot_client)
        user = f"system:serviceaccount:{namespace}:robot"
        wait_for(lambda: robot.list_namespaced_pod(namespace) is not None)
        status = forbidden(lambda: robot.list_namespaced_pod(other_namespace))
        assert status["message"] == (
            f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" '
            f'in the namespace "{other_namespace}"')
        assert status["reason"] == "Forbidden"
        forbidden(lambda: robot.list_pod_for_all_namespaces())
        forbidden(lambda: robot.list_namespaced_config_map(namespace))
        status = forbidden(lambda: robot.delete_namespaced_pod("x", namespace))
        assert status["message"].startswith('pods "x" is forbidden: ')
        # a subresource is named in the sentence, not in the resource the Status is about
        status = forbidden(lambda: robot.patch_namespaced_pod_status(
            "x", namespace, {"status": {"phase": "Failed"}}))
        assert status["message"] == (
            f'pods "x" is forbidden: User "{user}" cannot patch resource "pods/status" in API '
            f'group "" in the namespace "{namespace}"')
        assert status["details"]["kind"] == "pods"


def test_pod_bound_token_dies_with_its_pod(home, namespace) -> None:
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    home.core.create_namespaced_pod(namespace, pod_manifest("holder",
                                                            serviceAccountName="robot"))
    pod = home.core.read_namespaced_pod("holder", namespace)
    token = request_token(home, namespace, "robot", boundObjectRef={
        "kind": "Pod", "apiVersion": "v1", "name": "holder", "uid": pod.metadata.uid}
    ).status.token
    with client_with_token(home, token) as robot_client:
        robot = client.CoreV1Api(robot_client)

        def status_of_a_request() -> int:
            try:
                robot.list_namespaced_pod(namespace)
            except ApiException as error:
                return int(error.status)
            return 200

        assert status_of_a_request() == 403  # authenticated, but not authorized
        home.core.delete_namespaced_pod("holder", namespace, grace_period_seconds=0)
        wait_for(lambda: status_of_a_request() == 401, timeout=60)


def test_cluster_admin_can_be_granted_through_the_bootstrap_cluster_role(home,
                                                                          namespace) -> None:
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    role = rbac.read_cluster_role("cluster-admin")
    assert role.metadata.labels["kubernetes.io/bootstrapping"] == "rbac-defaults"
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "boss"}})
    binding_name = f"boss-{namespace}"
    rbac.create_cluster_role_binding({
        "metadata": {"name": binding_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "boss", "namespace": namespace}]})
    try:
        token = request_token(home, namespace, "boss").status.token
        with client_with_token(home, token) as boss_client:
            boss = client.CoreV1Api(boss_client)
            assert wait_for(lambda: boss.list_node().items)
    finally:
        rbac.delete_cluster_role_binding(binding_name)
