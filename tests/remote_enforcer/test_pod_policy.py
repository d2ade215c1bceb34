"""The provider enforces its own pod policy on what a consumer offloads: a consumer (or anyone
holding its kubeconfig) cannot make the enforcer run host-namespace, privileged, hostPath or
node-pinned pods. Each escalation is tried through the consumer's own identity."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from shared.api.quota import QUOTA
from shared.pod_security import POD_SECURITY_ENFORCE_LABEL, POD_SECURITY_ENFORCE_VERSION_LABEL
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    WEBHOOK_NAME,
    ShadowPods,
    denial,
    make_tenant_namespace,
    new_name,
    settled,
    shadowpod,
)
from tests.remote_enforcer.test_namespace_map import Maps, consumer_client, phases


@dataclass
class Tenant:
    consumer: str
    namespace: str
    twin: str
    shadowpods: ShadowPods
    """ShadowPods as the consumer's identity reads and writes them."""


@contextlib.contextmanager
def new_tenant(remote: Any) -> Iterator[Tenant]:
    """A consumer with a tenant namespace and one accepted twin namespace."""
    consumer = new_name("consumer")
    namespace = make_tenant_namespace(remote, consumer)
    maps = Maps(remote)
    twin = f"{new_name('twin')}-{consumer}"  # twin names carry the consumer's id
    name = maps.create(namespace, {"app": twin})
    wait_for(lambda: phases(maps.current(namespace, name)) == {"app": "Accepted"},
             message="mapping not accepted")
    yield Tenant(consumer, namespace, twin, ShadowPods(consumer_client(remote, namespace)))
    maps.delete(namespace, name)


@pytest.fixture
def tenant(remote: Any, enforcer: Any) -> Iterator[Tenant]:
    with new_tenant(remote) as made:
        yield made


def set_consumer_pod_policy(remote: Any, namespace: str, consumer: str, **policy: Any) -> None:
    """The consumer's Quota (named after it, in `namespace`) with this podPolicy (camelCase
    fields), created or patched."""
    quotas = client.CustomObjectsApi(remote.api_client)
    body = {**QUOTA.type_meta(),
            "metadata": {"name": consumer},
            "spec": {"consumerClusterId": consumer, "podPolicy": policy}}
    try:
        quotas.create_namespaced_custom_object(QUOTA.group, QUOTA.version, namespace,
                                               QUOTA.plural, body)
    except ApiException as error:
        if error.status != 409:
            raise
        quotas.patch_namespaced_custom_object(QUOTA.group, QUOTA.version, namespace,
                                              QUOTA.plural, consumer,
                                              {"spec": {"podPolicy": policy}})


def set_pod_policy(remote: Any, tenant: Tenant, **policy: Any) -> None:
    set_consumer_pod_policy(remote, tenant.namespace, tenant.consumer, **policy)


def refusal(tenant: Tenant, pod_spec: dict[str, Any],
            annotations: dict[str, str] | None = None) -> str:
    body = shadowpod(new_name("p"), tenant.consumer, pod_spec)
    body["metadata"]["annotations"].update(annotations or {})
    return denial(WEBHOOK_NAME, lambda: tenant.shadowpods.create(tenant.twin, body))


def nginx(**container: Any) -> dict[str, Any]:
    return {"name": "main", "image": "nginx:1", **container}


def twin_labels(remote: Any, tenant: Tenant) -> dict[str, str]:
    return dict(remote.core.read_namespace(tenant.twin).metadata.labels or {})


def test_twin_namespaces_enforce_the_baseline_pod_security_level_by_default(
        remote: Any, tenant: Tenant) -> None:
    labels = twin_labels(remote, tenant)
    assert labels[POD_SECURITY_ENFORCE_LABEL] == "baseline"
    assert labels[POD_SECURITY_ENFORCE_VERSION_LABEL] == "latest"
    name = new_name("p")
    tenant.shadowpods.create(tenant.twin, shadowpod(name, tenant.consumer))
    settled(tenant.shadowpods, tenant.twin, name)  # an ordinary pod runs


BASELINE = 'violates PodSecurity "baseline:latest": '
ESCALATIONS: dict[str, tuple[dict[str, Any], str]] = {
    "host network": ({"hostNetwork": True, "containers": [nginx()]},
                     "spec.hostNetwork: Forbidden: offloaded pods do not share the node's "
                     f"namespaces; {BASELINE}host namespaces (hostNetwork=true)"),
    "host pid and ipc": ({"hostPID": True, "hostIPC": True, "containers": [nginx()]},
                         "spec.hostPID: Forbidden"),
    "a node of the consumer's choice": (
        {"nodeName": "worker-0", "containers": [nginx()]},
        "spec.nodeName: Forbidden: the provider's scheduler places offloaded pods"),
    "privileged": ({"containers": [nginx(securityContext={"privileged": True})]},
                   f'{BASELINE}privileged (container "main" must not set '
                   "securityContext.privileged=true)"),
    "hostPath": ({"containers": [nginx()], "volumes": [
        {"name": "root", "hostPath": {"path": "/"}}]},
        f'{BASELINE}hostPath volumes (volume "root")'),
    "capabilities": ({"containers": [nginx(securityContext={"capabilities": {
        "add": ["SYS_ADMIN", "NET_BIND_SERVICE"]}})]},
        f'{BASELINE}non-default capabilities (container "main" must not include "SYS_ADMIN" '
        "in securityContext.capabilities.add)"),
    "host ports": ({"containers": [nginx(ports=[{"containerPort": 80, "hostPort": 80}])]},
                   "hostPort 80: Forbidden: the provider does not allow host ports"),
    "unconfined seccomp": ({"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                            "containers": [nginx()]}, f"{BASELINE}seccompProfile (pod must not"),
}


@pytest.mark.parametrize("escalation", sorted(ESCALATIONS))
def test_each_escalation_through_the_consumer_identity_is_refused_with_its_reason(
        remote: Any, tenant: Tenant, escalation: str) -> None:
    pod_spec, reason = ESCALATIONS[escalation]
    message = refusal(tenant, pod_spec)
    assert message.startswith(f"spec.pod is not allowed for consumer {tenant.consumer!r}: ")
    assert reason in message


def test_the_provider_chooses_the_level_per_consumer_and_twin_namespaces_follow(
        remote: Any, tenant: Tenant) -> None:
    set_pod_policy(remote, tenant, podSecurity="restricted")
    wait_for(lambda: twin_labels(remote, tenant)[POD_SECURITY_ENFORCE_LABEL] == "restricted",
             message="the twin namespace did not follow the restricted level")
    message = refusal(tenant, {"containers": [nginx()]})
    assert 'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false' in message
    hardened = nginx(securityContext={
        "allowPrivilegeEscalation": False, "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}})
    tenant.shadowpods.create(tenant.twin, shadowpod(new_name("p"), tenant.consumer,
                                                    {"containers": [hardened]}))

    # privileged lifts the Pod Security checks, never the allow-list; host ports only if allowed.
    set_pod_policy(remote, tenant, podSecurity="privileged", allowHostPorts=True)
    wait_for(lambda: twin_labels(remote, tenant)[POD_SECURITY_ENFORCE_LABEL] == "privileged")
    tenant.shadowpods.create(tenant.twin, shadowpod(new_name("p"), tenant.consumer, {
        "containers": [nginx(securityContext={"privileged": True},
                             ports=[{"containerPort": 80, "hostPort": 8080}])]}))
    assert "spec.hostNetwork: Forbidden" in refusal(tenant, {"hostNetwork": True,
                                                             "containers": [nginx()]})
    assert "spec.nodeName: Forbidden" in refusal(tenant, {"nodeName": "worker-0",
                                                          "containers": [nginx()]})


def privileged_pod_then_baseline(remote: Any, tenant: Tenant) -> str:
    """A privileged pod admitted (and running) under the privileged level, then the consumer's
    level lowered to baseline; its name."""
    set_pod_policy(remote, tenant, podSecurity="privileged")
    name = new_name("p")
    tenant.shadowpods.create(tenant.twin, shadowpod(name, tenant.consumer, {
        "containers": [nginx(securityContext={"privileged": True})]}))
    settled(tenant.shadowpods, tenant.twin, name)
    set_pod_policy(remote, tenant, podSecurity="baseline")
    wait_for(lambda: twin_labels(remote, tenant)[POD_SECURITY_ENFORCE_LABEL] == "baseline")
    return name


def test_a_pod_admitted_before_the_policy_tightened_may_still_be_updated(
        remote: Any, tenant: Tenant) -> None:
    name = privileged_pod_then_baseline(remote, tenant)
    tenant.shadowpods.patch(tenant.twin, name, {"metadata": {"labels": {"version": "2"}}})
    assert tenant.shadowpods.get(tenant.twin, name)["metadata"]["labels"]["version"] == "2"


def test_a_twin_namespace_label_changed_by_hand_is_set_back(remote: Any, tenant: Tenant) -> None:
    remote.core.patch_namespace(tenant.twin, {"metadata": {"labels": {
        POD_SECURITY_ENFORCE_LABEL: "privileged"}}})
    wait_for(lambda: twin_labels(remote, tenant)[POD_SECURITY_ENFORCE_LABEL] == "baseline",
             message="the enforcer did not set its twin namespace's level back")


def test_a_pod_the_tightened_policy_forbids_is_not_made_again_and_the_shadowpod_says_why(
        remote: Any, tenant: Tenant) -> None:
    name = privileged_pod_then_baseline(remote, tenant)
    remote.core.delete_namespaced_pod(name, tenant.twin, grace_period_seconds=0)

    def refused() -> dict[str, Any] | None:
        conditions = tenant.shadowpods.status(tenant.twin, name).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodCreated"
                     and c["status"] == "False"), None)
    condition = wait_for(refused, message="the refusal was not recorded on the ShadowPod")
    assert condition["reason"] == "PodPolicy"
    assert 'violates PodSecurity "baseline:latest": privileged' in condition["message"]
    assert not [p for p in remote.core.list_namespaced_pod(tenant.twin).items
                if p.metadata.name == name and not p.metadata.deletion_timestamp]


# --- fields beyond the Pod Security Standards: only what the consumer's podPolicy lists ------
# Names no cluster has (a pod of a real class could preempt or run on a real cluster's nodes):
# the ShadowPod is admitted once allowed; the pod itself may then be refused by the cluster.
PRIORITY_CLASS, RUNTIME_CLASS, SCHEDULER = ("annex-e2e-preempting", "annex-e2e-runtime",
                                             "annex-e2e-scheduler")
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
PLACEMENTS: dict[str, tuple[dict[str, Any], str]] = {
    "a tolerate-all toleration": (
        {"tolerations": [{"operator": "Exists"}]},
        'spec.tolerations[0]: Forbidden: toleration {"operator": "Exists"} (it tolerates every '
        "taint) is not allowed for this consumer (podPolicy.allowedTolerations: "),
    "a nodeSelector on the control plane": (
        {"nodeSelector": {CONTROL_PLANE: ""}},
        f'spec.nodeSelector[{CONTROL_PLANE}]: Forbidden: node label "{CONTROL_PLANE}" is not '
        "allowed for this consumer (podPolicy.allowedNodeLabels: "),
    "a priority class": (
        {"priorityClassName": PRIORITY_CLASS},
        f'spec.priorityClassName: Forbidden: priority class "{PRIORITY_CLASS}" is not allowed '
        "for this consumer (podPolicy.allowedPriorityClasses: none)"),
    "a runtime class": (
        {"runtimeClassName": RUNTIME_CLASS},
        f'spec.runtimeClassName: Forbidden: runtime class "{RUNTIME_CLASS}" is not allowed for '
        "this consumer (podPolicy.allowedRuntimeClasses: none)"),
    "a scheduler": (
        {"schedulerName": SCHEDULER},
        f'spec.schedulerName: Forbidden: scheduler "{SCHEDULER}" is not allowed for this '
        'consumer (podPolicy.allowedSchedulerNames: "default-scheduler")'),
    "an nfs volume": (
        {"volumes": [{"name": "data", "nfs": {"server": "192.0.2.1", "path": "/exports"}}]},
        'spec.volumes[0]: Forbidden: volume "data" of type "nfs" is not allowed for this '
        "consumer (podPolicy.allowedVolumeTypes: "),
    "an iscsi volume": (
        {"volumes": [{"name": "disk", "iscsi": {"targetPortal": "192.0.2.2:3260",
                                                "iqn": "iqn.2001-04.com.example:disk", "lun": 0}}]},
        'spec.volumes[0]: Forbidden: volume "disk" of type "iscsi" is not allowed for this '
        "consumer (podPolicy.allowedVolumeTypes: "),
}
GRANTING_ALL = {
    "allowedTolerations": [{"operator": "Exists"}],
    "allowedNodeLabels": [CONTROL_PLANE],
    "allowedPriorityClasses": [PRIORITY_CLASS],
    "allowedRuntimeClasses": [RUNTIME_CLASS],
    "allowedSchedulerNames": ["default-scheduler", SCHEDULER],
    "allowedVolumeTypes": ["nfs", "iscsi"],
}


def placement_pod(placement: str) -> dict[str, Any]:
    return {"containers": [nginx()], **PLACEMENTS[placement][0]}


@pytest.fixture(scope="module")
def default_tenant(remote: Any, enforcer: Any) -> Iterator[Tenant]:
    """A consumer without a Quota: the closed default policy."""
    with new_tenant(remote) as made:
        yield made


@pytest.fixture(scope="module")
def granted_tenant(remote: Any, enforcer: Any) -> Iterator[Tenant]:
    """A consumer whose Quota's podPolicy lists every field of PLACEMENTS."""
    with new_tenant(remote) as made:
        set_pod_policy(remote, made, **GRANTING_ALL)
        combined = {"containers": [nginx()]}
        for fields, _ in PLACEMENTS.values():
            combined.update({k: [*combined.get(k, []), *v] if isinstance(v, list) else v
                             for k, v in fields.items()})

        def admitted() -> bool:
            try:
                made.shadowpods.create(made.twin, shadowpod(new_name("p"), made.consumer,
                                                            combined))
            except ApiException as error:
                if error.status != 403:
                    raise
                return False
            return True
        wait_for(admitted, message="the enforcer did not apply the granting podPolicy")
        yield made


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
def test_pod_fields_the_consumer_s_policy_does_not_list_are_refused_naming_the_rule(
        default_tenant: Tenant, placement: str) -> None:
    message = refusal(default_tenant, placement_pod(placement))
    assert message.startswith(f"spec.pod is not allowed for consumer "
                              f"{default_tenant.consumer!r}: ")
    assert PLACEMENTS[placement][1] in message


@pytest.mark.parametrize("placement", sorted(PLACEMENTS))
def test_pod_fields_the_consumer_s_policy_lists_are_admitted(
        granted_tenant: Tenant, placement: str) -> None:
    granted_tenant.shadowpods.create(granted_tenant.twin, shadowpod(
        new_name("p"), granted_tenant.consumer, placement_pod(placement)))
