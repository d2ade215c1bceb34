"""shared/forge/agent.py: a VirtualNode's agent is the objects the home chart renders for that
remote without the controller (the chart rendered with helm-python-sdk is the reference), owned
by the VirtualNode; the controller's hash says when one must be written again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.api.virtual_node import AgentStatus, VirtualNode, VirtualNodePhase
from shared.forge.agent import (
    KUBECONFIG_SUFFIX,
    MAX_NAME,
    RELEASE_NAME_SUFFIXES,
    SPEC_HASH_ANNOTATION,
    AgentTemplate,
    InvalidVirtualNode,
    agent_name,
    agent_name_refusal,
    agent_objects,
    agent_phase,
    deployment_readiness,
    is_namespace_grant,
    is_owned_by,
    lease_holder,
    namespace_grant,
    namespace_grant_refusal,
    needs_write,
    serving_accounts,
    status_patch,
    with_spec_hash,
)
from shared.wellknown import POOL_LABEL, REMOTE_CLUSTER_ID_LABEL
from tests.charts.helm import only, render
from tests.charts.test_home_agent_chart import CHART, CHART_AGENTS, FULL, KUBECONFIG

UID = "0b3c9a52-5f1e-4c43-9b38-8d5f0b1d2e11"
AGENT_KINDS = {"ServiceAccount", "Service", "Deployment", "PodDisruptionBudget", "Role",
               "RoleBinding"}
VARIANTS = {
    "full": FULL,
    "one replica, kubelet certificate, scheduling, annotations": {
        **FULL, "replicas": 1, "podAnnotations": {"prometheus.io/scrape": "true"},
        "kubelet": {"servingCertSecret": "kubelet-tls"}, "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "system", "operator": "Exists"}],
        "imagePullSecrets": [{"name": "registry"}], "image": {"tag": "1.2.3"}},
    "home CIDR remapped, own affinity": {
        **CHART_AGENTS, "clusterId": "home-1", "homePodCidr": "10.244.0.0/16", "redisUrl": "redis://cache:6379/0",
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        "remotes": [{"clusterId": "provider-3", "kubeconfig": KUBECONFIG,
                     "remappedHomePodCidr": "10.99.0.0/16", "notReadyTolerationSeconds": 60}]},
}


def template_of(values: dict[str, Any]) -> AgentTemplate:
    manifests = render(CHART, {**values, "controller": {"enabled": True}})
    data = only(manifests, "ConfigMap", "annex-home-agent-agent-template")["data"]
    return AgentTemplate.model_validate(json.loads(data["agent.json"]))


def virtual_node(manifest: dict[str, Any]) -> VirtualNode:
    return VirtualNode.model_validate(
        {**manifest, "metadata": {**manifest["metadata"], "uid": UID}})


def without_owner(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"}
    return {**obj, "metadata": metadata}


@pytest.mark.parametrize("values", VARIANTS.values(), ids=VARIANTS.keys())
def test_the_agent_is_what_the_chart_renders_for_that_remote(values: dict[str, Any]) -> None:
    template = template_of(values)
    charted = render(CHART, values)
    with_controller = render(CHART, {**values, "controller": {"enabled": True}})
    assert not [m for m in with_controller if m["kind"] in AGENT_KINDS
                and REMOTE_CLUSTER_ID_LABEL in m["metadata"].get("labels", {})]
    for remote in values["remotes"]:
        cluster_id = remote["clusterId"]
        expected = [m for m in charted if m["kind"] in AGENT_KINDS
                    and m["metadata"].get("labels", {}).get(REMOTE_CLUSTER_ID_LABEL) == cluster_id]
        assert expected
        # The VirtualNode the chart renders with the controller is the one it renders without.
        manifest = only(with_controller, "VirtualNode", cluster_id)
        assert manifest == only(charted, "VirtualNode", cluster_id)
        forged = agent_objects(virtual_node(manifest), template)
        key = lambda m: (m["kind"], m["metadata"]["name"])  # noqa: E731
        assert sorted(map(without_owner, forged), key=key) == sorted(expected, key=key)


def test_each_object_is_owned_by_the_virtual_node() -> None:
    template = template_of(FULL)
    node = virtual_node(only(render(CHART, FULL), "VirtualNode", "provider-1"))
    objects = agent_objects(node, template)
    assert {m["kind"] for m in objects} == AGENT_KINDS
    for obj in objects:
        assert obj["metadata"]["ownerReferences"] == [{
            "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
            "name": "provider-1", "uid": UID, "controller": True, "blockOwnerDeletion": True}]
        assert is_owned_by(obj, UID) and not is_owned_by(obj, "another-uid")


def test_a_virtual_node_without_credentials_or_with_half_a_cidr_makes_no_agent() -> None:
    template = template_of(FULL)
    manifest = only(render(CHART, FULL), "VirtualNode", "provider-1")
    spec = {k: v for k, v in manifest["spec"].items() if k != "kubeconfigSecretRef"}
    with pytest.raises(InvalidVirtualNode, match="kubeconfigSecretRef"):
        agent_objects(virtual_node({**manifest, "spec": spec}), template)
    half = {**manifest["spec"], "remappedPodCidr": None}
    with pytest.raises(InvalidVirtualNode, match="go together"):
        agent_objects(virtual_node({**manifest, "spec": half}), template)
    remapped = {**manifest["spec"], "remappedHomePodCidr": "10.9.0.0/16"}
    with pytest.raises(InvalidVirtualNode, match="homePodCidr"):
        agent_objects(virtual_node({**manifest, "spec": remapped}), template)


RELEASE_TEMPLATE = AgentTemplate(name_prefix="annex-home-agent", namespace="annex-system",
                                 image="annex:test", webhook_cert_secret="annex-home-agent-tls")


def names_of_agent(cluster_id: str) -> set[str]:
    """Every name the agent of `cluster_id` gets: its own, its kubeconfig Role's, and the
    chart's kubeconfig Secret's (truncated as Helm's `trunc 63 | trimSuffix "-"`)."""
    name = agent_name(RELEASE_TEMPLATE, cluster_id)
    return {name, f"{name}{KUBECONFIG_SUFFIX}",
            f"{name}{KUBECONFIG_SUFFIX}"[:MAX_NAME].removesuffix("-")}


def test_a_cluster_id_never_names_an_agent_after_the_release_or_another_agent() -> None:
    """The provider picks its cluster id: the ones the rule lets through make agents whose
    names are neither the release's own objects' nor another agent's, truncation included."""
    room = MAX_NAME - len(RELEASE_TEMPLATE.name_prefix) - 2  # the longest cluster id allowed
    long_id = "p" * room
    short = long_id[:room - 3]  # its kubeconfig Secret's name, truncated, ends with "-kub"
    candidates = {*RELEASE_NAME_SUFFIXES, "x", "provider-1", "agent", "controller-x",
                  *(f"{word}{KUBECONFIG_SUFFIX}" for word in [*RELEASE_NAME_SUFFIXES, "x"]),
                  long_id, f"{long_id}p", f"{long_id}q", f"{long_id}{KUBECONFIG_SUFFIX}",
                  short, f"{short}-k", f"{short}-kub"}
    release = {RELEASE_TEMPLATE.name_prefix,
               *(f"{RELEASE_TEMPLATE.name_prefix}-{word}" for word in RELEASE_NAME_SUFFIXES)}
    allowed = sorted(c for c in candidates if agent_name_refusal(RELEASE_TEMPLATE, c) is None)
    assert {"x", "provider-1", "agent", "controller-x", long_id, short, f"{short}-k"} <= set(
        allowed)
    for index, cluster_id in enumerate(allowed):
        assert not names_of_agent(cluster_id) & release, cluster_id
        for other in allowed[index + 1:]:
            assert not names_of_agent(cluster_id) & names_of_agent(other), (cluster_id, other)
    refused = {c: agent_name_refusal(RELEASE_TEMPLATE, c) for c in candidates}
    assert "a name of the release's own objects" in str(refused["controller"])
    assert "'x'" in str(refused[f"x{KUBECONFIG_SUFFIX}"])
    assert "at most 62" in str(refused[f"{long_id}p"])
    # Without the rule these collide: the controller's own name, x's kubeconfig Role, one name
    # for two long cluster ids, and a 63-character agent name that is another's truncated Secret.
    assert agent_name(RELEASE_TEMPLATE, "controller") in release
    assert agent_name(RELEASE_TEMPLATE, f"x{KUBECONFIG_SUFFIX}") in names_of_agent("x")
    assert agent_name(RELEASE_TEMPLATE, f"{long_id}pq") == agent_name(RELEASE_TEMPLATE,
                                                                      f"{long_id}pr")
    assert agent_name(RELEASE_TEMPLATE, f"{short}-kub") in names_of_agent(short)


def test_a_virtual_node_whose_cluster_id_names_a_release_object_makes_no_agent() -> None:
    template = template_of(FULL)
    manifest = only(render(CHART, FULL), "VirtualNode", "provider-1")
    spec = {**manifest["spec"], "clusterId": "controller"}
    with pytest.raises(InvalidVirtualNode, match="annex-home-agent-controller, a name of the "):
        agent_objects(virtual_node({**manifest, "spec": spec}), template)


def test_an_object_is_written_again_only_when_what_was_forged_changed() -> None:
    template = template_of(FULL)
    node = virtual_node(only(render(CHART, FULL), "VirtualNode", "provider-1"))
    deployment = with_spec_hash(next(m for m in agent_objects(node, template)
                                     if m["kind"] == "Deployment"))
    # What the API server returns carries defaults and status: still unchanged.
    stored = json.loads(json.dumps(deployment))
    stored["spec"]["revisionHistoryLimit"] = 10
    stored["status"] = {"readyReplicas": 1}
    assert not needs_write(stored, deployment)
    moved = node.model_copy(update={"spec": node.spec.model_copy(update={"node_name": "other"})})
    changed = with_spec_hash(next(m for m in agent_objects(moved, template)
                                  if m["kind"] == "Deployment"))
    assert changed["metadata"]["annotations"][SPEC_HASH_ANNOTATION] != deployment[
        "metadata"]["annotations"][SPEC_HASH_ANNOTATION]
    assert needs_write(stored, changed)
    assert deployment_readiness(stored) == "1/2"
    assert deployment_readiness(None) is None


def test_an_election_lease_holds_a_drain_until_released_or_expired() -> None:
    now = datetime(2026, 11, 24, 19, 0, tzinfo=UTC)
    held = {"spec": {"holderIdentity": "agent-0_1", "leaseDurationSeconds": 15,
                     "renewTime": "2026-11-24T18:59:50.000000Z"}}
    assert lease_holder(held, now) == "the agent leader agent-0_1 to release its Lease"
    assert lease_holder({"spec": {**held["spec"], "holderIdentity": ""}}, now) is None
    assert lease_holder(held, now + timedelta(seconds=6)) is None  # a leader killed
    assert lease_holder(None, now) is None


def test_the_phase_and_the_agent_readiness_are_written_when_they_change() -> None:
    template = template_of(FULL)
    node = virtual_node(only(render(CHART, FULL), "VirtualNode", "provider-1"))
    deployment = {"spec": {"replicas": 2}, "status": {"readyReplicas": 0}}
    assert agent_phase(node, None, refused=False) is VirtualNodePhase.CREATING
    assert agent_phase(node, deployment, refused=True) is VirtualNodePhase.REFUSED
    name = agent_name(template, "provider-1")
    patch = status_patch(node, VirtualNodePhase.CREATING, name, deployment)
    assert patch == {"status": {"phase": "Creating",
                                "agent": {"deployment": name, "ready": "0/2"}}}
    written = node.model_copy(update={"status": node.status.model_copy(update={
        "phase": VirtualNodePhase.CREATING, "agent": AgentStatus(deployment=name, ready="0/2")})})
    assert status_patch(written, VirtualNodePhase.CREATING, name, deployment) is None
    ready = {**deployment, "status": {"readyReplicas": 1}}
    assert agent_phase(written, ready, refused=False) is VirtualNodePhase.RUNNING
    assert status_patch(written, VirtualNodePhase.RUNNING, name, ready) == {
        "status": {"phase": "Running", "agent": {"deployment": name, "ready": "1/2"}}}
    deleted = written.model_copy(update={"metadata": written.metadata.model_copy(update={
        "deletion_timestamp": datetime(2026, 11, 24, 19, 0, tzinfo=UTC)})})
    assert agent_phase(deleted, ready, refused=False) is VirtualNodePhase.DRAINING


def test_the_agents_are_never_granted_the_release_or_system_namespaces() -> None:
    template = template_of(VARIANTS["full"])
    assert template.namespace_role
    assert namespace_grant_refusal(template, "apps") is None
    for namespace in (template.namespace, "kube-system", "kube-public", "kube-node-lease"):
        assert namespace_grant_refusal(template, namespace)
    grant = namespace_grant(template, "apps", ["annex-home-agent-b", "annex-home-agent-a"])
    assert grant["metadata"]["namespace"] == "apps"
    assert grant["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": template.namespace_role}
    assert grant["subjects"] == [  # each agent by its own account, in a stable order
        {"kind": "ServiceAccount", "name": name, "namespace": template.namespace}
        for name in ("annex-home-agent-a", "annex-home-agent-b")]
    assert is_namespace_grant(grant, template)
    assert not is_namespace_grant({**grant, "metadata": {**grant["metadata"], "labels": {}}},
                                  template)
    retired = {**grant, "metadata": {**grant["metadata"], "labels": {
        **template.selector_labels, "app.kubernetes.io/component": "agent-token-requests"}}}
    assert is_namespace_grant(retired, template)  # an earlier version's: the controller's too


def _virtual_node(cluster_id: str, node_name: str = "") -> VirtualNode:
    return VirtualNode.model_validate({
        "metadata": {"name": cluster_id, "namespace": "annex-system"},
        "spec": {"clusterId": cluster_id, "nodeName": node_name or None,
                 "kubeconfigSecretRef": {"name": f"{cluster_id}-kc"}}})


def _node_labels(cluster_id: str, **labels: str) -> dict[str, str]:
    return {REMOTE_CLUSTER_ID_LABEL: cluster_id, **labels}


def test_a_namespace_is_granted_to_the_agents_whose_node_its_cluster_selector_selects() -> None:
    template = template_of(VARIANTS["full"])
    nodes = {"liqo-east": _node_labels("east", region="east"),
             "liqo-west": _node_labels("west", region="west")}
    virtual_nodes = [_virtual_node("east"), _virtual_node("west"),
                     _virtual_node("unregistered"),  # its Node is not there yet
                     _virtual_node("agents")]  # a refused cluster id: no agent
    everyone = {"spec": {}}
    east_only = {"spec": {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "region", "operator": "In", "values": ["east"]}]}]}}}
    assert serving_accounts(everyone, template, virtual_nodes, nodes) == [
        agent_name(template, "east"), agent_name(template, "west")]
    assert serving_accounts(east_only, template, virtual_nodes, nodes) == [
        agent_name(template, "east")]
    assert serving_accounts(east_only, template, virtual_nodes, {}) == []


def test_a_provider_with_pools_is_granted_when_one_of_its_pools_nodes_is_selected() -> None:
    template = template_of(VARIANTS["full"])
    gpu = {"spec": {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpu", "operator": "In", "values": ["true"]}]}]}}}
    nodes = {"liqo-east-gpu": _node_labels("east", gpu="true", **{POOL_LABEL: "gpu"}),
             "liqo-east-cpu": _node_labels("east", **{POOL_LABEL: "cpu"}),
             # Labelled like a pool's node of east, but named otherwise: not east's.
             "liqo-west-gpu": _node_labels("east", gpu="true", **{POOL_LABEL: "gpu"})}
    virtual_nodes = [_virtual_node("east"), _virtual_node("west")]
    assert serving_accounts(gpu, template, virtual_nodes, nodes) == [agent_name(template, "east")]
    del nodes["liqo-east-gpu"]
    assert serving_accounts(gpu, template, virtual_nodes, nodes) == []
