"""The PodSecurity admission plugin through the API, as a real kube-apiserver (>= 1.23) applies
a namespace's pod-security.kubernetes.io labels: enforce refuses, warn answers Warning headers,
bad label values are refused, tightening a namespace warns about the pods already there."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.test_controllers_cluster import pod_manifest

ENFORCE = "pod-security.kubernetes.io/enforce"
RESTRICTED_PLAIN_POD = (
    'allowPrivilegeEscalation != false (container "app" must set '
    'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container '
    '"app" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or '
    'container "app" must set securityContext.runAsNonRoot=true), seccompProfile (pod or '
    'container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
    '"Localhost")')


def label(home: Any, namespace: str, **labels: str) -> list[str]:
    """Set pod-security labels (`enforce="baseline"`, `warn_version="v1.25"`); the warnings."""
    wanted = {"pod-security.kubernetes.io/" + key.replace("_", "-"): value
              for key, value in labels.items()}
    _, _, headers = home.core.patch_namespace_with_http_info(
        namespace, {"metadata": {"labels": wanted}})
    return warnings_in(headers)


def warnings_in(headers: Any) -> list[str]:
    """The texts of the Warning headers (`299 - "text"`, quotes and backslashes escaped)."""
    texts = []
    for value in headers.getlist("Warning"):
        assert value.startswith('299 - "') and value.endswith('"'), value
        texts.append(value[7:-1].replace('\\"', '"').replace("\\\\", "\\"))
    return texts


def refusal(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as refused:
        call()
    return refused.value.status, json.loads(refused.value.body)


def privileged_pod(name: str) -> dict[str, Any]:
    return pod_manifest(name, container={"securityContext": {"privileged": True}})


def restricted_pod(name: str) -> dict[str, Any]:
    return pod_manifest(name, securityContext={
        "runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        container={"securityContext": {"allowPrivilegeEscalation": False,
                                       "capabilities": {"drop": ["ALL"]}}})


def test_enforce_baseline_refuses_a_pod_naming_every_violation(home, namespace) -> None:
    label(home, namespace, enforce="baseline")
    pod = pod_manifest("bad", hostNetwork=True, volumes=[{"name": "host", "hostPath": {
        "path": "/etc"}}], container={"securityContext": {"privileged": True}})
    status, body = refusal(lambda: home.core.create_namespaced_pod(namespace, pod))
    assert status == 403
    assert body["reason"] == "Forbidden"
    assert body["details"] == {"name": "bad", "kind": "pods"}
    assert body["message"] == (
        'pods "bad" is forbidden: violates PodSecurity "baseline:latest": host namespaces '
        '(hostNetwork=true), hostPath volumes (volume "host"), privileged (container "app" must '
        'not set securityContext.privileged=true)')
    home.core.create_namespaced_pod(namespace, pod_manifest("plain"))  # baseline allows it


def test_enforce_restricted_refuses_a_plain_pod_and_admits_a_hardened_one(home, namespace
                                                                          ) -> None:
    label(home, namespace, enforce="restricted")
    status, body = refusal(
        lambda: home.core.create_namespaced_pod(namespace, pod_manifest("plain")))
    assert status == 403
    assert body["message"] == (
        f'pods "plain" is forbidden: violates PodSecurity "restricted:latest": '
        f"{RESTRICTED_PLAIN_POD}")
    created = home.core.create_namespaced_pod(namespace, restricted_pod("hardened"))
    assert created.metadata.name == "hardened"


def test_a_pinned_enforce_version_applies_that_version_of_the_checks(home, namespace) -> None:
    # capabilities_restricted exists since policy version 1.22
    label(home, namespace, enforce="restricted", enforce_version="v1.21")
    _, body = refusal(lambda: home.core.create_namespaced_pod(namespace, pod_manifest("old")))
    assert body["message"] == (
        'pods "old" is forbidden: violates PodSecurity "restricted:v1.21": '
        'allowPrivilegeEscalation != false (container "app" must set '
        'securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or '
        'container "app" must set securityContext.runAsNonRoot=true), seccompProfile (pod or '
        'container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
        '"Localhost")')


def test_warn_mode_admits_the_pod_with_a_warning_header(home, namespace) -> None:
    label(home, namespace, warn="restricted")
    pod, status, headers = home.core.create_namespaced_pod_with_http_info(
        namespace, pod_manifest("warned"))
    assert status == 201 and pod.metadata.name == "warned"
    assert f'would violate PodSecurity "restricted:latest": {RESTRICTED_PLAIN_POD}' in (
        warnings_in(headers))
    _, _, headers = home.core.create_namespaced_pod_with_http_info(
        namespace, restricted_pod("fine"))
    assert not any("PodSecurity" in text for text in warnings_in(headers))


def test_a_refused_pod_gets_no_warning(home, namespace) -> None:
    label(home, namespace, enforce="baseline", warn="restricted")
    with pytest.raises(ApiException) as refused:
        home.core.create_namespaced_pod(namespace, privileged_pod("both"))
    assert refused.value.status == 403
    assert "would violate" not in str(refused.value.headers.get("Warning"))


def test_workload_templates_are_warned_about_never_refused(home, namespace) -> None:
    label(home, namespace, enforce="baseline", warn="baseline")
    template = privileged_pod("web")
    deployment = {"metadata": {"name": "web"}, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": template["metadata"], "spec": template["spec"]}}}
    apps = client.AppsV1Api(home.api_client)
    created, status, headers = apps.create_namespaced_deployment_with_http_info(
        namespace, deployment)
    assert status == 201 and created.metadata.name == "web"
    assert warnings_in(headers) == [
        'would violate PodSecurity "baseline:latest": privileged (container "app" must not set '
        'securityContext.privileged=true)']


def test_invalid_pod_security_labels_are_refused(home, namespace) -> None:
    status, body = refusal(lambda: home.core.create_namespace(
        {"metadata": {"name": f"{namespace}-bad", "labels": {ENFORCE: "strict"}}}))
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        f'Namespace "{namespace}-bad" is invalid: metadata.labels[{ENFORCE}]: Invalid value: '
        '"strict": must be one of privileged, baseline, restricted')
    status, body = refusal(lambda: label(home, namespace, warn_version="1.30"))
    assert status == 422
    assert body["message"] == (
        f'Namespace "{namespace}" is invalid: metadata.labels[pod-security.kubernetes.io/'
        'warn-version]: Invalid value: "1.30": must be "latest" or "v1.x"')


def test_tightening_a_namespace_warns_about_its_pods_and_keeps_them(home, namespace) -> None:
    home.core.create_namespaced_pod(namespace, privileged_pod("priv-a"))
    home.core.create_namespaced_pod(namespace, privileged_pod("priv-b"))
    home.core.create_namespaced_pod(namespace, pod_manifest("plain"))
    assert label(home, namespace, enforce="baseline") == [
        f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level '
        '"baseline:latest"',
        "priv-a (and 1 other pod): privileged"]
    # relaxing warns about nothing
    assert label(home, namespace, enforce="privileged") == []


def test_only_updates_that_change_what_is_checked_are_judged_again(home, namespace) -> None:
    home.core.create_namespaced_pod(namespace, privileged_pod("old"))
    label(home, namespace, enforce="baseline")
    # a label change leaves the pod as it was checked: admitted
    home.core.patch_namespaced_pod("old", namespace, {"metadata": {"labels": {"seen": "yes"}}})
    patch = {"spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}
    status, body = refusal(lambda: home.core.patch_namespaced_pod("old", namespace, patch))
    assert status == 403
    assert body["message"] == (
        'pods "old" is forbidden: violates PodSecurity "baseline:latest": privileged (container '
        '"app" must not set securityContext.privileged=true)')


async def test_controllers_creating_pods_are_judged_like_anyone() -> None:
    """No user is exempt: a pod a ReplicaSet controller creates (generateName, the API server's
    own identity) is refused under its generated name, as FailedCreate events show it."""
    from kubesim.admission import AdmissionPlugins
    from kubesim.apiserver import ApiServer
    from kubesim.errors import StatusError

    api = ApiServer()
    api.admission = AdmissionPlugins(api.store)
    namespaces, accounts, pods = (api.kinds.get("", "v1", plural) for plural in
                                  ("namespaces", "serviceaccounts", "pods"))
    assert namespaces is not None and accounts is not None and pods is not None
    await api.create(namespaces, "", {"metadata": {"name": "apps", "labels": {
        ENFORCE: "baseline"}}})
    await api.create(accounts, "apps", {"metadata": {"name": "default"}})
    pod = privileged_pod("")
    pod["metadata"] = {"generateName": "web-7d4b9c-"}
    with pytest.raises(StatusError) as refused:
        await api.create(pods, "apps", pod)
    assert refused.value.code == 403
    name = refused.value.details["name"]
    assert name.startswith("web-7d4b9c-") and len(name) == len("web-7d4b9c-") + 5
    assert refused.value.message == (
        f'pods "{name}" is forbidden: violates PodSecurity "baseline:latest": privileged '
        '(container "app" must not set securityContext.privileged=true)')
