"""ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, GA in v1.30): what they match,
what their CEL sees, and how a refusal reads, through the API as on a real server.

Each test's policy selects only the test's namespace, so the shared cluster's other tests never
meet it. A real server enforces a policy once its informers saw it: the first refusal is waited
for.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim import rest

pytestmark = pytest.mark.since("1.30", "ValidatingAdmissionPolicy v1 is served")

CONFIGMAPS = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
              "operations": ["CREATE", "UPDATE", "DELETE"]}
Install = Callable[..., str]


@pytest.fixture
def install(home: Any, namespace: str) -> Iterator[Install]:
    """Installs a policy of `spec` and its binding (named as the policy unless `binding` says),
    confined to the test's namespace; both deleted afterwards."""
    api = client.AdmissionregistrationV1Api(home.api_client)
    made: list[str] = []

    def make(spec: dict[str, Any], binding: str = "", actions: tuple[str, ...] = ("Deny",),
             binding_spec: dict[str, Any] | None = None) -> str:
        name = f"p-{uuid.uuid4().hex[:8]}"
        constraints = {"resourceRules": [CONFIGMAPS], **spec.pop("matchConstraints", {}),
                       "namespaceSelector": {"matchLabels": {
                           "kubernetes.io/metadata.name": namespace}}}
        api.create_validating_admission_policy({"metadata": {"name": name}, "spec": {
            "matchConstraints": constraints, **spec}})
        made.append(name)
        api.create_validating_admission_policy_binding({
            "metadata": {"name": binding or name},
            "spec": {"policyName": name, "validationActions": list(actions),
                     **(binding_spec or {})}})
        return name

    yield make
    for name in made:
        for delete in (api.delete_validating_admission_policy_binding,
                       api.delete_validating_admission_policy):
            try:
                delete(name)
            except ApiException as error:
                if error.status != 404:
                    raise


def config_map(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, **({"data": data} if data else {})}


def refusal(write: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    """The status of the write's refusal, waited for (a real server's policy takes effect once
    its informer has it: a test's first refusal is a dry run, which passing changes nothing)."""
    def refused() -> tuple[int, dict[str, Any]] | None:
        try:
            write()
        except ApiException as error:
            status = json.loads(error.body)
            assert "ValidatingAdmissionPolicy" in status["message"], status
            return error.status, status
        return None
    return wait_for(refused, message="the write was never refused")


def test_a_failed_validation_is_refused_naming_the_policy_the_binding_and_its_reason(
        home: Any, namespace: str, install: Install) -> None:
    policy = install({"validations": [{
        "expression": "object.data.mode == 'safe'", "reason": "Forbidden",
        "message": "only safe configurations"}]}, binding="safe-only")
    code, status = refusal(lambda: home.core.create_namespaced_config_map(
        namespace, config_map("risky", mode="risky"), dry_run="All"))
    denial = f"ValidatingAdmissionPolicy '{policy}' with binding 'safe-only' denied request: " \
             "only safe configurations"
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == f'configmaps "risky" is forbidden: {denial}'
    assert status["details"]["causes"] == [{"message": denial}]
    home.core.create_namespaced_config_map(namespace, config_map("fine", mode="safe"))


def test_without_a_reason_the_refusal_is_invalid_and_without_a_message_names_the_expression(
        home: Any, namespace: str, install: Install) -> None:
    install({"validations": [
        {"expression": "has(object.data)"},
        {"expression": "object.data.size() < 2",
         "messageExpression": "'too many keys: ' + string(object.data.size())"}]})
    code, status = refusal(lambda: home.core.create_namespaced_config_map(
        namespace, config_map("empty"), dry_run="All"))
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"].endswith("denied request: failed expression: has(object.data)")
    _, status = refusal(lambda: home.core.create_namespaced_config_map(
        namespace, config_map("big", a="1", b="2")))
    assert status["message"].endswith("denied request: too many keys: 2")


def test_the_request_the_old_object_and_the_namespace_are_what_expressions_see(
        home: Any, namespace: str, install: Install) -> None:
    home.core.patch_namespace(namespace, {"metadata": {"labels": {"tier": "gold"}}})
    install({
        "variables": [{"name": "tier", "expression": "namespaceObject.metadata.labels.tier"}],
        "validations": [
            {"expression": "request.operation != 'CREATE' || oldObject == null"},
            {"expression": "request.operation != 'DELETE' || object == null"},
            {"expression": "request.operation != 'UPDATE' || "
                           "object.data.owner == oldObject.data.owner",
             "message": "the owner stays"},
            {"expression": "request.operation == 'DELETE' || object.data.tier == variables.tier",
             "messageExpression": "request.userInfo.username + ' wrote tier ' + "
                                  "object.data.tier + ' into ' + request.namespace + '/' + "
                                  "request.name + ' (' + request.resource.resource + ')'"},
            {"expression": "request.operation != 'DELETE' || "
                           "!has(oldObject.metadata.labels) || "
                           "!('keep' in oldObject.metadata.labels)",
             "message": "kept"}]})
    # a dry run until the policy refuses: before it does (on a real server, until its
    # informers have the policy), the create would pass
    _, status = refusal(lambda: home.core.create_namespaced_config_map(
        namespace, config_map("c", tier="silver"), dry_run="All"))
    assert status["message"].endswith(f" wrote tier silver into {namespace}/c (configmaps)")
    home.core.create_namespaced_config_map(namespace, config_map("c", owner="me", tier="gold"))
    _, status = refusal(lambda: home.core.patch_namespaced_config_map(
        "c", namespace, {"data": {"owner": "you"}}))
    assert status["message"].endswith("denied request: the owner stays")
    home.core.patch_namespaced_config_map("c", namespace, {"metadata": {"labels": {"keep": ""}}})
    _, status = refusal(lambda: home.core.delete_namespaced_config_map("c", namespace))
    assert status["message"].endswith("denied request: kept")
    home.core.patch_namespaced_config_map("c", namespace, {"metadata": {"labels": None}})
    home.core.delete_namespaced_config_map("c", namespace)


def test_match_conditions_selectors_and_resource_names_decide_what_a_policy_sees(
        home: Any, namespace: str, install: Install) -> None:
    install({"matchConstraints": {
                "resourceRules": [{**CONFIGMAPS, "resourceNames": ["a", "b", "c"]}],
                "objectSelector": {"matchLabels": {"checked": "yes"}}},
             "matchConditions": [{"name": "not-b", "expression": "object.metadata.name != 'b'"}],
             "validations": [{"expression": "false", "message": "refused"}]})
    checked = {"checked": "yes"}
    refusal(lambda: home.core.create_namespaced_config_map(namespace, config_map("a", checked),
                                                           dry_run="All"))
    home.core.create_namespaced_config_map(namespace, config_map("b", checked))  # condition
    home.core.create_namespaced_config_map(namespace, config_map("c"))  # object selector
    home.core.create_namespaced_config_map(namespace, config_map("d", checked))  # name
    other = f"t-{uuid.uuid4().hex[:10]}"  # namespace selector
    home.core.create_namespace({"metadata": {"name": other}})
    try:
        home.core.create_namespaced_config_map(other, config_map("a", checked))
    finally:
        home.core.delete_namespace(other)


def test_a_binding_narrows_what_its_policy_matches_and_only_deny_refuses(
        home: Any, namespace: str, install: Install) -> None:
    refuse = {"validations": [{"expression": "false", "message": "refused"}]}
    install(dict(refuse), binding_spec={"matchResources": {
        "objectSelector": {"matchLabels": {"bound": "yes"}}}})
    install(dict(refuse), actions=("Warn", "Audit"))
    refusal(lambda: home.core.create_namespaced_config_map(
        namespace, config_map("bound", {"bound": "yes"}), dry_run="All"))
    home.core.create_namespaced_config_map(namespace, config_map("unbound"))


def test_an_expression_that_fails_refuses_unless_the_failure_policy_ignores_it(
        home: Any, namespace: str, install: Install) -> None:
    failing = {"validations": [{"expression": "object.data.missing == 'x'"}]}
    install({**failing, "failurePolicy": "Ignore",
             "matchConstraints": {"objectSelector": {"matchLabels": {"policy": "ignore"}}}})
    install({**failing, "matchConstraints": {"objectSelector": {"matchLabels": {
        "policy": "fail"}}}})
    code, status = refusal(lambda: home.core.create_namespaced_config_map(
        namespace, config_map("fail", {"policy": "fail"}, other="1"), dry_run="All"))
    assert "denied request: expression 'object.data.missing == 'x'' resulted in error" in (
        status["message"]), status
    home.core.create_namespaced_config_map(namespace, config_map("ignore", {"policy": "ignore"},
                                                                 other="1"))


def test_a_policy_whose_expression_does_not_compile_or_a_binding_without_actions_is_invalid(
        home: Any) -> None:
    api = client.AdmissionregistrationV1Api(home.api_client)
    with pytest.raises(ApiException) as refused:
        api.create_validating_admission_policy({"metadata": {"name": "broken"}, "spec": {
            "matchConstraints": {"resourceRules": [CONFIGMAPS]},
            "validations": [{"expression": "object.data =="}]}}, dry_run="All")
    status = json.loads(refused.value.body)
    assert (refused.value.status, status["reason"]) == (422, "Invalid")
    assert [cause["field"] for cause in status["details"]["causes"]] == [
        "spec.validations[0].expression"]
    assert "compilation failed" in status["message"]
    code, status = rest.call(  # (the typed client refuses it before sending)
        home, "POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        {"metadata": {"name": "broken"}, "spec": {"policyName": "broken"}},
        query={"dryRun": "All"})
    assert code == 422
    assert "spec.validationActions: Required value" in status["message"]


def test_a_pod_already_going_is_deleted_again_unadmitted_unless_its_grace_is_shortened(
        home: Any, namespace: str, install: Install) -> None:
    """rest.BeforeDelete: deleting a pod whose graceful deletion is under way changes nothing
    and no validating admission sees it; a delete that shortens its grace period is admitted
    as any other."""
    node = f"ghost-{uuid.uuid4().hex[:6]}"  # no kubelet: its pod stays Terminating
    home.core.create_node({"metadata": {"name": node}})
    try:
        home.core.create_namespaced_pod(namespace, {"metadata": {"name": "going"}, "spec": {
            "nodeName": node, "terminationGracePeriodSeconds": 600,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}})
        home.core.delete_namespaced_pod("going", namespace)
        install({"matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
            "operations": ["DELETE"]}]},
            "validations": [{"expression": "!has(oldObject.metadata.deletionTimestamp)",
                             "message": "already going"}]})
        shorter = iter(range(599, 0, -1))  # each try shortens it, until the policy refuses
        _, status = refusal(lambda: home.core.delete_namespaced_pod(
            "going", namespace, grace_period_seconds=next(shorter)))
        assert status["message"].endswith("denied request: already going")
        going = home.core.delete_namespaced_pod("going", namespace)
        assert going.metadata.deletion_timestamp is not None
    finally:
        home.core.delete_node(node)  # the pod garbage collector removes its pod
