"""An agent reads the namespaces offloaded to it and nothing else: run with the home chart's
identity as the home controller leaves it (the agents' ClusterRole, no Secret or ConfigMap of
any namespace; the offloaded-namespace role bound in one namespace, as the controller binds
it), it reflects that namespace, keeps listing the other one it was not granted (the API server
refuses, nothing of it is decided), and reflects it as soon as it is granted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from shared.forge.agent import AgentTemplate
from tests.charts.helm import only, render
from tests.conftest import ClusterHandle
from tests.e2e.conftest import _kubeconfig_with_token
from tests.helpers import wait_for
from tests.home_agent.play import extend
from tests.home_controller.test_rights import CHART, RBAC_KINDS, _create, _delete

AGENT = "agent-x"


def _configmap_copied(remote: ClusterHandle, twin: str) -> bool:
    try:
        remote.core.read_namespaced_config_map("settings", twin)
    except client.exceptions.ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.fixture
def confined_identity(home: ClusterHandle, namespace: str,
                      tmp_path: Path) -> Iterator[tuple[Path, AgentTemplate]]:
    """A kubeconfig of an agent account of a release installed in `namespace`, with the
    controller: what RBAC gives every agent, and nothing in any offloaded namespace yet."""
    manifests = render(CHART, {"clusterId": "home"}, release="confined", namespace=namespace)
    rbac = [m for m in manifests if m["kind"] in RBAC_KINDS
            and m["kind"] != "ServiceAccount"]
    template = AgentTemplate.model_validate(json.loads(
        only(manifests, "ConfigMap")["data"]["agent.json"]))
    try:
        for manifest in rbac:
            _create(home, manifest)
        home.core.create_namespaced_service_account(namespace, {"metadata": {"name": AGENT}})
        token = home.core.create_namespaced_service_account_token(
            AGENT, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
        yield _kubeconfig_with_token(home, token, tmp_path / "agent.kubeconfig"), template
    finally:
        for manifest in rbac:
            _delete(home, manifest)


def _grant(home: ClusterHandle, where: str, namespace: str, template: AgentTemplate) -> None:
    """What the home controller binds in a namespace offloaded to the agent."""
    client.RbacAuthorizationV1Api(home.api_client).create_namespaced_role_binding(where, {
        "metadata": {"name": "agents"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": template.namespace_role},
        "subjects": [{"kind": "ServiceAccount", "name": AGENT, "namespace": namespace}]})


def test_an_agent_reads_only_the_namespaces_granted_to_it_and_waits_for_the_others(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        confined_identity: tuple[Path, AgentTemplate], start_agent: Any) -> None:
    """(The identity first: the agent is stopped before its rights go.)"""
    kubeconfig, template = confined_identity
    granted, refused = f"{namespace}-granted", f"{namespace}-refused"
    for name in (granted, refused):
        home.core.create_namespace({"metadata": {"name": name}})
    try:
        for name in (granted, refused):
            home.core.create_namespaced_config_map(name, {"metadata": {"name": "settings"},
                                                          "data": {"mode": name}})
        _grant(home, granted, namespace, template)
        agent = start_agent("--enable-apiserver-support=false", home_kubeconfig=kubeconfig)
        twins = {name: extend(home, remote, agent, name) for name in (granted, refused)}
        wait_for(lambda: _configmap_copied(remote, twins[granted]), timeout=30,
                 message="the granted namespace's ConfigMap reflected")
        wait_for(lambda: f"/namespaces/{refused}/configmaps failed (retry in"
                 in agent.process.output(), timeout=30,
                 message="the refused namespace's listing refused (and retried)")
        assert not _configmap_copied(remote, twins[refused])
        assert agent.process.popen.poll() is None  # still running: a refusal stops nothing
        _grant(home, refused, namespace, template)
        wait_for(lambda: _configmap_copied(remote, twins[refused]), timeout=60,
                 message="the namespace reflected once granted")
    finally:
        for name in (granted, refused):
            home.core.delete_namespace(name)
