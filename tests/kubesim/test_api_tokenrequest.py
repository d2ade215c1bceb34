"""The TokenRequest subresource (`POST serviceaccounts/{name}/token`) as kube-apiserver serves it
(pkg/registry/core/serviceaccount/storage/token.go): defaults, validation, bound objects and
their errors, RBAC. Also on real clusters. Authentication with the tokens: test_auth_tokens.py."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from annex.tokens import token_claims
from tests.helpers import wait_for
from tests.kubesim.test_auth_tokens import client_with_token
from tests.kubesim.test_controllers_cluster import pod_manifest
from tests.kubesim.version import at_least


def token_request(api_client: client.ApiClient, namespace: str, account: str,
                  body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The raw answer (a dict, as the API server wrote it) and its status code."""
    response = client.CoreV1Api(api_client).create_namespaced_service_account_token(
        account, namespace, body, _preload_content=False)
    return json.loads(response.data), int(response.status)


def refused(api_client: client.ApiClient, namespace: str, account: str,
            body: dict[str, Any]) -> tuple[int, Any]:
    with pytest.raises(ApiException) as error:
        token_request(api_client, namespace, account, body)
    return int(error.value.status), json.loads(error.value.body)


@pytest.fixture
def robot(home: Any, namespace: str) -> str:
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "robot"}})
    return "robot"


ANSWER_NAMED = (1, 31)
"""The answer names the account, its namespace and when it was made (checked against v1.31's
token.go; v1.24 answers with that metadata empty)."""


def seconds_from_now(timestamp: str) -> float:
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return (moment - datetime.now(UTC)).total_seconds()


def test_an_empty_request_gets_an_hour_for_the_api_servers_audiences(home, namespace,
                                                                     robot) -> None:
    answer, status = token_request(home.api_client, namespace, robot, {"spec": {}})
    assert status == 201
    assert answer["kind"] == "TokenRequest"
    assert answer["apiVersion"] == "authentication.k8s.io/v1"
    if at_least(home, ANSWER_NAMED):
        assert answer["metadata"]["name"] == robot
        assert answer["metadata"]["namespace"] == namespace
        assert answer["metadata"]["creationTimestamp"]
    assert answer["spec"]["expirationSeconds"] == 3600
    assert answer["spec"]["audiences"]  # the API server's own
    assert answer["status"]["token"].count(".") == 2  # a JWT
    assert 3600 - 120 < seconds_from_now(answer["status"]["expirationTimestamp"]) <= 3600


def test_audiences_and_lifetime_are_kept(home, namespace, robot) -> None:
    answer, _ = token_request(home.api_client, namespace, robot, {
        "spec": {"audiences": ["vault"], "expirationSeconds": 900}})
    assert answer["spec"]["audiences"] == ["vault"]
    assert answer["spec"]["expirationSeconds"] == 900
    assert 900 - 120 < seconds_from_now(answer["status"]["expirationTimestamp"]) <= 900


@pytest.mark.parametrize(("seconds", "complaint"), [
    (599, "may not specify a duration less than 10 minutes"),
    (2**32 + 1, "may not specify a duration larger than 2^32 seconds"),
])
def test_a_lifetime_out_of_bounds_is_invalid(home, namespace, robot, seconds: int,
                                             complaint: str) -> None:
    status, body = refused(home.api_client, namespace, robot,
                           {"spec": {"expirationSeconds": seconds}})
    assert status == 422
    assert body["message"] == (f'TokenRequest.authentication.k8s.io "" is invalid: '
                               f"spec.expirationSeconds: Invalid value: {seconds}: {complaint}")
    assert body["details"]["causes"][0]["field"] == "spec.expirationSeconds"


@pytest.mark.since("1.31", "a TokenRequest naming another account is refused (checked against "
                           "v1.31's token.go; v1.24 ignores the body's name)")
def test_a_body_naming_another_account_is_invalid(home, namespace, robot) -> None:
    status, body = refused(home.api_client, namespace, robot,
                           {"metadata": {"name": "other"}, "spec": {}})
    assert status == 422
    assert body["message"] == (
        f'TokenRequest.authentication.k8s.io "{robot}" is invalid: metadata.name: Invalid value: '
        '"other": must match the service account name if specified')


def test_a_missing_service_account_is_not_found(home, namespace) -> None:
    status, body = refused(home.api_client, namespace, "ghost", {"spec": {}})
    assert status == 404
    assert body["message"] == 'serviceaccounts "ghost" not found'


def _bound(kind: str, name: str, uid: str | None = None, api_version: str = "v1") -> Any:
    ref = {"apiVersion": api_version, "kind": kind, "name": name}
    if uid:
        ref["uid"] = uid
    return {"spec": {"boundObjectRef": ref}}


def test_a_token_bound_to_a_pod_names_its_uid_in_the_claims_not_in_the_answer(
        home, namespace, robot) -> None:
    """token.go looks the pod up and signs its uid into the token; the answer's boundObjectRef
    stays the reference as asked (v1.24 and v1.31 alike)."""
    home.core.create_namespaced_pod(namespace, pod_manifest("holder", serviceAccountName=robot))
    uid = home.core.read_namespaced_pod("holder", namespace).metadata.uid
    answer, _ = token_request(home.api_client, namespace, robot, _bound("Pod", "holder"))
    assert answer["spec"]["boundObjectRef"] == {"apiVersion": "v1", "kind": "Pod",
                                                "name": "holder"}
    claims = token_claims(answer["status"]["token"])
    assert claims is not None
    assert claims["kubernetes.io"]["pod"] == {"name": "holder", "uid": uid}


def test_binding_errors_are_the_api_servers(home, namespace, robot) -> None:
    home.core.create_namespaced_pod(namespace, pod_manifest("holder", serviceAccountName=robot))
    home.core.create_namespaced_pod(namespace, pod_manifest("stranger"))  # runs as default

    status, body = refused(home.api_client, namespace, robot, _bound("Pod", "ghost"))
    assert (status, body["message"]) == (404, 'pods "ghost" not found')

    status, body = refused(home.api_client, namespace, robot, _bound("Pod", "stranger"))
    assert (status, body["message"]) == (400, 'cannot bind token for serviceaccount "robot" to '
                                              "pod running with different serviceaccount name.")

    status, body = refused(home.api_client, namespace, robot,
                           _bound("Pod", "holder", uid="not-its-uid"))
    assert status == 409
    assert body["message"] == (
        'Operation cannot be fulfilled on Pod "holder": the UID in the bound object reference '
        "(not-its-uid) does not match the UID in record. The object might have been deleted "
        "and then recreated")

    status, body = refused(home.api_client, namespace, robot,
                           _bound("ConfigMap", "kube-root-ca.crt"))
    assert (status, body["message"]) == (400, "cannot bind token to object of type "
                                              "/v1, Kind=ConfigMap")
    status, body = refused(home.api_client, namespace, robot,
                           _bound("Deployment", "x", api_version="apps/v1"))
    assert (status, body["message"]) == (400, "cannot bind token to object of type "
                                              "apps/v1, Kind=Deployment")


def test_a_secret_bound_token_stops_working_with_its_secret(home, namespace, robot) -> None:
    home.core.create_namespaced_secret(namespace, {"metadata": {"name": "anchor"}})
    answer, _ = token_request(home.api_client, namespace, robot, _bound("Secret", "anchor"))
    with client_with_token(home, answer["status"]["token"]) as robot_client:
        core = client.CoreV1Api(robot_client)

        def status_of_a_request() -> int:
            try:
                core.list_namespaced_pod(namespace)
            except ApiException as error:
                return int(error.status)
            return 200

        assert status_of_a_request() == 403  # authenticated as the account, not authorized
        home.core.delete_namespaced_secret("anchor", namespace)
        wait_for(lambda: status_of_a_request() == 401, timeout=60,
                 message="the token refused once its Secret is gone")


def test_requesting_a_token_needs_create_on_serviceaccounts_token(home, namespace,
                                                                  robot) -> None:
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "caller"}})
    answer, _ = token_request(home.api_client, namespace, "caller", {"spec": {}})
    caller_token = answer["status"]["token"]
    user = f"system:serviceaccount:{namespace}:caller"
    with client_with_token(home, caller_token) as caller:
        status, body = refused(caller, namespace, robot, {"spec": {}})
        assert status == 403
        assert body["message"] == (
            f'serviceaccounts "{robot}" is forbidden: User "{user}" cannot create resource '
            f'"serviceaccounts/token" in API group "" in the namespace "{namespace}"')
        rbac = client.RbacAuthorizationV1Api(home.api_client)
        rbac.create_namespaced_role(namespace, {
            "metadata": {"name": "token-maker"},
            "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                       "verbs": ["create"]}]})
        rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": "caller-makes-tokens"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "token-maker"},
            "subjects": [{"kind": "ServiceAccount", "name": "caller", "namespace": namespace}]})

        def allowed() -> bool:
            try:
                token_request(caller, namespace, robot, {"spec": {}})
            except ApiException as error:
                if error.status == 403:  # real clusters' RBAC caches catch up
                    return False
                raise
            return True

        wait_for(allowed, timeout=30, message="the Role lets the caller request tokens")


def _status_with(api_client: client.ApiClient, namespace: str) -> tuple[int, Any]:
    """The status code of a namespaced read, and the body of a refusal."""
    try:
        client.CoreV1Api(api_client).read_namespace(namespace)
    except ApiException as error:
        return int(error.status), json.loads(error.body)
    return 200, None


@pytest.mark.kubesim_only(reason="moves the API server's token clock forward "
                                 "(service_account_tokens.signer)")
def test_a_token_expires_after_its_lifetime_and_a_minute_of_leeway(home, namespace,
                                                                    robot) -> None:
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    rbac.create_cluster_role_binding({
        "metadata": {"name": f"{namespace}-robot-views"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": robot, "namespace": namespace}]})
    signer = home.sim.service_account_tokens.signer
    started = signer.clock()
    answer, _ = token_request(home.api_client, namespace, robot,
                              {"spec": {"expirationSeconds": 600}})
    try:
        with client_with_token(home, answer["status"]["token"]) as robot_client:
            assert _status_with(robot_client, namespace)[0] == 200
            # kube-apiserver validates exp with go-jose's default leeway of one minute.
            signer.clock = lambda: started + 600 + 55
            assert _status_with(robot_client, namespace)[0] == 200
            signer.clock = lambda: started + 600 + 65
            status, body = _status_with(robot_client, namespace)
            assert status == 401
            assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": "Unauthorized",
                            "reason": "Unauthorized", "code": 401}
    finally:
        signer.clock = time.time
        rbac.delete_cluster_role_binding(f"{namespace}-robot-views")
