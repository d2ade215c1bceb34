"""The provider's pod policy: the offloading allow-list, and the level's violations named in a
refusal."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.offloading_patch import OffloadingPatch
from shared.api.quota import PodPolicy, PodSecurityLevel, Toleration
from shared.forge.metadata import ReflectionConfig
from shared.forge.pod import PodForgeConfig, remote_pod_spec
from shared.pod_policy import (
    allow_list_violations,
    policy_problem,
)

PLAIN: dict[str, Any] = {"containers": [{"name": "web", "image": "nginx"}]}


def container(**security: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "i", "securityContext": security}]}


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


# --- what places, prioritises or mounts on the provider's nodes ------------------------------

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
TOLERATE_ALL = {"operator": "Exists"}
NFS = {"name": "data", "nfs": {"server": "192.0.2.1", "path": "/exports"}}


def node_affinity(term: dict[str, Any], preferred: bool = False) -> dict[str, Any]:
    if preferred:
        return {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": term}]}}}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}}


def on_control_plane(operator: str = "Exists") -> dict[str, Any]:
    return {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                                 {"key": CONTROL_PLANE, "operator": operator}]}


# name: (spec fields, the refusal's start, what the policy must list to allow it)
RULES: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "a tolerate-all toleration": (
        {"tolerations": [TOLERATE_ALL]},
        'spec.tolerations[0]: Forbidden: toleration {"operator": "Exists"} (it tolerates every '
        "taint) is not allowed for this consumer (podPolicy.allowedTolerations: "
        '{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}, ',
        {"allowed_tolerations": [Toleration(operator="Exists")]}),
    "a toleration of a dedicated node's taint": (
        {"tolerations": [*({"key": k, "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": 30}
                           for k in ("node.kubernetes.io/not-ready",
                                     "node.kubernetes.io/unreachable")),
                         {"key": "dedicated", "value": "team-b", "effect": "NoSchedule"}]},
        'spec.tolerations[2]: Forbidden: toleration {"key": "dedicated", "value": "team-b", '
        '"effect": "NoSchedule"} is not allowed for this consumer',
        {"allowed_tolerations": [*PodPolicy().allowed_tolerations,
                                 Toleration(key="dedicated", value="team-b")]}),
    "a nodeSelector on the control plane": (
        {"nodeSelector": {"kubernetes.io/os": "linux", CONTROL_PLANE: ""}},
        f'spec.nodeSelector[{CONTROL_PLANE}]: Forbidden: node label "{CONTROL_PLANE}" is not '
        'allowed for this consumer (podPolicy.allowedNodeLabels: "kubernetes.io/arch", '
        '"kubernetes.io/os", ',
        {"allowed_node_labels": ["kubernetes.io/os", CONTROL_PLANE]}),
    "a required node affinity on the control plane": (
        node_affinity(on_control_plane()),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        f'nodeSelectorTerms[0].matchExpressions[1].key: Forbidden: node label "{CONTROL_PLANE}" '
        "is not allowed for this consumer (podPolicy.allowedNodeLabels:",
        {"allowed_node_labels": ["kubernetes.io/os", CONTROL_PLANE]}),
    "a preferred node affinity for the control plane": (
        node_affinity(on_control_plane(), preferred=True),
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]."
        f'preference.matchExpressions[1].key: Forbidden: node label "{CONTROL_PLANE}" is not '
        "allowed",
        {"allowed_node_labels": ["kubernetes.io/os", CONTROL_PLANE]}),
    "a priority class": (
        {"priorityClassName": "system-cluster-critical"},
        'spec.priorityClassName: Forbidden: priority class "system-cluster-critical" is not '
        "allowed for this consumer (podPolicy.allowedPriorityClasses: none)",
        {"allowed_priority_classes": ["system-cluster-critical"]}),
    "a priority with its class": (
        {"priorityClassName": "batch", "priority": 1000},
        'spec.priorityClassName: Forbidden: priority class "batch" is not allowed',
        {"allowed_priority_classes": ["batch"]}),
    "a runtime class": (
        {"runtimeClassName": "kata"},
        'spec.runtimeClassName: Forbidden: runtime class "kata" is not allowed for this consumer '
        "(podPolicy.allowedRuntimeClasses: none)",
        {"allowed_runtime_classes": ["kata"]}),
    "a scheduler": (
        {"schedulerName": "my-scheduler"},
        'spec.schedulerName: Forbidden: scheduler "my-scheduler" is not allowed for this '
        'consumer (podPolicy.allowedSchedulerNames: "default-scheduler")',
        {"allowed_scheduler_names": ["default-scheduler", "my-scheduler"]}),
    "an nfs volume": (
        {"volumes": [{"name": "tmp", "emptyDir": {}}, NFS]},
        'spec.volumes[1]: Forbidden: volume "data" of type "nfs" is not allowed for this '
        'consumer (podPolicy.allowedVolumeTypes: "configMap", "downwardAPI", "emptyDir", '
        '"ephemeral", "persistentVolumeClaim", "projected", "secret")',
        {"allowed_volume_types": ["emptyDir", "nfs"]}),
    "an inline csi volume": (
        {"volumes": [{"name": "share", "csi": {"driver": "smb.csi.k8s.io"}}]},
        'spec.volumes[0]: Forbidden: volume "share" of type "csi" is not allowed',
        {"allowed_volume_types": ["csi"]}),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_what_the_policy_does_not_list_is_refused_whatever_the_level_and_named(rule: str) -> None:
    fields, refusal, allowing = RULES[rule]
    spec = {**PLAIN, **fields}
    for level in PodSecurityLevel:
        found = allow_list_violations(PodPolicy(pod_security=level), spec)
        assert len(found) == 1 and found[0].startswith(refusal), found
    assert policy_problem(PodPolicy(**allowing), spec) is None


def test_the_defaults_allow_an_ordinary_offloaded_pod_as_the_home_agent_forges_it() -> None:
    """What the home pod webhook adds (the virtual-node and node-health tolerations, the
    virtual-node affinity) and the token volumes the forge rewrites pass the closed defaults."""
    home_pod = {"metadata": {"name": "web-0", "namespace": "shop"}, "spec": {
        "containers": [{"name": "app", "image": "nginx:1.25"}],
        "schedulerName": "default-scheduler", "priorityClassName": "home-critical",
        "priority": 1000, "runtimeClassName": "home-runtime",
        "tolerations": [{"key": "virtual-node.liqo.io/not-allowed", "operator": "Exists",
                         "effect": "NoExecute"},
                        *({"key": k, "operator": "Exists", "effect": "NoExecute",
                           "tolerationSeconds": 30}
                          for k in ("node.kubernetes.io/not-ready",
                                    "node.kubernetes.io/unreachable"))],
        **node_affinity({"matchExpressions": [{"key": "liqo.io/type", "operator": "In",
                                               "values": ["virtual-node"]}]}),
        "volumes": [
            {"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt"}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                    "fieldPath": "metadata.namespace"}}]}}]}},
            {"name": "config", "configMap": {"name": "web"}},
            {"name": "tls", "secret": {"secretName": "web-tls"}},
            {"name": "cache", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}
    reflection = ReflectionConfig(home_cluster_id="home", remote_cluster_id="remote")
    forged = remote_pod_spec(home_pod, PodForgeConfig(
        reflection=reflection, home_apiserver_host="api.home.example.com")).spec
    assert policy_problem(PodPolicy(), forged) is None

    # A VirtualNode's offloadingPatch places pods where the provider must have allowed.
    patch = OffloadingPatch(node_selector={"pool": "borrowed"}, runtime_class_name="gvisor",
                            tolerations=[{"key": "borrowed", "operator": "Exists"}])
    patched = remote_pod_spec(home_pod, PodForgeConfig(reflection=reflection,
                                                       offloading_patch=patch)).spec
    assert [v.split(":")[0] for v in allow_list_violations(PodPolicy(), patched)] == [
        "spec.tolerations[0]", "spec.nodeSelector[pool]", "spec.runtimeClassName"]
    assert policy_problem(PodPolicy(
        allowed_tolerations=[Toleration(key="borrowed", operator="Exists")],
        allowed_node_labels=["pool"], allowed_runtime_classes=["gvisor"]), patched) is None


@pytest.mark.parametrize(("allowed", "toleration", "covered"), [
    (Toleration(key="gpu", operator="Exists"), {"key": "gpu", "operator": "Exists"}, True),
    (Toleration(key="gpu", operator="Exists"), {"key": "gpu", "value": "a100"}, True),
    (Toleration(key="gpu", value="a100"), {"key": "gpu", "value": "a100"}, True),
    (Toleration(key="gpu", value="a100"), {"key": "gpu", "value": "h100"}, False),
    (Toleration(key="gpu", value="a100"), {"key": "gpu", "operator": "Exists"}, False),
    (Toleration(key="gpu", operator="Exists", effect="NoSchedule"),
     {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    (Toleration(key="gpu", operator="Exists", effect="NoSchedule"),
     {"key": "gpu", "operator": "Exists"}, False),  # an empty effect tolerates every effect
    (Toleration(key="gpu", operator="Exists"), {"key": "gpus", "operator": "Exists"}, False),
    (Toleration(key="gpu", operator="Exists"), TOLERATE_ALL, False),
    (Toleration(operator="Exists", effect="PreferNoSchedule"),
     {"key": "anything", "operator": "Exists", "effect": "PreferNoSchedule"}, True),
    (Toleration(operator="Exists", effect="PreferNoSchedule"), TOLERATE_ALL, False),
    (Toleration(operator="Exists"), {**TOLERATE_ALL, "effect": "NoExecute"}, True),
])
def test_a_toleration_must_be_covered_by_an_allowed_one(
        allowed: Toleration, toleration: dict[str, Any], covered: bool) -> None:
    spec = {**PLAIN, "tolerations": [toleration]}
    assert (allow_list_violations(PodPolicy(allowed_tolerations=[allowed]), spec) == []) is covered


def test_match_fields_and_a_priority_without_an_allowed_class_are_refused() -> None:
    by_name = node_affinity({"matchFields": [{"key": "metadata.name", "operator": "In",
                                              "values": ["control-plane-0"]}]})
    assert allow_list_violations(PodPolicy(), {**PLAIN, **by_name}) == [
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
        "nodeSelectorTerms[0].matchFields: Forbidden: offloaded pods select nodes by labels "
        "only, never by node fields (the provider's scheduler chooses the node)"]
    assert allow_list_violations(PodPolicy(allowed_priority_classes=["batch"]),
                                 {**PLAIN, "priority": 1000000}) == [
        "spec.priority: Forbidden: a priority is set only through an allowed priority class "
        '(podPolicy.allowedPriorityClasses: "batch")']


def test_host_path_is_refused_by_the_volume_types_and_still_by_baseline() -> None:
    spec = {**PLAIN, "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}
    problem = policy_problem(PodPolicy(), spec)
    assert problem is not None
    assert problem.startswith('spec.volumes[0]: Forbidden: volume "root" of type "hostPath"')
    assert problem.endswith('violates PodSecurity "baseline:latest": hostPath volumes '
                            '(volume "root")')
    assert policy_problem(PodPolicy(pod_security=PodSecurityLevel.PRIVILEGED,
                                    allowed_volume_types=["hostPath"]), spec) is None


def test_an_update_is_refused_only_for_what_it_adds() -> None:
    """A pod admitted under a looser policy keeps its tolerations; an update may add allowed
    ones (before it too, moving it) but not another disallowed one."""
    gpu = {"key": "gpu", "operator": "Exists"}
    health = {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
              "effect": "NoExecute", "tolerationSeconds": 60}
    old = {**PLAIN, "tolerations": [gpu], "volumes": [NFS]}
    kept = {**old, "containers": [{"name": "web", "image": "nginx:2"}],
            "tolerations": [health, gpu]}
    assert policy_problem(PodPolicy(), kept, old_spec=old) is None
    added = {**old, "tolerations": [gpu, TOLERATE_ALL]}
    assert policy_problem(PodPolicy(), added, old_spec=old) == (
        'spec.tolerations[1]: Forbidden: toleration {"operator": "Exists"} (it tolerates every '
        "taint) is not allowed for this consumer (podPolicy.allowedTolerations: "
        '{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}, '
        '{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"})')
