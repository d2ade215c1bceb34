"""`annexctl peer` creates the consumer identity on the provider and installs its kubeconfig at
home; the identity can do what the home agent needs in its tenant namespace and nothing else;
`annexctl unpeer` removes both."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.quota import QUOTA, PodPolicy, PodSecurityLevel
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.shadowpod import SHADOWPOD
from tests.annexctl.conftest import Annexctl, minted_kubeconfig, peer_flags
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id
from tests.kubesim.version import at_least


@dataclass
class Peering:
    flags: list[str]
    home_id: str
    remote_id: str
    namespace: str  # home, where the Secret goes
    tenant: str

    @property
    def secret(self) -> str:
        return f"{self.remote_id}-kubeconfig"


@pytest.fixture
def peering(home: ClusterHandle, remote: ClusterHandle, crds: None) -> Iterator[Peering]:
    home_id, remote_id = unique_id("home"), unique_id("provider")
    namespace = unique_id("annexctl")
    yield Peering(peer_flags(home, remote, home_id, remote_id, namespace), home_id, remote_id,
                  namespace, f"annex-tenant-{home_id}")
    for cluster, name in ((home, namespace), (remote, f"annex-tenant-{home_id}")):
        try:
            cluster.core.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise


def _allowed(call: object) -> bool:
    try:
        call()  # type: ignore[operator]
        return True
    except ApiException as error:
        if error.status == 403:
            return False
        raise


def test_peer_creates_an_identity_confined_to_its_tenant_namespace(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, peering: Peering,
        tmp_path: Path) -> None:
    run = annexctl("peer", *peering.flags, "--quota", "cpu=4,memory=8Gi",
                   "--limits-enforcement", "Soft", "-o", "json")
    assert run.code == 0, run.err
    report = run.json()
    assert report["tenantNamespace"] == peering.tenant
    assert report["user"] == f"system:serviceaccount:{peering.tenant}:consumer"
    assert report["kubeconfigSecret"] == {"namespace": peering.namespace, "name": peering.secret}

    api = config.new_client_from_config(config_file=str(minted_kubeconfig(
        home, peering.namespace, peering.secret, tmp_path)))
    core, dynamic = client.CoreV1Api(api), DynamicClient(api)
    maps = dynamic.resources.get(api_version=NAMESPACE_MAP.api_version, kind=NAMESPACE_MAP.kind)
    offers = dynamic.resources.get(api_version=RESOURCE_OFFER.api_version,
                                   kind=RESOURCE_OFFER.kind)
    shadows = dynamic.resources.get(api_version=SHADOWPOD.api_version, kind=SHADOWPOD.kind)
    tenant = peering.tenant
    # What the agent needs in its tenant namespace.
    assert _allowed(lambda: maps.create(namespace=tenant, body={
        **NAMESPACE_MAP.type_meta(),
        "metadata": {"name": "check"}, "spec": {"desiredMapping": {}}}))
    assert _allowed(lambda: maps.delete(namespace=tenant, name="check"))
    assert _allowed(lambda: offers.get(namespace=tenant))
    assert _allowed(lambda: core.list_namespaced_event(tenant))
    # Nothing more there, nothing elsewhere.
    assert not _allowed(lambda: core.list_namespaced_secret(tenant))
    assert not _allowed(lambda: shadows.get(namespace=tenant))
    assert not _allowed(lambda: core.list_namespaced_pod("default"))
    assert not _allowed(lambda: maps.get(namespace="default"))
    assert not _allowed(lambda: core.list_namespace())
    assert not _allowed(lambda: core.create_namespace({"metadata": {"name": unique_id("x")}}))

    again = annexctl("peer", *peering.flags, "--quota", "cpu=4,memory=8Gi",
                     "--limits-enforcement", "Soft", "-o", "json")
    assert again.code == 0, again.err
    actions = {(o["cluster"], o["kind"]): o["action"] for o in again.json()["objects"]}
    # A renewed token. Before tokens carried a `jti` claim, two TokenRequests in the same
    # second could give the same token, and the Secret was then unchanged.
    renewed = actions.pop(("home", "Secret"))
    if at_least(remote, JTI_SINCE):  # the provider mints it
        assert renewed == "configured"
    else:
        assert renewed in ("configured", "unchanged")
    assert set(actions.values()) == {"unchanged"}


JTI_SINCE = (1, 30)
"""The release whose service-account tokens carry a unique `jti` claim by default (the
ServiceAccountTokenJTI feature: alpha in 1.29, on by default from 1.30)."""


def test_unpeer_removes_the_identity_and_the_home_secret(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, peering: Peering,
        tmp_path: Path) -> None:
    assert annexctl("peer", *peering.flags).code == 0
    minted = client.CoreV1Api(config.new_client_from_config(config_file=str(minted_kubeconfig(
        home, peering.namespace, peering.secret, tmp_path))))

    run = annexctl("unpeer", *peering.flags)

    assert run.code == 0, run.err
    assert f"Namespace  {peering.tenant}" in run.out or peering.tenant in run.out
    with pytest.raises(ApiException) as gone:
        home.core.read_namespaced_secret(peering.secret, peering.namespace)
    assert gone.value.status == 404
    wait_for(lambda: peering.tenant not in {
        n.metadata.name for n in remote.core.list_namespace().items}, timeout=60,
        message="the tenant namespace is deleted")
    with pytest.raises(ApiException) as refused:
        minted.list_namespaced_event(peering.tenant)
    assert refused.value.status == 401  # the token died with its ServiceAccount

    again = annexctl("unpeer", *peering.flags)
    assert again.code == 0 and "already unpeered" in again.out


def test_peer_leaves_a_consumer_the_chart_declares_as_the_chart_made_it(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, peering: Peering) -> None:
    from kubernetes import utils

    from tests.charts.helm import ROOT, render

    manifests = render(ROOT / "charts" / "remote-enforcer",
                       {"clusterId": "p", "consumers": [{"clusterId": peering.home_id}]})
    for manifest in manifests:  # the consumer's built-in objects
        if manifest["kind"] != "Quota" and peering.tenant in (
                manifest["metadata"]["name"], manifest["metadata"].get("namespace")):
            utils.create_from_dict(remote.api_client, manifest)

    run = annexctl("peer", *peering.flags, "-o", "json")

    assert run.code == 0, run.err
    actions = {(o["cluster"], o["kind"]): o["action"] for o in run.json()["objects"]}
    assert actions[("provider", "Role")] == "kept (managed by Helm)"
    assert actions[("home", "Secret")] == "created"
    labels = remote.core.read_namespace(peering.tenant).metadata.labels
    assert labels["app.kubernetes.io/managed-by"] == "Helm"

    run = annexctl("unpeer", *peering.flags)
    assert run.code == 0, run.err
    assert "is managed by Helm" in run.out
    assert remote.core.read_namespace(peering.tenant).status.phase == "Active"


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_peer_mints_a_token_of_bounded_life(
        annexctl: Annexctl, home: ClusterHandle, peering: Peering, tmp_path: Path) -> None:
    run = annexctl("peer", *peering.flags, "-o", "json")
    assert run.code == 0, run.err
    path = minted_kubeconfig(home, peering.namespace, peering.secret, tmp_path)
    claims = _claims(yaml.safe_load(path.read_text())["users"][0]["user"]["token"])
    assert claims["exp"] - claims["iat"] == 24 * 3600  # a day, not a year
    expires = datetime.fromisoformat(run.json()["tokenExpirationTimestamp"])
    assert abs((expires - datetime.now(UTC)).total_seconds() - 24 * 3600) < 300

    shorter = annexctl("peer", *peering.flags, "--token-expiration-seconds", "900")
    assert shorter.code == 0, shorter.err
    path = minted_kubeconfig(home, peering.namespace, peering.secret, tmp_path)
    claims = _claims(yaml.safe_load(path.read_text())["users"][0]["user"]["token"])
    assert claims["exp"] - claims["iat"] == 900


def test_the_identity_renews_its_own_token_and_no_other_accounts(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, peering: Peering,
        tmp_path: Path) -> None:
    assert annexctl("peer", *peering.flags).code == 0
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(minted_kubeconfig(
        home, peering.namespace, peering.secret, tmp_path))))
    tenant = peering.tenant
    remote.core.create_namespaced_service_account(tenant, {"metadata": {"name": "other"}})

    def mint(account: str, namespace: str = tenant) -> Any:
        return core.create_namespaced_service_account_token(
            account, namespace, {"spec": {"expirationSeconds": 900}})

    renewed = mint("consumer")
    assert _claims(renewed.status.token)["sub"] == f"system:serviceaccount:{tenant}:consumer"
    assert not _allowed(lambda: mint("other"))
    assert not _allowed(lambda: mint("default"))
    assert not _allowed(lambda: mint("default", "kube-system"))


def test_peer_sets_the_pod_policy_the_provider_grants(
        annexctl: Annexctl, remote: ClusterHandle, peering: Peering) -> None:
    run = annexctl("peer", *peering.flags, "--pod-security", "restricted", "-o", "json")
    assert run.code == 0, run.err
    quota = client.CustomObjectsApi(remote.api_client).get_namespaced_custom_object(
        QUOTA.group, QUOTA.version, peering.tenant, QUOTA.plural, peering.home_id)
    # The level asked for, and the closed defaults of everything else.
    assert quota["spec"]["podPolicy"] == PodPolicy(
        pod_security=PodSecurityLevel.RESTRICTED).model_dump(by_alias=True, mode="json")


@pytest.fixture
def enforcer_pools(remote: ClusterHandle) -> Iterator[None]:
    """A remote-enforcer Deployment declaring the pools gpu and general, as the chart writes
    its flags from `offer.pools` (no replica: only its flags are read)."""
    namespace = unique_id("enforcer")
    remote.core.create_namespace({"metadata": {"name": namespace}})
    labels = {"app.kubernetes.io/name": "remote-enforcer"}
    client.AppsV1Api(remote.api_client).create_namespaced_deployment(namespace, {
        "metadata": {"name": "remote-enforcer", "labels": labels},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{
                "name": "enforcer", "image": "annex:test",
                "args": ["--cluster-id=p", "--offer-pool=gpu=accelerator=nvidia",
                         "--offer-pool", "general=tier=general"]}]}}}})
    yield
    remote.core.delete_namespace(namespace)


def test_peer_lends_the_consumer_the_pools_named_and_refuses_one_not_declared(
        annexctl: Annexctl, remote: ClusterHandle, peering: Peering,
        enforcer_pools: None) -> None:
    def quota_pools() -> Any:
        return client.CustomObjectsApi(remote.api_client).get_namespaced_custom_object(
            QUOTA.group, QUOTA.version, peering.tenant, QUOTA.plural,
            peering.home_id)["spec"].get("pools")

    refused = annexctl("peer", *peering.flags, "--pools", "gpu,tpu")
    assert refused.code == 2
    assert "--pools:" in refused.err and "declares no pool tpu (its pools: general, gpu;" \
        in refused.err
    with pytest.raises(ApiException) as missing:  # nothing written
        remote.core.read_namespace(peering.tenant)
    assert missing.value.status == 404
    run = annexctl("peer", *peering.flags, "--pools", "gpu", "-o", "json")
    assert run.code == 0, run.err
    assert quota_pools() == ["gpu"]
    # Peered again without --pools: every pool.
    again = annexctl("peer", *peering.flags, "-o", "json")
    assert again.code == 0, again.err
    assert quota_pools() is None
