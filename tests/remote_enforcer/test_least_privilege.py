"""The enforcer does its whole job with nothing but the chart's ClusterRoles (kubesim RBAC), and
what the API server lets a stolen enforcer identity and the consumer identity it binds do; an
older enforcer's twin namespace is rebound to the consumer ClusterRole with nothing recreated."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from remote_enforcer.settings import parse
from shared.ownership import ownership_labels
from shared.wellknown import CONSUMER_SERVICE_ACCOUNT, OFFLOADING_GROUP, TWIN_NAMESPACE_ROLE
from tests.charts.helm import only, render
from tests.helpers import refusal, wait_for
from tests.remote_enforcer.conftest import (
    PROVIDER_ID,
    ROOT,
    Enforcer,
    ShadowPods,
    make_tenant_namespace,
    new_name,
    running_enforcer,
    settled,
    shadowpod,
)
from tests.remote_enforcer.test_admission import denial, set_quota
from tests.remote_enforcer.test_namespace_map import (
    Maps,
    consumer_client,
    namespace_or_none,
    phases,
)
from tests.remote_enforcer.test_offer import offer

RBAC = "rbac.authorization.k8s.io"
ESCALATION = "is attempting to grant RBAC permissions not currently held"
# the chart's ServiceAccount, whom its admission policy holds
ACCOUNT = only(render(ROOT / "charts" / "remote-enforcer", {"clusterId": PROVIDER_ID}),
               "ServiceAccount")["metadata"]["name"]


@dataclass(frozen=True)
class Identity:
    """The enforcer's ServiceAccount, bound to the chart's ClusterRole."""

    namespace: str
    user: str
    kubeconfig: Path
    consumer_cluster_role: str  # what the chart's Deployment tells the enforcer to bind


def chart_rights() -> tuple[dict[str, Any], dict[str, Any], str]:
    """The chart's enforcer ClusterRole, its consumer ClusterRole and the consumer role's name
    as the Deployment passes it."""
    manifests = render(ROOT / "charts" / "remote-enforcer", {"clusterId": PROVIDER_ID})
    enforcer = only(manifests, "ClusterRole", only(manifests, "ClusterRoleBinding")["roleRef"][
        "name"])
    [container] = only(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    name = parse(container["args"]).consumer_cluster_role
    return enforcer, only(manifests, "ClusterRole", name), name


def install_chart_policy(remote: Any, namespace: str) -> str:
    """The chart's admission policy and its binding for an enforcer released in `namespace`,
    named after it (as its ClusterRole here); the policy's name."""
    manifests = render(ROOT / "charts" / "remote-enforcer", {"clusterId": PROVIDER_ID},
                       namespace=namespace)
    policy = only(manifests, "ValidatingAdmissionPolicy")
    binding = only(manifests, "ValidatingAdmissionPolicyBinding")
    policy["metadata"] = binding["metadata"] = {"name": namespace}
    binding["spec"]["policyName"] = namespace
    admission = client.AdmissionregistrationV1Api(remote.api_client)
    admission.create_validating_admission_policy(policy)
    admission.create_validating_admission_policy_binding(binding)
    return namespace


def service_account_identity(remote: Any, directory: Path) -> Identity:
    """A service account bound to the chart's enforcer ClusterRole (the chart's consumer
    ClusterRole there too) and held by its admission policy, and a kubeconfig for it."""
    namespace = new_name("annex-system")
    remote.core.create_namespace({"metadata": {"name": namespace}})
    remote.core.create_namespaced_service_account(namespace, {"metadata": {"name": ACCOUNT}})
    install_chart_policy(remote, namespace)
    role, consumer_role, consumer_role_name = chart_rights()
    role["metadata"] = {"name": namespace}
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    rbac.create_cluster_role(role)
    try:
        rbac.create_cluster_role(consumer_role)
    except ApiException as error:
        if error.status != 409:
            raise
    rbac.create_cluster_role_binding({
        "metadata": {"name": namespace},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": namespace},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}]})
    token = remote.core.create_namespaced_service_account_token(
        ACCOUNT, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    config = copy.deepcopy(yaml.safe_load(remote.kubeconfig.read_text()))
    config["users"] = [{"name": "enforcer", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "enforcer"
    path = directory / "enforcer.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return Identity(namespace, f"system:serviceaccount:{namespace}:{ACCOUNT}", path,
                    consumer_role_name)


@pytest.fixture(scope="module")
def identity(remote: Any, tmp_path_factory: pytest.TempPathFactory) -> Identity:
    return service_account_identity(remote, tmp_path_factory.mktemp("identity"))


@pytest.fixture(scope="module")
def confined(remote: Any, identity: Identity, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Enforcer]:
    with running_enforcer(remote, identity.kubeconfig, tmp_path_factory.mktemp("confined"),
                          ["--consumer-cluster-role", identity.consumer_cluster_role]
                          ) as process:
        yield process


def may(remote: Any, user: str, verb: str, resource: str, namespace: str = "", group: str = "",
        subresource: str = "", name: str = "") -> bool:
    """The API server's answer (a SubjectAccessReview) for the service account `user`."""
    account_namespace = user.split(":")[2]
    review = client.AuthorizationV1Api(remote.api_client).create_subject_access_review({
        "spec": {"user": user, "groups": [
            "system:serviceaccounts", f"system:serviceaccounts:{account_namespace}",
            "system:authenticated"],
            "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                   "subresource": subresource, "namespace": namespace,
                                   "name": name}}})
    return bool(review.status.allowed)


def twin_of(remote: Any, maps: Maps, consumer: str) -> tuple[str, str]:
    """A tenant namespace of `consumer` and its twin namespace, made by the enforcer."""
    tenant = make_tenant_namespace(remote, consumer)
    twin = f"{new_name('app')}-{consumer}"  # carries the consumer's id, as twin names do
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"},
             message=f"{twin} was not accepted")
    return tenant, twin


def consumer_binding(role_kind: str, role: str, tenant: str) -> dict[str, Any]:
    return {"metadata": {"name": TWIN_NAMESPACE_ROLE},
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": CONSUMER_SERVICE_ACCOUNT,
                          "namespace": tenant}]}



def refused_by_rbac(log: str) -> list[str]:
    """The log's lines where the API server's authorizer refused the enforcer, as kube-apiserver
    (and kubesim) word it: `User "..." cannot <verb> resource ...`. Not the other 403s, such as a
    write into a namespace being deleted, which another test's cleanup can cause at any time."""
    return [line for line in log.splitlines() if re.search(r'User "[^"]*" cannot ', line)]

def test_everything_works_with_only_the_chart_cluster_role(
        remote: Any, confined: Enforcer) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    maps = Maps(remote)
    twin = f"{new_name('twin')}-{consumer}"  # a twin name carries the consumer's id
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})
    wait_for(lambda: offer(remote, tenant), message="no offer")

    shadowpods = ShadowPods(remote.api_client)
    pod_name = new_name("p")
    shadowpods.create(twin, shadowpod(pod_name, consumer))
    settled(shadowpods, twin, pod_name)
    remote.core.delete_namespaced_pod(pod_name, twin, grace_period_seconds=0)
    wait_for(lambda: shadowpods.status(twin, pod_name).get("recreations") == 1)

    shadowpods.patch(twin, pod_name, {"spec": {"pod": {"containers": [
        {"name": "main", "image": "nginx:2"}]}}})
    wait_for(lambda: remote.core.read_namespaced_pod(pod_name, twin).spec.containers[0].image
             == "nginx:2")

    set_quota(remote, tenant, consumer, "None", {}, cordoned=True)
    assert denial(lambda: shadowpods.create(twin, shadowpod(new_name("p"), consumer))) == (
        "the consumer is cordoned: no new pods are admitted")

    second = f"{new_name('twin')}-{consumer}"
    maps.drop(tenant, name, "app")
    client.CustomObjectsApi(remote.api_client).patch_namespaced_custom_object(
        "virtualkubelet.liqo.io", "v1beta1", tenant, "namespacemaps", name,
        {"spec": {"desiredMapping": {"other": second}}})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"other": "Accepted"})
    wait_for(lambda: (ns := namespace_or_none(remote, twin)) is None
             or ns.metadata.deletion_timestamp is not None)

    log = confined.log_path.read_text()
    assert not refused_by_rbac(log), log[-3000:]


def test_a_stolen_enforcer_identity_reads_no_secret_and_binds_only_the_consumer_role(
        remote: Any, identity: Identity, confined: Enforcer) -> None:
    _, twin = twin_of(remote, Maps(remote), new_name("consumer"))
    user, consumer_role = identity.user, identity.consumer_cluster_role
    for namespace in ("kube-system", twin, ""):
        assert not may(remote, user, "list", "secrets", namespace)
    assert not may(remote, user, "get", "secrets", "kube-system", name="any")
    for namespace in ("kube-system", twin):
        assert not may(remote, user, "create", "pods", namespace, subresource="exec")
        assert not may(remote, user, "create", "configmaps", namespace)
        assert not may(remote, user, "create", "roles", namespace, group=RBAC)
    assert not may(remote, user, "create", "clusterrolebindings", group=RBAC)
    assert not may(remote, user, "escalate", "clusterroles", group=RBAC, name=consumer_role)
    for other in ("cluster-admin", "admin", "edit", identity.namespace):
        assert not may(remote, user, "bind", "clusterroles", twin, group=RBAC, name=other)
    assert may(remote, user, "bind", "clusterroles", twin, group=RBAC, name=consumer_role)

    # and the API server holds it to that: the bindings it may not make are refused
    with config.new_client_from_config(config_file=str(identity.kubeconfig)) as api_client:
        rbac = client.RbacAuthorizationV1Api(api_client)
        tenant = identity.namespace
        for namespace in ("kube-system", twin):
            assert ESCALATION in refusal(lambda namespace=namespace: (
                rbac.create_namespaced_role_binding(namespace, consumer_binding(
                    "ClusterRole", "cluster-admin", tenant), dry_run="All")))
        rbac.create_namespaced_role_binding(
            twin, {**consumer_binding("ClusterRole", consumer_role, tenant),
                   "metadata": {"name": new_name("probe")}}, dry_run="All")


def test_the_chart_s_admission_policy_holds_a_stolen_enforcer_identity_to_the_twins(
        remote: Any, identity: Identity, confined: Enforcer) -> None:
    """What RBAC grants cluster-wide (pods, the consumer role's bindings, namespaces) the chart's
    ValidatingAdmissionPolicy confines to the twin namespaces: no pod as kube-system's accounts,
    no binding there, no deleting it. Every write is a dry run: nothing happens if one passed."""
    _, twin = twin_of(remote, Maps(remote), new_name("consumer"))
    plain = new_name("plain")
    remote.core.create_namespace({"metadata": {"name": plain}})
    wait_for(lambda: remote.core.read_namespaced_service_account("default", twin))
    denied = (f"ValidatingAdmissionPolicy '{identity.namespace}' with binding "
              f"'{identity.namespace}' denied request: the enforcer ")
    pod = {"metadata": {"name": "probe"}, "spec": {"containers": [
        {"name": "main", "image": "nginx:1"}]}}
    quota = {"metadata": {"name": "probe"}, "spec": {"hard": {"pods": "1"}}}
    binding = {**consumer_binding("ClusterRole", identity.consumer_cluster_role,
                                  identity.namespace), "metadata": {"name": new_name("probe")}}
    with config.new_client_from_config(config_file=str(identity.kubeconfig)) as api_client:
        core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
        for namespace in ("kube-system", plain):
            for resource, write in (
                    ("pods", lambda ns=namespace: core.create_namespaced_pod(
                        ns, {**pod, "spec": {**pod["spec"], "serviceAccountName": "default"}},
                        dry_run="All")),
                    ("rolebindings", lambda ns=namespace: rbac.create_namespaced_role_binding(
                        ns, binding, dry_run="All")),
                    ("resourcequotas", lambda ns=namespace: core.create_namespaced_resource_quota(
                        ns, quota, dry_run="All"))):
                assert refusal(write).endswith(
                    f"{denied}writes {resource} only in its twin namespaces, not in {namespace}")
        # (kube-system: the API server's NamespaceLifecycle refuses its deletion before)
        assert refusal(lambda: core.delete_namespace(plain, dry_run="All")).endswith(
            f"{denied}creates, changes and deletes only its twin namespaces, not {plain}")
        # pods it deletes (its own, stuck on a failed node) only in the twins
        for namespace in (plain, twin):
            remote.core.create_namespaced_pod(namespace, pod)
        assert refusal(lambda: core.delete_namespaced_pod("probe", plain, dry_run="All")).endswith(
            f"{denied}writes pods only in its twin namespaces, not in {plain}")
        core.delete_namespaced_pod("probe", twin, dry_run="All")
        for namespace in (plain, twin):
            remote.core.delete_namespaced_pod("probe", namespace, grace_period_seconds=0)
        twin_labels = remote.core.read_namespace(twin).metadata.labels
        for write in (lambda: core.patch_namespace("kube-system", {"metadata": {
                          "labels": twin_labels}}, dry_run="All"),
                      lambda: core.create_namespace({"metadata": {"name": new_name("x")}},
                                                    dry_run="All"),
                      lambda: core.patch_namespace(twin, {"metadata": {"labels": {
                          label: None for label in ownership_labels("a", "b")}}},
                                                   dry_run="All")):
            assert f"{denied}creates, changes and deletes only its twin" in refusal(write)

        # and in a twin namespace, all of it is its to do
        core.create_namespaced_pod(twin, pod, dry_run="All")
        rbac.create_namespaced_role_binding(twin, binding, dry_run="All")
        core.create_namespaced_resource_quota(twin, quota, dry_run="All")
        core.create_namespace({"metadata": {"name": new_name("x"), "labels": twin_labels}},
                              dry_run="All")
        core.delete_namespace(twin, dry_run="All")


def test_the_consumer_identity_works_in_its_twin_namespaces_only(
        remote: Any, identity: Identity, confined: Enforcer) -> None:
    maps = Maps(remote)
    consumer = new_name("consumer")
    tenant, twin = twin_of(remote, maps, consumer)
    _, other_twin = twin_of(remote, maps, new_name("other"))
    user = f"system:serviceaccount:{tenant}:{CONSUMER_SERVICE_ACCOUNT}"
    elsewhere = (other_twin, "kube-system", "default", identity.namespace)
    for resource, group in (("shadowpods", OFFLOADING_GROUP), ("configmaps", ""),
                            ("secrets", ""), ("services", "")):
        assert may(remote, user, "create", resource, twin, group)
        for namespace in elsewhere:
            assert not may(remote, user, "create", resource, namespace, group), namespace
    for namespace in (*elsewhere, ""):
        assert not may(remote, user, "list", "secrets", namespace), namespace
    assert not may(remote, user, "create", "pods", twin)
    assert not may(remote, user, "create", "rolebindings", twin, group=RBAC)
    assert not may(remote, user, "create", "resourcequotas", twin)
    assert not may(remote, user, "bind", "clusterroles", twin, group=RBAC,
                   name=identity.consumer_cluster_role)

    # as the identity itself: what the reviews said
    core = client.CoreV1Api(consumer_client(remote, tenant))
    core.create_namespaced_config_map(twin, {"metadata": {"name": "settings"}})
    assert "forbidden" in refusal(lambda: core.create_namespaced_config_map(
        other_twin, {"metadata": {"name": "settings"}}))


def test_an_older_enforcer_s_twin_namespace_is_rebound_with_nothing_recreated(
        remote: Any, identity: Identity, confined: Enforcer) -> None:
    """An older enforcer gave the consumer a Role of its own rules in each twin namespace and
    bound it; the new one binds the chart's ClusterRole instead and deletes that Role."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = f"{new_name('app')}-{consumer}"
    labels = ownership_labels(consumer, PROVIDER_ID)
    remote.core.create_namespace({"metadata": {"name": twin, "labels": labels}})
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    _, consumer_role, _ = chart_rights()
    rbac.create_namespaced_role(twin, {
        "metadata": {"name": TWIN_NAMESPACE_ROLE, "labels": labels},
        "rules": consumer_role["rules"]})
    rbac.create_namespaced_role_binding(twin, {
        **consumer_binding("Role", TWIN_NAMESPACE_ROLE, tenant),
        "metadata": {"name": TWIN_NAMESPACE_ROLE, "labels": labels}})
    core = client.CoreV1Api(consumer_client(remote, tenant))
    core.create_namespaced_config_map(twin, {"metadata": {"name": "before"}})
    shadowpods = ShadowPods(remote.api_client)
    pod_name = new_name("p")
    shadowpods.create(twin, shadowpod(pod_name, consumer))
    settled(shadowpods, twin, pod_name)
    uids = (remote.core.read_namespace(twin).metadata.uid,
            shadowpods.get(twin, pod_name)["metadata"]["uid"],
            remote.core.read_namespaced_pod(pod_name, twin).metadata.uid)

    # the map the older enforcer made it for, converged by the new one (as when it resumes)
    name = Maps(remote).create(tenant, {"app": twin})
    wait_for(lambda: phases(Maps(remote).current(tenant, name)) == {"app": "Accepted"})
    binding = wait_for(lambda: (found := rbac.read_namespaced_role_binding(
        TWIN_NAMESPACE_ROLE, twin)).role_ref.kind == "ClusterRole" and found,
        message="the binding was not rebound")
    assert binding.role_ref.name == identity.consumer_cluster_role
    wait_for(lambda: not [role for role in rbac.list_namespaced_role(twin).items],
             message="the older enforcer's Role was not deleted")

    core.create_namespaced_config_map(twin, {"metadata": {"name": "after"}})
    user = f"system:serviceaccount:{tenant}:{CONSUMER_SERVICE_ACCOUNT}"
    assert may(remote, user, "create", "shadowpods", twin, OFFLOADING_GROUP)
    assert uids == (remote.core.read_namespace(twin).metadata.uid,
                    shadowpods.get(twin, pod_name)["metadata"]["uid"],
                    remote.core.read_namespaced_pod(pod_name, twin).metadata.uid)
    log = confined.log_path.read_text()
    assert not refused_by_rbac(log), log[-3000:]
