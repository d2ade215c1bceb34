"""kubesim/podsecurity.py: the Pod Security Standards checks, their versions and wording, and
the Warning header encoding (kubesim/warning.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import podsecurity as ps
from kubesim.warning import ITEM_LIMIT, TOTAL_LIMIT, add_warning, header_values, recording

BASELINE = ps.LevelVersion(ps.BASELINE)
RESTRICTED = ps.LevelVersion(ps.RESTRICTED)
GOOD_CONTAINER = {"securityContext": {"allowPrivilegeEscalation": False,
                                      "capabilities": {"drop": ["ALL"]}}}
GOOD_POD = {"securityContext": {"runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}}}


def spec(*containers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    named = [{"name": f"c{i}", "image": "x", **c} for i, c in enumerate(containers)]
    return {"containers": named or [{"name": "c0", "image": "x"}], **fields}


def failures(level: ps.LevelVersion, pod_spec: dict[str, Any],
             annotations: dict[str, str] | None = None, newest: int = ps.NEWEST_POLICY
             ) -> list[tuple[str, str]]:
    return ps.evaluate(level, {"annotations": annotations or {}}, pod_spec, newest)


@pytest.mark.parametrize(("pod_spec", "annotations", "expected"), [
    (spec(hostPID=True, hostIPC=True, hostNetwork=True), None,
     ("host namespaces", "hostIPC=true, hostNetwork=true, hostPID=true")),
    (spec({"securityContext": {"privileged": True}}, {"securityContext": {"privileged": True}}),
     None, ("privileged", 'containers "c0", "c1" must not set securityContext.privileged=true')),
    (spec({"securityContext": {"capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}}}),
     None, ("non-default capabilities",
            'container "c0" must not include "NET_RAW", "SYS_ADMIN" in '
            "securityContext.capabilities.add")),
    (spec(volumes=[{"name": "a", "hostPath": {"path": "/"}}, {"name": "b", "emptyDir": {}},
                   {"name": "c", "hostPath": {"path": "/x"}}]), None,
     ("hostPath volumes", 'volumes "a", "c"')),
    (spec({"ports": [{"containerPort": 80, "hostPort": 80}, {"containerPort": 9, "hostPort": 9}]},
          {"ports": [{"containerPort": 1}]}), None,
     ("hostPort", 'container "c0" uses hostPorts 80, 9')),  # sorted as strings, as upstream
    (spec({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
          securityContext={"appArmorProfile": {"type": "Unconfined"}}),
     {"container.apparmor.security.beta.kubernetes.io/c0": "unconfined"},
     ("forbidden AppArmor profiles",
      'pod and container "c0" and annotation must not set AppArmor profile type to '
      '"Unconfined", "container.apparmor.security.beta.kubernetes.io/c0="unconfined""')),
    (spec({"securityContext": {"seLinuxOptions": {"type": "spc_t", "user": "root"}}}), None,
     ("seLinuxOptions", 'container "c0" set forbidden securityContext.seLinuxOptions: type '
      '"spc_t"; user may not be set')),
    (spec({"securityContext": {"procMount": "Unmasked"}}), None,
     ("procMount", 'container "c0" must not set securityContext.procMount to "Unmasked"')),
    (spec({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}), None,
     ("seccompProfile", 'container "c0" must not set securityContext.seccompProfile.type to '
      '"Unconfined"')),
    (spec(securityContext={"sysctls": [{"name": "net.core.somaxconn", "value": "1"},
                                       {"name": "kernel.shm_rmid_forced", "value": "1"},
                                       {"name": "vm.swappiness", "value": "1"}]}), None,
     ("forbidden sysctls", "net.core.somaxconn, vm.swappiness")),
    (spec(securityContext={"windowsOptions": {"hostProcess": True}}), None,
     ("hostProcess", "pod must not set securityContext.windowsOptions.hostProcess=true")),
    (spec({"livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}},
           "lifecycle": {"preStop": {"tcpSocket": {"host": "node", "port": 1}}}}), None,
     ("probe or lifecycle host",
      'container "c0" uses probe or lifecycle hosts "10.0.0.1", "node"')),
])
def test_each_baseline_check_names_what_it_forbids(pod_spec, annotations, expected) -> None:
    assert failures(BASELINE, pod_spec, annotations) == [expected]


def test_baseline_failures_come_in_check_id_order() -> None:
    pod_spec = spec({"securityContext": {"privileged": True,
                                         "capabilities": {"add": ["NET_ADMIN"]}}},
                    hostNetwork=True)
    assert [reason for reason, _ in failures(BASELINE, pod_spec)] == [
        "non-default capabilities", "host namespaces", "privileged"]


def test_restricted_checks_replace_the_baseline_checks_they_override() -> None:
    pod_spec = spec({"securityContext": {"allowPrivilegeEscalation": False,
                                         "capabilities": {"drop": ["ALL"],
                                                          "add": ["NET_BIND_SERVICE", "BPF"]}}},
                    volumes=[{"name": "h", "hostPath": {"path": "/"}},
                             {"name": "n", "nfs": {"server": "s", "path": "/"}},
                             {"name": "odd"}, {"name": "ok", "projected": {"sources": []}}],
                    **GOOD_POD)
    assert failures(RESTRICTED, pod_spec) == [
        ("unrestricted capabilities",
         'container "c0" must not include "BPF" in securityContext.capabilities.add'),
        ("restricted volume types",
         'volumes "h", "n", "odd" use restricted volume types "hostPath", "nfs", "unknown"')]


def test_restricted_explicit_settings_are_named_before_missing_ones() -> None:
    pod_spec = spec({"securityContext": {"runAsNonRoot": False, "runAsUser": 0,
                                         **GOOD_CONTAINER["securityContext"]}}, GOOD_CONTAINER,
                    securityContext={"seccompProfile": {"type": "Localhost"}, "runAsUser": 0})
    assert failures(RESTRICTED, pod_spec) == [
        ("runAsNonRoot != true", 'container "c0" must not set securityContext.runAsNonRoot=false'),
        ("runAsUser=0", 'pod and container "c0" must not set runAsUser=0')]


def test_windows_pods_are_spared_the_linux_only_checks_since_1_25() -> None:
    pod_spec = spec(os={"name": "windows"}, securityContext={"runAsNonRoot": True})
    assert failures(RESTRICTED, pod_spec) == []
    assert [r for r, _ in failures(ps.LevelVersion(ps.RESTRICTED, 24), pod_spec)] == [
        "allowPrivilegeEscalation != false", "unrestricted capabilities", "seccompProfile"]


@pytest.mark.parametrize(("minor", "allowed"), [
    (26, False), (27, True), (31, True)])
def test_the_safe_sysctls_grow_with_the_policy_version(minor, allowed) -> None:
    pod_spec = spec(securityContext={"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports",
                                                  "value": "1"}]})
    assert (failures(ps.LevelVersion(ps.BASELINE, minor), pod_spec) == []) is allowed


def test_before_1_19_seccomp_was_judged_on_its_annotations() -> None:
    annotations = {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
    old = ps.LevelVersion(ps.BASELINE, 18)
    assert failures(old, spec(), annotations) == [
        ("seccompProfile",
         'forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined"')]
    assert failures(BASELINE, spec(), annotations) == []


def test_latest_is_the_servers_own_version() -> None:
    pod_spec = spec({"readinessProbe": {"tcpSocket": {"host": "h", "port": 1}}})
    assert failures(BASELINE, pod_spec, newest=33) == []
    assert [r for r, _ in failures(BASELINE, pod_spec, newest=34)] == ["probe or lifecycle host"]
    # a version past the server's is read as its newest
    assert failures(ps.LevelVersion(ps.BASELINE, 40), pod_spec, newest=33) == []


def test_user_namespaced_pods_are_relaxed_from_1_35() -> None:
    pod_spec = spec({"securityContext": {"procMount": "Unmasked", "runAsUser": 0,
                                         **GOOD_CONTAINER["securityContext"]}},
                    hostUsers=False, securityContext={"seccompProfile": {"type": "Localhost"}})
    assert failures(BASELINE, pod_spec) == []
    assert [r for r, _ in failures(RESTRICTED, pod_spec)] == ["procMount"]
    assert [r for r, _ in failures(RESTRICTED, pod_spec, newest=34)] == [
        "procMount", "runAsNonRoot != true", "runAsUser=0"]


def test_labels_parse_to_a_policy_failing_closed_for_enforce_only() -> None:
    policy, errors = ps.policy_from_labels({
        "pod-security.kubernetes.io/enforce": "Baseline",
        "pod-security.kubernetes.io/warn": "nope",
        "pod-security.kubernetes.io/warn-version": "v1.25",
        "pod-security.kubernetes.io/audit-version": "v1.025"})
    assert policy == ps.Policy(enforce=RESTRICTED, audit=ps.LevelVersion(ps.PRIVILEGED),
                               warn=ps.LevelVersion(ps.PRIVILEGED, 25))
    assert [str(e) for e in errors] == [
        'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "Baseline": '
        "must be one of privileged, baseline, restricted",
        'metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: "v1.025": '
        'must be "latest" or "v1.x"',
        'metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "nope": must be one '
        "of privileged, baseline, restricted"]
    assert ps.policy_from_labels(None) == (ps.DEFAULT_POLICY, [])


def test_significant_pod_updates_are_images_and_seccomp_annotations() -> None:
    old = {"metadata": {"labels": {}}, "spec": spec()}
    relabelled = {"metadata": {"labels": {"a": "b"}}, "spec": spec()}
    assert not ps.significant_pod_update(relabelled, old)
    new_image = {"metadata": {}, "spec": spec({"image": "y"})}
    assert ps.significant_pod_update(new_image, old)
    debugged = {"metadata": {}, "spec": {**spec(), "ephemeralContainers": [{"name": "dbg"}]}}
    assert ps.significant_pod_update(debugged, old)
    annotated = {"metadata": {"annotations": {
        "container.seccomp.security.alpha.kubernetes.io/c0": "unconfined"}}, "spec": spec()}
    assert ps.significant_pod_update(annotated, old)


def test_namespace_warnings_only_when_enforcement_tightens() -> None:
    base, _ = ps.policy_from_labels({"pod-security.kubernetes.io/enforce": "baseline"})
    open_, _ = ps.policy_from_labels({})
    pods = [{"metadata": {"name": n}, "spec": spec(hostPID=True)} for n in ("b", "a", "c")]
    assert ps.namespace_warnings("ns", base, open_, pods) == []
    assert ps.namespace_warnings("ns", base, base, pods) == []
    assert ps.namespace_warnings("ns", open_, base, pods) == [
        'existing pods in namespace "ns" violate the new PodSecurity enforce level '
        '"baseline:latest"', "a (and 2 other pods): host namespaces"]


def test_warning_headers_escape_and_bound_their_texts() -> None:
    assert header_values(['say "hi" \\ bye']) == ['299 - "say \\"hi\\" \\\\ bye"']
    many = [f"{i:03d}" + "x" * 600 for i in range(10)]
    values = header_values(many)
    assert all(len(v) == len('299 - ""') + ITEM_LIMIT for v in values)
    assert len(values) == 10  # cut to 256 each, all fit in the total
    huge = [f"{i:03d}" + "x" * 600 for i in range(20)]
    assert len(header_values(huge)) == TOTAL_LIMIT // ITEM_LIMIT
    with recording() as texts:
        add_warning("once")
        add_warning("once")
    add_warning("outside a request")  # nowhere to go: ignored
    assert texts == ["once"]
