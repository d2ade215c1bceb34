"""The provider's pod policy: the offloading allow-list, and the Pod Security Standards levels
worded as the PodSecurity admission plugin words them."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.quota import PodPolicy, PodSecurityLevel
from shared.pod_policy import (
    allow_list_violations,
    pod_security_violations,
    policy_problem,
    twin_namespace_labels,
)

PLAIN: dict[str, Any] = {"containers": [{"name": "web", "image": "nginx"}]}
HARDENED: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "web", "image": "nginx", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"],
                                                            "add": ["NET_BIND_SERVICE"]}}}],
    "volumes": [{"name": "data", "emptyDir": {}}, {"name": "token", "projected": {"sources": []}}],
}


def container(**security: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "i", "securityContext": security}]}


@pytest.mark.parametrize(("level", "spec", "expected"), [
    (PodSecurityLevel.BASELINE, PLAIN, []),
    (PodSecurityLevel.RESTRICTED, HARDENED, []),
    (PodSecurityLevel.PRIVILEGED, {**container(privileged=True), "hostNetwork": True}, []),
    (PodSecurityLevel.BASELINE, container(privileged=True),
     ['privileged (container "c" must not set securityContext.privileged=true)']),
    (PodSecurityLevel.BASELINE, {"hostPID": True, "hostIPC": True, **PLAIN},
     ["host namespaces (hostPID=true, hostIPC=true)"]),
    (PodSecurityLevel.BASELINE, {**PLAIN, "volumes": [{"name": "a", "hostPath": {"path": "/"}},
                                                      {"name": "b", "hostPath": {"path": "/x"}}]},
     ['hostPath volumes (volumes "a", "b")']),
    (PodSecurityLevel.BASELINE, container(capabilities={"add": ["CHOWN", "NET_ADMIN"]}),
     ['non-default capabilities (container "c" must not include "NET_ADMIN" in '
      "securityContext.capabilities.add)"]),
    (PodSecurityLevel.BASELINE, {"containers": [{"name": "c", "ports": [{"hostPort": 80}]}]},
     ['hostPort (container "c" uses hostPort 80)']),
    (PodSecurityLevel.BASELINE, {**PLAIN, "securityContext": {"sysctls": [
        {"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.tcp_syncookies"}]}},
     ["forbidden sysctls (kernel.msgmax)"]),
    (PodSecurityLevel.BASELINE, container(procMount="Unmasked"),
     ['procMount (container "c" must not set securityContext.procMount to "Unmasked")']),
    (PodSecurityLevel.RESTRICTED, PLAIN, [
        'allowPrivilegeEscalation != false (container "web" must set '
        "securityContext.allowPrivilegeEscalation=false)",
        'unrestricted capabilities (container "web" must set '
        'securityContext.capabilities.drop=["ALL"])',
        'runAsNonRoot != true (pod or container "web" must set securityContext.runAsNonRoot=true)',
        'seccompProfile (pod or container "web" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")']),
    (PodSecurityLevel.RESTRICTED, {**HARDENED, "volumes": [{"name": "n", "nfs": {}}]},
     ['restricted volume types (volume "n" uses restricted volume type "nfs")']),
])
def test_pod_security_levels(level: PodSecurityLevel, spec: dict[str, Any],
                             expected: list[str]) -> None:
    assert pod_security_violations(level, spec) == expected


def test_an_unconfined_apparmor_annotation_breaks_baseline() -> None:
    annotations = {"container.apparmor.security.beta.kubernetes.io/web": "unconfined"}
    assert pod_security_violations(PodSecurityLevel.BASELINE, PLAIN, annotations) == [
        'forbidden AppArmor profiles (container.apparmor.security.beta.kubernetes.io/web='
        '"unconfined")']


def test_the_allow_list_holds_at_every_level_and_host_ports_only_when_allowed() -> None:
    spec = {"hostNetwork": True, "nodeName": "n1",
            "containers": [{"name": "c", "ports": [{"hostPort": 81}, {"hostPort": 80}]}]}
    privileged = PodPolicy(pod_security=PodSecurityLevel.PRIVILEGED)
    assert allow_list_violations(privileged, spec) == [
        "spec.hostNetwork: Forbidden: offloaded pods do not share the node's namespaces",
        "spec.nodeName: Forbidden: the provider's scheduler places offloaded pods",
        "hostPort 80, 81: Forbidden: the provider does not allow host ports for this consumer"]
    allowed = PodPolicy(pod_security=PodSecurityLevel.PRIVILEGED, allow_host_ports=True)
    assert allow_list_violations(allowed, {**spec, "hostNetwork": False, "nodeName": None}) == []


def test_the_problem_names_the_level_and_every_violation() -> None:
    problem = policy_problem(PodPolicy(), {"hostIPC": True, **container(privileged=True)})
    assert problem == (
        "spec.hostIPC: Forbidden: offloaded pods do not share the node's namespaces; "
        'violates PodSecurity "baseline:latest": host namespaces (hostIPC=true), privileged '
        '(container "c" must not set securityContext.privileged=true)')
    assert policy_problem(PodPolicy(), PLAIN) is None


def test_twin_namespaces_are_labelled_with_the_level() -> None:
    assert twin_namespace_labels(PodPolicy(pod_security=PodSecurityLevel.RESTRICTED)) == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}
