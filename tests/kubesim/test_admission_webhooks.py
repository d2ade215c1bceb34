"""Webhook admission against a real HTTPS webhook server run by the test (trustme certificates).

Clusters on this machine only (kubesim, envtest's control planes): the webhook listens on
loopback.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import trustme
from aiohttp import web
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for

pytestmark = pytest.mark.local_clusters(reason="the API server calls the test's webhook server on "
                                               "loopback")


@dataclass
class WebhookServer:
    """Denies objects labelled deny=yes (403 + message); adds label mutated=yes (JSONPatch)."""

    ca: trustme.CA
    port: int = 0
    reviews: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}/{path}"

    async def validate(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        obj = review["request"]["object"] or {}
        labels = obj.get("metadata", {}).get("labels") or {}
        response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": True}
        if labels.get("deny") == "yes":
            response = {"uid": review["request"]["uid"], "allowed": False,
                        "status": {"code": 403, "reason": "Forbidden",
                                   "message": "objects labelled deny=yes are refused"}}
        return web.json_response({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview", "response": response})

    async def slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(2)  # beyond the 1 s timeoutSeconds
        return await self.validate(request)

    async def mutate(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        labels = (review["request"]["object"].get("metadata") or {}).get("labels")
        operations = ([] if labels else [{"op": "add", "path": "/metadata/labels", "value": {}}])
        operations.append({"op": "add", "path": "/metadata/labels/mutated", "value": "yes"})
        response = {"uid": review["request"]["uid"], "allowed": True, "patchType": "JSONPatch",
                    "patch": base64.b64encode(json.dumps(operations).encode()).decode()}
        return web.json_response({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview", "response": response})


@pytest.fixture(scope="module")
def webhook_server() -> Iterator[WebhookServer]:
    ca = trustme.CA()
    server = WebhookServer(ca)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runner_box: list[web.AppRunner] = []

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/validate", server.validate)
        app.router.add_post("/mutate", server.mutate)
        app.router.add_post("/slow", server.slow)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        context = _server_context(ca)
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        server.port = runner.addresses[0][1]
        runner_box.append(runner)
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
    ready.wait(10)
    yield server
    asyncio.run_coroutine_threadsafe(runner_box[0].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _server_context(ca: trustme.CA) -> Any:
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


def webhook(name: str, url: str, ca_bundle: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["configmaps"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **extra,
    }


PROBE_LABEL = "webhook-probe"


class Registrations:
    """Creates webhook configurations, waits until the API server calls them, and deletes them
    after the test.

    kube-apiserver reads webhook configurations through an informer: one just created is not
    called for a moment. Each configuration gets a sentinel webhook that fails (a CA the server
    does not trust, failurePolicy Fail) for Secrets labelled with the configuration's name only
    (the tests' webhooks never see Secrets); once a dry-run create of such a Secret fails naming
    the sentinel, the whole configuration is in effect. The sentinel never reaches the test's
    webhook server."""

    def __init__(self, home: Any) -> None:
        self.api = client.AdmissionregistrationV1Api(home.api_client)
        self.core = home.core
        self.created: list[tuple[str, str]] = []

    def validating(self, *webhooks: dict[str, Any]) -> None:
        name = f"v-{uuid.uuid4().hex[:8]}"
        self.api.create_validating_webhook_configuration(
            {"metadata": {"name": name}, "webhooks": [*webhooks, self._sentinel(name, webhooks)]})
        self.created.append(("validating", name))
        self._wait_in_effect(name, webhooks)

    def mutating(self, *webhooks: dict[str, Any]) -> None:
        name = f"m-{uuid.uuid4().hex[:8]}"
        self.api.create_mutating_webhook_configuration(
            {"metadata": {"name": name}, "webhooks": [*webhooks, self._sentinel(name, webhooks)]})
        self.created.append(("mutating", name))
        self._wait_in_effect(name, webhooks)

    @staticmethod
    def _sentinel(name: str, webhooks: tuple[dict[str, Any], ...]) -> dict[str, Any]:
        untrusted = base64.b64encode(trustme.CA().cert_pem.bytes()).decode()
        sentinel = webhook(f"{name}.probe.example.com", webhooks[0]["clientConfig"]["url"],
                           untrusted, _namespace_of(webhooks[0]), failurePolicy="Fail",
                           objectSelector={"matchLabels": {PROBE_LABEL: name}})
        sentinel["rules"] = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["secrets"], "scope": "Namespaced"}]
        return sentinel

    def _wait_in_effect(self, name: str, webhooks: tuple[dict[str, Any], ...]) -> None:
        probe = {"metadata": {"generateName": "probe-", "labels": {PROBE_LABEL: name}}}

        def sentinel_called() -> bool:
            try:
                self.core.create_namespaced_secret(_namespace_of(webhooks[0]), probe,
                                                   dry_run="All")
            except ApiException as error:
                message = json.loads(error.body or "{}").get("message", "")
                return f'"{name}.probe.example.com"' in message
            return False

        wait_for(sentinel_called, 30, f"webhook configuration {name} never called")

    def delete_all(self) -> None:
        for kind, name in self.created:
            getattr(self.api, f"delete_{kind}_webhook_configuration")(name)


def _namespace_of(hook: dict[str, Any]) -> str:
    return str(hook["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"])


@pytest.fixture
def registrations(home: Any) -> Iterator[Registrations]:
    registered = Registrations(home)
    yield registered
    registered.delete_all()


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def test_validating_webhook_denial_reaches_the_client_as_the_real_server_words_it(
        home, namespace, webhook_server, registrations) -> None:
    registrations.validating(webhook("deny.example.com", webhook_server.url("validate"),
                                     webhook_server.ca_bundle, namespace))
    with pytest.raises(ApiException) as denied:
        home.core.create_namespaced_config_map(namespace, configmap("bad", deny="yes"))
    assert denied.value.status == 403
    status = json.loads(denied.value.body)
    assert status["message"] == ('admission webhook "deny.example.com" denied the request: '
                                 "objects labelled deny=yes are refused")
    assert status["reason"] == "Forbidden"
    home.core.create_namespaced_config_map(namespace, configmap("good"))
    review = webhook_server.reviews[-1]["request"]
    assert (review["operation"], review["namespace"], review["name"]) == (
        "CREATE", namespace, "good")
    assert review["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert review["userInfo"]["username"]


def test_mutating_webhook_patch_is_applied_before_validation(
        home, namespace, webhook_server, registrations) -> None:
    registrations.mutating(webhook("label.example.com", webhook_server.url("mutate"),
                                   webhook_server.ca_bundle, namespace))
    created = home.core.create_namespaced_config_map(namespace, configmap("plain"))
    assert created.metadata.labels == {"mutated": "yes"}


def test_object_selector_and_other_namespaces_are_not_sent(
        home, namespace, webhook_server, registrations) -> None:
    registrations.validating(webhook("sel.example.com", webhook_server.url("validate"),
                                     webhook_server.ca_bundle, namespace,
                                     objectSelector={"matchLabels": {"checked": "yes"}}))
    # not selected by the object selector: the deny label is never looked at
    home.core.create_namespaced_config_map(namespace, configmap("unchecked", deny="yes"))
    with pytest.raises(ApiException):
        home.core.create_namespaced_config_map(namespace,
                                               configmap("checked", deny="yes", checked="yes"))
    home.core.create_namespaced_config_map("default", configmap(
        f"elsewhere-{uuid.uuid4().hex[:6]}", deny="yes", checked="yes"))


def test_failure_policy_decides_when_the_webhook_cannot_be_called(
        home, namespace, webhook_server, registrations) -> None:
    untrusted = base64.b64encode(trustme.CA().cert_pem.bytes()).decode()
    registrations.validating(webhook("ignore.example.com", webhook_server.url("validate"),
                                     untrusted, namespace, failurePolicy="Ignore"))
    home.core.create_namespaced_config_map(namespace, configmap("tolerated"))
    registrations.validating(webhook("fail.example.com", webhook_server.url("validate"),
                                     untrusted, namespace, failurePolicy="Fail"))
    with pytest.raises(ApiException) as failed:
        home.core.create_namespaced_config_map(namespace, configmap("refused"))
    assert failed.value.status == 500
    assert json.loads(failed.value.body)["message"].startswith(
        'Internal error occurred: failed calling webhook "fail.example.com": ')


def test_timeout_fails_the_call_and_every_v1_webhook_is_free_of_side_effects(
        home, namespace, webhook_server, registrations) -> None:
    with pytest.raises(ApiException) as invalid:
        registrations.validating(webhook("unknown.example.com", webhook_server.url("slow"),
                                         webhook_server.ca_bundle, namespace,
                                         sideEffects="Unknown"))
    assert invalid.value.status == 422
    assert json.loads(invalid.value.body)["message"].endswith(
        'webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", '
        '"NoneOnDryRun"')
    registrations.validating(webhook("slow.example.com", webhook_server.url("slow"),
                                     webhook_server.ca_bundle, namespace, timeoutSeconds=1))
    with pytest.raises(ApiException) as late:
        home.core.create_namespaced_config_map(namespace, configmap("late"))
    assert late.value.status == 500
    assert json.loads(late.value.body)["message"].endswith(": context deadline exceeded")


def test_token_requests_are_admitted_as_token_requests_and_match_conditions_select_users(
        home, namespace, webhook_server, registrations) -> None:
    """A TokenRequest reaches the webhook as itself (kind TokenRequest, subResource token, the
    ServiceAccount's name, the defaults filled in); matchConditions on the username decide
    which requests are sent at all."""
    home.core.create_namespaced_service_account(namespace, {"metadata": {"name": "checked"}})

    def token_hook(name: str, username: str) -> dict[str, Any]:
        hook = webhook(name, webhook_server.url("validate"), webhook_server.ca_bundle,
                       namespace, matchConditions=[{"name": "one-user", "expression": (
                           f"request.userInfo.username == '{username}' && "
                           "request.subResource == 'token'")}])
        hook["rules"] = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                          "resources": ["serviceaccounts/token"], "scope": "Namespaced"}]
        return hook

    request = {"metadata": {"labels": {"deny": "yes"}}, "spec": {"expirationSeconds": 3600}}
    sent = len(webhook_server.reviews)
    registrations.validating(token_hook("others.example.com", "someone-else"))
    # not the user the conditions select: never sent, the deny label never looked at
    home.core.create_namespaced_service_account_token("checked", namespace, request)
    assert len(webhook_server.reviews) == sent
    registrations.validating(token_hook("admin.example.com", "kubernetes-admin"))
    with pytest.raises(ApiException) as denied:
        home.core.create_namespaced_service_account_token("checked", namespace, request)
    assert "objects labelled deny=yes are refused" in json.loads(denied.value.body)["message"]
    review = webhook_server.reviews[-1]["request"]
    assert review["kind"] == {"group": "authentication.k8s.io", "version": "v1",
                              "kind": "TokenRequest"}
    assert review["resource"] == {"group": "", "version": "v1", "resource": "serviceaccounts"}
    assert (review["subResource"], review["name"], review["namespace"]) == (
        "token", "checked", namespace)
    assert review["object"]["spec"]["audiences"]
    # a condition that fails to evaluate fails the request (failurePolicy Fail)
    registrations.validating(webhook(
        "broken.example.com", webhook_server.url("validate"), webhook_server.ca_bundle,
        namespace, matchConditions=[{"name": "missing",
                                     "expression": "object.nothing.here == 'x'"}]))
    with pytest.raises(ApiException) as failed:
        home.core.create_namespaced_config_map(namespace, configmap("unmatched"))
    assert failed.value.status == 403
    assert json.loads(failed.value.body)["message"].startswith(
        'configmaps "unmatched" is forbidden: '
        "expression 'object.nothing.here == 'x'' resulted in error: ")


def test_a_match_condition_that_is_not_a_bool_is_refused(home, namespace, webhook_server,
                                                         registrations) -> None:
    """The condition's type is checked when the configuration is written: a field of `object`
    is dyn, which is not bool."""
    for expression in ("object.metadata.name", "object.spec.paused", "'yes'"):
        with pytest.raises(ApiException) as refused:
            registrations.validating(webhook(
                "typed.example.com", webhook_server.url("validate"), webhook_server.ca_bundle,
                namespace, matchConditions=[{"name": "typed", "expression": expression}]))
        assert refused.value.status == 422
        assert json.loads(refused.value.body)["details"]["causes"] == [{
            "reason": "FieldValueInvalid", "field": "webhooks[0].matchConditions[0].expression",
            "message": f"Invalid value: {json.dumps(expression)}: must evaluate to bool"}]


def test_evictions_are_admitted_as_evictions(
        home, namespace, webhook_server, registrations) -> None:
    hook = webhook("evictions.example.com", webhook_server.url("validate"),
                   webhook_server.ca_bundle, namespace)
    hook["rules"] = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                      "resources": ["pods/eviction"], "scope": "Namespaced"}]
    registrations.validating(hook)
    home.core.create_namespaced_pod(namespace, {"metadata": {"name": "kept"}, "spec": {
        "containers": [{"name": "app", "image": "app:1"}]}})
    with pytest.raises(ApiException) as denied:
        home.core.create_namespaced_pod_eviction("kept", namespace, {
            "metadata": {"name": "kept", "labels": {"deny": "yes"}}})
    assert "objects labelled deny=yes are refused" in json.loads(denied.value.body)["message"]
    review = webhook_server.reviews[-1]["request"]
    assert review["kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert (review["subResource"], review["name"]) == ("eviction", "kept")
    assert home.core.read_namespaced_pod("kept", namespace).metadata.deletion_timestamp is None
