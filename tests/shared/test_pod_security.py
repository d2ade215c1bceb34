"""The Pod Security Standards levels, worded as the PodSecurity admission plugin words them,
and the twin namespaces' Pod Security labels."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.quota import PodPolicy, PodSecurityLevel
from shared.pod_security import pod_security_violations, twin_namespace_labels
from tests.shared.test_pod_policy import PLAIN, container

HARDENED: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "web", "image": "nginx", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"],
                                                            "add": ["NET_BIND_SERVICE"]}}}],
    "volumes": [{"name": "data", "emptyDir": {}}, {"name": "token", "projected": {"sources": []}}],
}


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


def test_twin_namespaces_are_labelled_with_the_level() -> None:
    assert twin_namespace_labels(PodPolicy(pod_security=PodSecurityLevel.RESTRICTED)) == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}
