"""What a stolen home agent or home controller identity may do on the home API server, asked
of the API server itself (SubjectAccessReview), with the rights read from the home chart and
from the objects the controller makes for each agent (shared/forge/agent.py); the controller
runs with its chart identity, so the grants it makes pass the API server's escalation check.

An agent may write its virtual node's heartbeat Lease and its election Lease, follow and renew
its own kubeconfig Secret, and read and request tokens in the namespaces offloaded to it; it
may not read a Secret or a ConfigMap anywhere else, request a token for kube-system's
accounts, touch kube-system's leader Leases, nor read or write another remote's kubeconfig
Secret. The controller may grant the offloaded-namespace role and nothing else (not
cluster-admin), and grants it in offloaded namespaces only, to the agents they are offloaded
to, never the release's own. Within these rights the controller's
admission webhook confines each agent to its own virtual node (test_agent_admission.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, utils

from shared.api.virtual_node import VIRTUAL_NODE, VirtualNode
from shared.forge.agent import AgentTemplate, agent_name, agent_objects, namespace_grant_name
from shared.wellknown import (
    REMOTE_CLUSTER_ID_LABEL,
    TYPE_LABEL,
    TYPE_VIRTUAL_NODE,
    VIRTUAL_NODE_TAINT_EFFECT,
    VIRTUAL_NODE_TAINT_KEY,
)
from tests.charts.helm import ROOT, only, render
from tests.conftest import ClusterHandle
from tests.e2e.conftest import _kubeconfig_with_token
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id
from tests.home_agent.play import offload_namespace

CHART = ROOT / "charts" / "home-agent"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@dataclass
class Release:
    namespace: str
    template: AgentTemplate
    controller: str  # the controller's ServiceAccount
    agents: dict[str, str]  # remote cluster id -> the agent's ServiceAccount
    secrets: dict[str, str]  # remote cluster id -> its kubeconfig Secret


def _create(home: ClusterHandle, manifest: dict[str, Any]) -> None:
    try:
        utils.create_from_dict(home.api_client, manifest)
    except utils.FailToCreateError as error:
        if any(e.status != 409 for e in error.api_exceptions):
            raise


def _delete(home: ClusterHandle, manifest: dict[str, Any]) -> None:
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    name, namespace = manifest["metadata"]["name"], manifest["metadata"].get("namespace")
    try:
        if manifest["kind"] == "ClusterRole":
            rbac.delete_cluster_role(name)
        elif manifest["kind"] == "ClusterRoleBinding":
            rbac.delete_cluster_role_binding(name)
        elif manifest["kind"] == "Role" and namespace == "kube-node-lease":
            rbac.delete_namespaced_role(name, namespace)
        elif manifest["kind"] == "RoleBinding" and namespace == "kube-node-lease":
            rbac.delete_namespaced_role_binding(name, namespace)
    except client.exceptions.ApiException as error:
        if error.status != 404:
            raise


def _virtual_node(namespace: str, cluster_id: str) -> VirtualNode:
    return VirtualNode.model_validate({
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
        "metadata": {"name": cluster_id, "namespace": namespace, "uid": "u-" + cluster_id},
        "spec": {"clusterId": cluster_id, "kubeconfigSecretRef": {"name": f"{cluster_id}-kc"}}})


def install(home: ClusterHandle, namespace: str, values: dict[str, Any]) -> Iterator[Release]:
    """The chart's RBAC (with the controller) in `namespace`, under a release of its own, and
    the per-agent objects the controller makes for two remotes (their ServiceAccounts, Roles
    and RoleBindings, the Deployments left out: no agent runs here)."""
    release = unique_id("r")
    manifests = render(CHART, {"clusterId": "home", **values}, release=release,
                       namespace=namespace)
    rbac = [m for m in manifests if m["kind"] in RBAC_KINDS]
    template = AgentTemplate.model_validate(json.loads(
        only(manifests, "ConfigMap")["data"]["agent.json"]))
    agents, secrets = {}, {}
    try:
        for manifest in rbac:
            _create(home, manifest)
        for cluster_id in ("remote-a", "remote-b"):
            virtual_node = _virtual_node(namespace, cluster_id)
            for obj in agent_objects(virtual_node, template):
                if obj["kind"] in RBAC_KINDS:
                    obj["metadata"].pop("ownerReferences")
                    _create(home, obj)
            agents[cluster_id] = agent_name(template, cluster_id)
            secrets[cluster_id] = f"{cluster_id}-kc"
            home.core.create_namespaced_secret(namespace, {
                "metadata": {"name": secrets[cluster_id]},
                "data": {"kubeconfig": base64.b64encode(b"kind: Config\n").decode()}})
        controller = only([m for m in rbac if m["metadata"]["name"].endswith("-controller")],
                          "ServiceAccount")["metadata"]["name"]
        yield Release(namespace, template, controller, agents, secrets)
    finally:
        for manifest in rbac:
            _delete(home, manifest)


@pytest.fixture
def release(home: ClusterHandle, namespace: str) -> Iterator[Release]:
    yield from install(home, namespace, {})


def may(home: ClusterHandle, release: Release, account: str, verb: str, resource: str, *,
        namespace: str = "", name: str = "", group: str = "", subresource: str = "") -> bool:
    """The API server's answer for `account` of the release namespace (with the groups its
    tokens carry)."""
    attributes = {"verb": verb, "resource": resource, "group": group, "version": "v1"}
    for key, value in (("namespace", namespace), ("name", name), ("subresource", subresource)):
        if value:
            attributes[key] = value
    review = client.AuthorizationV1Api(home.api_client).create_subject_access_review({"spec": {
        "user": f"system:serviceaccount:{release.namespace}:{account}",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{release.namespace}",
                   "system:authenticated"],
        "resourceAttributes": attributes}})
    return bool(review.status.allowed)


LEASES = "coordination.k8s.io"


def test_a_stolen_agent_identity_keeps_to_its_leases_and_its_own_kubeconfig(
        home: ClusterHandle, release: Release) -> None:
    agent, ns = release.agents["remote-a"], release.namespace
    # Its heartbeat in kube-node-lease and its election Lease at home: yes.
    assert may(home, release, agent, "patch", "leases", group=LEASES,
               namespace="kube-node-lease", name="liqo-remote-a")
    assert may(home, release, agent, "create", "leases", group=LEASES,
               namespace="kube-node-lease")
    assert may(home, release, agent, "update", "leases", group=LEASES, namespace=ns,
               name="annex-home-agent-remote-a")
    # kube-system's leader Leases (the controller-manager's, the scheduler's): no.
    for verb in ("patch", "update", "create", "delete"):
        assert not may(home, release, agent, verb, "leases", group=LEASES,
                       namespace="kube-system", name="kube-controller-manager")
    # Its own kubeconfig Secret followed and renewed; the other remote's not written.
    for verb in ("get", "list", "watch", "patch"):
        assert may(home, release, agent, verb, "secrets", namespace=ns,
                   name=release.secrets["remote-a"])
    for verb in ("get", "list", "watch", "patch", "update", "delete"):
        assert not may(home, release, agent, verb, "secrets", namespace=ns,
                       name=release.secrets["remote-b"])
    # With the Secret reflection on (the default), no Secret or ConfigMap of any other
    # namespace either, until one is offloaded to it.
    for resource in ("secrets", "configmaps", "persistentvolumeclaims"):
        assert not may(home, release, agent, "list", resource)
        assert not may(home, release, agent, "list", resource, namespace="kube-system")


def _registered(home: ClusterHandle, release: Release, cluster_id: str,
                labels: dict[str, str]) -> None:
    """The VirtualNode of `cluster_id` and its virtual Node, labelled `labels` (as its agent
    would label it), tainted so that nothing runs there."""
    client.CustomObjectsApi(home.api_client).create_namespaced_custom_object(
        VIRTUAL_NODE.group, VIRTUAL_NODE.version, release.namespace, VIRTUAL_NODE.plural,
        {**VIRTUAL_NODE.type_meta(),
         "metadata": {"name": cluster_id},
         "spec": {"clusterId": cluster_id,
                  "kubeconfigSecretRef": {"name": release.secrets[cluster_id]}}})
    home.core.create_node({"metadata": {"name": f"liqo-{cluster_id}", "labels": {
        TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: cluster_id, **labels}},
        "spec": {"taints": [{"key": VIRTUAL_NODE_TAINT_KEY, "value": "true",
                             "effect": VIRTUAL_NODE_TAINT_EFFECT}]}})


EAST = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "region", "operator": "In", "values": ["east"]}]}]}


def test_an_agent_reads_and_requests_tokens_only_in_the_namespaces_offloaded_to_it(
        home: ClusterHandle, release: Release, namespace: str, start_controller: Any,
        tmp_path: Path) -> None:
    """The controller (with its chart identity) binds the offloaded-namespace role in a
    namespace for the agents whose virtual node its NamespaceOffloading selects, follows the
    Nodes' labels, and takes it back with the NamespaceOffloading; never in the release's own
    namespace; an earlier version's grant goes."""
    a, b = release.agents["remote-a"], release.agents["remote-b"]
    apps, east = f"{namespace}-apps", f"{namespace}-east"
    nodes = ("liqo-remote-a", "liqo-remote-b")
    for name in (apps, east):
        home.core.create_namespace({"metadata": {"name": name}})
    rbac = client.RbacAuthorizationV1Api(home.api_client)
    # What an earlier version granted every agent: gone once the controller has listed it.
    retired = rbac.create_namespaced_role_binding(apps, {
        "metadata": {"name": "retired-token-requests", "labels": {
            **release.template.selector_labels,
            "app.kubernetes.io/component": "agent-token-requests"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": release.template.namespace_role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                      "name": f"system:serviceaccounts:{release.namespace}"}]})
    try:
        _registered(home, release, "remote-a", {"region": "east"})
        _registered(home, release, "remote-b", {"region": "west"})
        token = home.core.create_namespaced_service_account_token(
            release.controller, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
        template = tmp_path / "agent.json"
        template.write_text(release.template.model_dump_json(by_alias=True))
        flags = ("--kubeconfig", str(_kubeconfig_with_token(
            home, token, tmp_path / "controller.kubeconfig")), "--namespace", namespace,
            "--agent-template", str(template))
        controller_process = start_controller(*flags)

        def acts(agent: str, where: str) -> bool:
            """Reads the namespace's Secrets and requests its tokens (all or nothing)."""
            rights = [may(home, release, agent, verb, "secrets", namespace=where)
                      for verb in ("get", "list", "watch")]
            rights.append(may(home, release, agent, "create", "serviceaccounts",
                              namespace=where, name="default", subresource="token"))
            assert len(set(rights)) == 1, rights
            return rights[0]

        def acting() -> dict[str, set[str]]:
            return {agent: {where for where in (apps, east) if acts(agent, where)}
                    for agent in (a, b)}

        wait_for(lambda: not rbac.list_namespaced_role_binding(
            apps, field_selector="metadata.name=retired-token-requests").items,
            timeout=30, message="the earlier version's grant deleted")
        assert acting() == {a: set(), b: set()}
        offload_namespace(home, apps)
        offload_namespace(home, east, clusterSelector=EAST)
        wait_for(lambda: acting() == {a: {apps, east}, b: {apps}}, timeout=30,
                 message="apps granted to both agents, east to the east one only")
        grant = rbac.read_namespaced_role_binding(namespace_grant_name(release.template), east)
        assert grant.role_ref.name == release.template.namespace_role
        assert [(s.kind, s.name) for s in grant.subjects] == [("ServiceAccount", a)]
        # Nowhere else: not the system namespaces, not the release's own (the other agents'
        # kubeconfig Secrets), not even offloaded.
        offload_namespace(home, namespace)
        wait_for(lambda: "no agent may act there" in controller_process.output(),
                 timeout=30, message="the release namespace's grant refused")
        for agent in (a, b):
            for where in ("kube-system", "default"):
                assert not acts(agent, where)
            assert not may(home, release, agent, "list", "secrets", namespace=namespace)
            assert not may(home, release, agent, "list", "configmaps")  # cluster-wide
        # The grants follow the Nodes' labels.
        home.core.patch_node(nodes[1], {"metadata": {"labels": {"region": "east"}}})
        wait_for(lambda: acting() == {a: {apps, east}, b: {apps, east}}, timeout=30,
                 message="east granted to the relabelled agent")
        # The controller may grant that role, and no other, and requests no token itself.
        controller = release.controller
        assert may(home, release, controller, "bind", "clusterroles",
                   group="rbac.authorization.k8s.io", namespace="kube-system",
                   name=release.template.namespace_role)
        assert not may(home, release, controller, "bind", "clusterroles",
                       group="rbac.authorization.k8s.io", name="cluster-admin")
        assert not may(home, release, controller, "escalate", "clusterroles",
                       group="rbac.authorization.k8s.io", name="cluster-admin")
        assert not may(home, release, controller, "create", "serviceaccounts",
                       namespace="kube-system", name="default", subresource="token")
        assert not may(home, release, controller, "list", "secrets", namespace="kube-system")
        assert not may(home, release, controller, "create", "clusterrolebindings",
                       group="rbac.authorization.k8s.io")

        def withdraw(where: str) -> None:
            client.CustomObjectsApi(home.api_client).delete_namespaced_custom_object(
                "offloading.liqo.io", "v1beta1", where, "namespaceoffloadings", "offloading")

        withdraw(east)
        wait_for(lambda: acting() == {a: {apps}, b: {apps}}, timeout=30,
                 message="the grant gone with the NamespaceOffloading")
        # Withdrawn while the controller is down: the grant goes once it is back.
        controller_process.stop()
        withdraw(apps)
        start_controller(*flags)
        wait_for(lambda: acting() == {a: set(), b: set()}, timeout=30,
                 message="the grant left behind found and deleted at start")
    finally:
        for name in (apps, east):
            home.core.delete_namespace(name)
        for name in nodes:
            try:
                home.core.delete_node(name)
            except client.exceptions.ApiException as error:
                if error.status != 404:
                    raise
        del retired


def test_without_api_server_support_no_identity_may_request_a_token(
        home: ClusterHandle, namespace: str) -> None:
    for release in install(home, namespace, {"enableApiserverSupport": False}):
        for account in (*release.agents.values(), release.controller):
            assert not may(home, release, account, "create", "serviceaccounts",
                           namespace=namespace, name="default", subresource="token")


def test_without_the_secret_reflection_an_agent_reads_its_kubeconfig_secret_and_no_other(
        home: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    """It follows its Secret as the agent does: a list and watch pinned by metadata.name."""
    for release in install(home, namespace, {"reflection": {"secret": {"workers": 0}}}):
        agent = release.agents["remote-a"]
        assert not may(home, release, agent, "get", "secrets", namespace=namespace,
                       name=release.secrets["remote-b"])
        assert not may(home, release, agent, "list", "secrets", namespace="kube-system")
        token = home.core.create_namespaced_service_account_token(
            agent, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
        as_agent = client.CoreV1Api(client.ApiClient(_configuration(home, token)))
        own = as_agent.list_namespaced_secret(
            namespace, field_selector=f"metadata.name={release.secrets['remote-a']}")
        assert [s.metadata.name for s in own.items] == [release.secrets["remote-a"]]
        with pytest.raises(client.exceptions.ApiException) as refused:
            as_agent.list_namespaced_secret(
                namespace, field_selector=f"metadata.name={release.secrets['remote-b']}")
        assert refused.value.status == 403


def _configuration(home: ClusterHandle, token: str) -> client.Configuration:
    configuration = client.Configuration()
    base = home.api_client.configuration
    configuration.host, configuration.ssl_ca_cert = base.host, base.ssl_ca_cert
    configuration.verify_ssl = base.verify_ssl
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return configuration


def test_the_chart_s_admission_policy_refuses_a_stolen_controller_token_grants_there(
        home: ClusterHandle, release: Release) -> None:
    """RBAC lets the controller bind the offloaded-namespace role in any namespace; the chart's
    ValidatingAdmissionPolicy (Kubernetes 1.30+) refuses it the system namespaces and the
    release's own, as the controller's code does. Dry runs: nothing is granted if one passed."""
    admission = client.AdmissionregistrationV1Api(home.api_client)
    try:
        admission.list_validating_admission_policy()
    except client.exceptions.ApiException as error:
        if error.status != 404:
            raise
        pytest.skip("the API server serves no ValidatingAdmissionPolicy (before 1.30)")
    # rendered as the release's: its full name is the release name
    manifests = render(CHART, {"clusterId": "home"}, release=release.template.name_prefix,
                       namespace=release.namespace)
    policy = only(manifests, "ValidatingAdmissionPolicy")
    binding = only(manifests, "ValidatingAdmissionPolicyBinding")
    admission.create_validating_admission_policy(policy)
    admission.create_validating_admission_policy_binding(binding)
    elsewhere = f"{release.namespace}-apps"
    home.core.create_namespace({"metadata": {"name": elsewhere}})
    token = home.core.create_namespaced_service_account_token(
        release.controller, release.namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    rbac = client.RbacAuthorizationV1Api(client.ApiClient(_configuration(home, token)))
    grant = {"metadata": {"name": "stolen"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
        "name": release.template.namespace_role}, "subjects": [{
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
            "name": f"system:serviceaccounts:{release.namespace}"}]}
    denied = (f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding "
              f"'{binding['metadata']['name']}' denied request: the agents are never granted "
              "rights in ")

    def refusal(namespace: str) -> str | None:
        try:
            rbac.create_namespaced_role_binding(namespace, grant, dry_run="All")
        except client.exceptions.ApiException as error:
            assert error.status == 403, error.body
            return str(json.loads(error.body)["message"])
        return None

    try:
        for namespace in ("kube-system", "kube-public", "kube-node-lease", release.namespace):
            message = wait_for(lambda namespace=namespace: refusal(namespace),
                               message=f"a grant in {namespace} was not refused")
            assert f"{denied}{namespace}: " in message, message
        assert refusal(elsewhere) is None
    finally:
        admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        admission.delete_validating_admission_policy(policy["metadata"]["name"])
        home.core.delete_namespace(elsewhere)
