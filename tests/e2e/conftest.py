"""End-to-end fixtures: the remote enforcer and the home agent as real processes against the
`home` and `remote` clusters (kubesim, or two real clusters through E2E_*_KUBECONFIG)."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from shared.api.quota import QUOTA
from tests.conftest import ClusterHandle
from tests.home_agent import conftest as agent_fixtures
from tests.home_agent.agentproc import unique_id
from tests.home_agent.conftest import RunningAgent
from tests.remote_enforcer.conftest import PROVIDER_ID, Enforcer, webhook_configuration

# The agent-process fixtures and the log-on-failure hook are the component tests' own.
crds = agent_fixtures.crds
start_agent = agent_fixtures.start_agent
pytest_runtest_makereport = agent_fixtures.pytest_runtest_makereport

E2E_WEBHOOK_DOMAIN = "enforcer.annex.e2e"
E2E_WEBHOOK_NAME = f"shadowpods.{E2E_WEBHOOK_DOMAIN}"


@pytest.fixture(scope="module")
def enforcer(remote: ClusterHandle, crds: None,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforcer]:
    with e2e_enforcer(remote, tmp_path_factory.mktemp("enforcer")) as process:
        yield process


E2E_ENFORCER_FLAGS = ("--offer-debounce-seconds", "0.1", "--region", "eu-west",
                      "--provider", "annex-e2e", "--node-failure-grace-seconds", "1",
                      "--offer-extended-resources", "nvidia.com/gpu")


@contextlib.contextmanager
def e2e_enforcer(remote: ClusterHandle, directory: Path,
                 extra_flags: tuple[str, ...] = ()) -> Iterator[Enforcer]:
    """The enforcer process (E2E_ENFORCER_FLAGS and `extra_flags`) with its webhooks registered
    (as the chart registers them), stopped afterwards."""
    process = Enforcer(remote.kubeconfig, directory, [*E2E_ENFORCER_FLAGS, *extra_flags])
    process.start()
    configuration = webhook_configuration(process, E2E_WEBHOOK_NAME, E2E_WEBHOOK_DOMAIN)
    registrations = client.AdmissionregistrationV1Api(remote.api_client)
    registrations.create_validating_webhook_configuration(configuration)
    try:
        yield process
    finally:
        registrations.delete_validating_webhook_configuration(E2E_WEBHOOK_NAME)
        process.stop()


def remote_pod_cidr(remote: ClusterHandle) -> str | None:
    if os.environ.get("E2E_REMOTE_POD_CIDR"):
        return os.environ["E2E_REMOTE_POD_CIDR"]
    return str(remote.sim.pod_cidr) if remote.sim is not None else None


def remapped_cidr(cidr: str) -> str:
    """A remapped range of the same size (the fabric's job; the agent only rewrites)."""
    network = ipaddress.ip_network(cidr)
    base = ipaddress.ip_address("100.64.0.0") if network.version == 4 else ipaddress.ip_address(
        "fd00:a::")
    return str(ipaddress.ip_network(f"{base}/{network.prefixlen}", strict=False))


Peer = Callable[..., RunningAgent]


@pytest.fixture
def peer(home: ClusterHandle, remote: ClusterHandle, enforcer: Enforcer, start_agent: Any,
         tmp_path: Path) -> Peer:
    """peer(*flags, service_policy=None): a home agent for the enforcer's cluster, with the
    permissions the charts give it on both sides (home: the home-agent chart's ClusterRole;
    remote: the confined consumer identity of the remote-enforcer chart), address remapping when
    the remote pod CIDR is known, and any extra agent flags; with `service_policy`, the
    consumer's Quota opens what it says (the provider admin's choice: closed by default)."""
    def start(*extra: str, service_policy: dict[str, Any] | None = None) -> RunningAgent:
        flags: list[str] = ["--agent-ip", "192.0.2.10"]
        cidr = remote_pod_cidr(remote)
        if cidr:
            flags += ["--remote-pod-cidr", cidr, "--remapped-pod-cidr", remapped_cidr(cidr)]
        home_id = unique_id("home")
        remote_kubeconfig = consumer_kubeconfig(remote, home_id, tmp_path)
        if service_policy is not None:
            open_service_policy(remote, home_id, service_policy)
        agent: RunningAgent = start_agent(
            *flags, *extra, remote_id=PROVIDER_ID, home_id=home_id,
            remote_kubeconfig=remote_kubeconfig,
            home_kubeconfig=agent_home_kubeconfig(home, tmp_path))
        return agent
    return start


@pytest.fixture
def peered(peer: Peer) -> RunningAgent:
    """The agent `peer` starts with no extra flags."""
    return peer()


def _kubeconfig_with_token(handle: ClusterHandle, token: str, path: Path) -> Path:
    config = yaml.safe_load(handle.kubeconfig.read_text())
    for entry in config["users"]:
        entry["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


AGENT_HOME_NAMESPACE = "annex-e2e-agents"


@functools.cache
def _agent_home_manifests() -> list[dict[str, Any]]:
    """The home-agent chart's manifests for the e2e agents' home identity, rendered once a
    session (a rendering takes about a second; every agent the tests peer needs it)."""
    from tests.charts.helm import ROOT, render

    # Without the home controller: one agent's identity only (the controller's is its own;
    # each agent has its own account, the chart's remote's here).
    return render(ROOT / "charts" / "home-agent",
                  {"clusterId": "e2e", "controller": {"enabled": False},
                   "remotes": [{"clusterId": "e2e", "kubeconfigSecret": "e2e-kubeconfig"}]},
                  release="annex", namespace=AGENT_HOME_NAMESPACE)


def _agent_namespace(home: ClusterHandle) -> None:
    try:
        home.core.create_namespace({"metadata": {"name": AGENT_HOME_NAMESPACE}})
    except client.exceptions.ApiException as error:
        if error.status != 409:
            raise


def agent_kubelet_service(home: ClusterHandle) -> str:
    """`--kubelet-service` of the e2e agents' identity: the Service the chart renders in front
    of the agent's replicas (its name is the agent's, which the agent's Role lets it read),
    made once; "namespace/name"."""
    name = next(m for m in _agent_home_manifests()
                if m["kind"] == "ServiceAccount")["metadata"]["name"]
    _agent_namespace(home)
    try:
        home.core.create_namespaced_service(AGENT_HOME_NAMESPACE, {
            "metadata": {"name": name},
            "spec": {"selector": {"app": name},
                     "ports": [{"name": "kubelet", "port": 10250, "targetPort": 10250}]}})
    except client.exceptions.ApiException as error:
        if error.status != 409:
            raise
    return f"{AGENT_HOME_NAMESPACE}/{name}"


def agent_home_kubeconfig(home: ClusterHandle, directory: Path) -> Path:
    """The agent's home identity exactly as the home-agent chart grants it (its ServiceAccount,
    ClusterRole, Role and bindings, rendered from the chart), as a kubeconfig with a token."""
    from kubernetes import utils

    namespace = AGENT_HOME_NAMESPACE
    manifests = _agent_home_manifests()
    _agent_namespace(home)
    for manifest in manifests:
        # The Roles: the replicas' election Lease, the heartbeat Leases, the remote's kubeconfig.
        if manifest["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                "RoleBinding"):
            try:
                utils.create_from_dict(home.api_client, manifest)
            except utils.FailToCreateError as error:
                if any(e.status != 409 for e in error.api_exceptions):
                    raise
    account = next(m for m in manifests if m["kind"] == "ServiceAccount")["metadata"]["name"]
    token = home.core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    return _kubeconfig_with_token(home, token, directory / "agent-home.kubeconfig")


@functools.lru_cache(maxsize=64)
def _consumer_side(home_cluster_id: str) -> tuple[list[dict[str, Any]], str, str]:
    """The remote-enforcer chart's manifests for one consumer, its tenant namespace and the name
    of its confined `consumer` ServiceAccount (rendered once per consumer: a peering, its
    Quota and its user name all need them)."""
    from tests.charts.helm import ROOT, render

    manifests = render(ROOT / "charts" / "remote-enforcer",
                       {"clusterId": PROVIDER_ID, "consumers": [{"clusterId": home_cluster_id}]})
    tenant = next(m for m in manifests if m["kind"] == "Namespace")["metadata"]["name"]
    account = next(m for m in manifests if m["kind"] == "ServiceAccount"
                   and m["metadata"].get("namespace") == tenant)["metadata"]["name"]
    return manifests, tenant, account


def open_service_policy(remote: ClusterHandle, home_cluster_id: str,
                        service_policy: dict[str, Any]) -> None:
    """The consumer's Quota, in its tenant namespace, with this servicePolicy (camelCase)."""
    _, tenant, _ = _consumer_side(home_cluster_id)
    client.CustomObjectsApi(remote.api_client).create_namespaced_custom_object(
        QUOTA.group, QUOTA.version, tenant, QUOTA.plural,
        {**QUOTA.type_meta(),
         "metadata": {"name": home_cluster_id},
         "spec": {"consumerClusterId": home_cluster_id, "servicePolicy": service_policy}})


def consumer_user(home_cluster_id: str) -> str:
    """The user name the remote API server authenticates the agent as (its ServiceAccount)."""
    _, tenant, account = _consumer_side(home_cluster_id)
    return f"system:serviceaccount:{tenant}:{account}"


def consumer_kubeconfig(remote: ClusterHandle, home_cluster_id: str, directory: Path) -> Path:
    """The provider side of a peering as the remote-enforcer chart sets it up (its own
    manifests: tenant namespace, the confined `consumer` ServiceAccount, its Role/RoleBinding),
    and a kubeconfig authenticating as that identity (a TokenRequest token)."""
    from kubernetes import utils

    manifests, tenant, account = _consumer_side(home_cluster_id)
    for manifest in manifests:
        if manifest.get("metadata", {}).get("namespace") == tenant or (
                manifest["kind"] == "Namespace"):
            if manifest["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding"):
                utils.create_from_dict(remote.api_client, manifest)
    token = remote.core.create_namespaced_service_account_token(
        account, tenant, {"spec": {"expirationSeconds": 3600}}).status.token
    return _kubeconfig_with_token(remote, token,
                                  directory / f"consumer-{home_cluster_id}.kubeconfig")
