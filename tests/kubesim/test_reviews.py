"""TokenReview and SubjectAccessReview as a kubelet's Webhook modes call them: a
service-account token reviewed, a bogus one refused, access to a subresource reviewed before and
after a RoleBinding grants it."""

from __future__ import annotations

from kubernetes import client

from tests.helpers import wait_for


def _account_token(home, namespace: str, name: str) -> str:
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    return str(home.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}).status.token)


def test_a_token_review_names_the_token_s_user_and_refuses_a_bogus_token(home,
                                                                         namespace) -> None:
    token = _account_token(home, namespace, "reviewed")
    reviews = client.AuthenticationV1Api(home.api_client)
    review = reviews.create_token_review({"spec": {"token": token}})
    assert review.status.authenticated is True
    assert review.status.user.username == f"system:serviceaccount:{namespace}:reviewed"
    assert "system:authenticated" in review.status.user.groups
    assert f"system:serviceaccounts:{namespace}" in review.status.user.groups
    bogus = reviews.create_token_review({"spec": {"token": "not-a-token"}})
    assert not bogus.status.authenticated
    assert not bogus.status.user or not bogus.status.user.username


def _may_read_logs(home, namespace: str, user: str) -> bool:
    review = client.AuthorizationV1Api(home.api_client).create_subject_access_review({"spec": {
        "user": user, "groups": ["system:authenticated"],
        "resourceAttributes": {"namespace": namespace, "verb": "get", "resource": "pods",
                               "subresource": "log", "version": "v1"}}})
    return bool(review.status.allowed)


def test_a_subject_access_review_follows_rbac(home, namespace) -> None:
    user = f"system:serviceaccount:{namespace}:reader"
    assert not _may_read_logs(home, namespace, user)
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": "log-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "log-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "log-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]})
    wait_for(lambda: _may_read_logs(home, namespace, user), message="the binding takes effect")


def test_reviews_need_create_on_them(home, namespace) -> None:
    token = _account_token(home, namespace, "nobody")
    configuration = home.api_client.configuration.__class__()
    configuration.host = home.api_client.configuration.host
    configuration.ssl_ca_cert = home.api_client.configuration.ssl_ca_cert
    configuration.verify_ssl = home.api_client.configuration.verify_ssl
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(configuration) as api_client:
        try:
            client.AuthenticationV1Api(api_client).create_token_review(
                {"spec": {"token": token}})
        except client.exceptions.ApiException as error:
            assert error.status == 403
            assert "tokenreviews" in error.body
        else:
            raise AssertionError("a token review without the right to create one")
