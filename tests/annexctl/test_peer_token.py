"""Peering that starts from the provider's consent or from discovery, end to end with the home
controller as a process: a peering token generated on the provider and redeemed at home once
(never stored itself; revoked with its Secret or by a newer token), `peer --from-discovered`
for a provider found in DNS, and `discover`/`status` showing the phases. Accepting creates the
VirtualNode."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from annexctl import peer_token, peering
from annexctl.peer_token import PEERING_SECRET, PEERING_TOKEN_LABEL, TOKEN_PREFIX
from kubesim.dns import dns_server, publish
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.virtual_node import VIRTUAL_NODE
from tests.annexctl.conftest import Annexctl, Run, home_flags
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id
from tests.home_controller.conftest import start_controller  # noqa: F401 - a fixture


@pytest.fixture
def ids(home: ClusterHandle, remote: ClusterHandle, crds: None) -> Iterator[dict[str, str]]:
    made = {"home": unique_id("home"), "provider": unique_id("provider"),
            "namespace": unique_id("annexctl")}
    yield made
    for cluster, name in ((home, made["namespace"]),
                          (remote, f"annex-tenant-{made['home']}")):
        try:
            cluster.core.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise
    fcs = home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                     kind=FOREIGN_CLUSTER.kind)
    try:
        fcs.delete(name=made["provider"])
    except ApiException as error:
        if error.status != 404:
            raise


def phase(annexctl: Annexctl, home: ClusterHandle, name: str) -> str | None:
    run = annexctl("discover", *home_flags(home), "-o", "json")
    assert run.code == 0, run.err
    return next((fc["phase"] for fc in run.json()["foreignClusters"] if fc["name"] == name),
                None)


def secret_kubeconfig(home: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    data = home.core.read_namespaced_secret(name, namespace).data["kubeconfig"]
    return dict(yaml.safe_load(base64.b64decode(data)))


def test_a_peering_token_generated_on_the_provider_and_redeemed_at_home(
        home: ClusterHandle, remote: ClusterHandle, ids: dict[str, str], annexctl: Annexctl,
        start_controller: Any) -> None:  # noqa: F811 - the fixture
    start_controller("--namespace", ids["namespace"])
    generated = annexctl("generate-peer-token", "--kubeconfig", str(remote.kubeconfig),
                         "--cluster-id", ids["provider"], "--consumer-cluster-id", ids["home"],
                         "-o", "json")
    assert generated.code == 0, generated.err
    token = generated.json()["token"]
    assert token.startswith(TOKEN_PREFIX)
    assert generated.json()["command"] == f"annexctl peer --token {token}"
    tenant = f"annex-tenant-{ids['home']}"
    assert remote.core.read_namespaced_secret(PEERING_SECRET, tenant).metadata.labels[
        PEERING_TOKEN_LABEL] == "true"

    redeemed = annexctl("peer", "--token", token, *home_flags(home), "-n", ids["namespace"],
                        "-o", "json")
    assert redeemed.code == 0, redeemed.err
    assert redeemed.json()["remoteClusterId"] == ids["provider"]
    assert redeemed.json()["tenantNamespace"] == tenant
    # The consumer's own token is installed, not the peering token's.
    kubeconfig = secret_kubeconfig(home, ids["namespace"], f"{ids['provider']}-kubeconfig")
    assert kubeconfig["users"][0]["user"]["token"] not in base64.urlsafe_b64decode(
        token[len(TOKEN_PREFIX):] + "==").decode()

    # Accepted with consent: the home controller creates the VirtualNode.
    wait_for(lambda: phase(annexctl, home, ids["provider"]) == "Peered", timeout=30)
    vns = home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                     kind=VIRTUAL_NODE.kind)
    vn = vns.get(name=ids["provider"], namespace=ids["namespace"]).to_dict()
    assert vn["spec"]["kubeconfigSecretRef"] == {"name": f"{ids['provider']}-kubeconfig"}
    status = annexctl("status", *home_flags(home), "--no-offers", "-o", "json")
    assert status.code == 0, status.err
    assert {fc["name"]: fc["phase"] for fc in status.json()["foreignClusters"]}[
        ids["provider"]] == "Peered"
    table = annexctl("discover", *home_flags(home))
    assert ids["provider"] in table.out and "Peered" in table.out

    # It works once: redeeming spent it (its Secret is gone, the token bound to it too).
    assert not remote.core.list_namespaced_secret(
        tenant, label_selector=PEERING_TOKEN_LABEL).items
    again = annexctl("peer", "--token", token, *home_flags(home), "-n", ids["namespace"])
    assert again.code == 1 and again.err.startswith("error: ") and again.err.count("\n") == 1


def test_a_peering_token_is_revoked_by_its_secret_or_a_newer_token(
        home: ClusterHandle, remote: ClusterHandle, ids: dict[str, str],
        annexctl: Annexctl) -> None:
    flags = ["--kubeconfig", str(remote.kubeconfig), "--cluster-id", ids["provider"],
             "--consumer-cluster-id", ids["home"], "-o", "json"]
    tenant = f"annex-tenant-{ids['home']}"
    older = annexctl("generate-peer-token", *flags).json()["token"]
    newer = annexctl("generate-peer-token", *flags).json()["token"]
    redeem = ("peer", *home_flags(home), "-n", ids["namespace"], "--token")
    assert annexctl(*redeem, older).code == 1  # a newer one replaced it
    remote.core.delete_namespaced_secret(PEERING_SECRET, tenant)  # the admin revokes it
    assert annexctl(*redeem, newer).code == 1
    again = annexctl("generate-peer-token", *flags).json()["token"]
    assert annexctl(*redeem, again).code == 0


def test_a_peering_token_redeemed_twice_at_once_works_once(
        home: ClusterHandle, remote: ClusterHandle, ids: dict[str, str], annexctl: Annexctl,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The second redemption comes while the first holds the consumer's token and the token's
    Secret still exists: what a second redeemer sees during the API server's token cache
    (10 s) after the Secret is deleted, when the peering token still authenticates. The
    claim, not the deletion, refuses it."""
    generated = annexctl("generate-peer-token", "--kubeconfig", str(remote.kubeconfig),
                         "--cluster-id", ids["provider"], "--consumer-cluster-id", ids["home"],
                         "-o", "json")
    assert generated.code == 0, generated.err
    token = generated.json()["token"]
    redeem = ("peer", "--token", token, *home_flags(home), "-n", ids["namespace"])
    install_at_home = peering.install_at_home
    second: list[Run] = []
    redeeming: list[bool] = []

    def install_while_another_redeems(*args: Any, **kwargs: Any) -> Any:
        if not redeeming:
            redeeming.append(True)
            second.append(annexctl(*redeem))
        return install_at_home(*args, **kwargs)

    monkeypatch.setattr(peer_token, "install_at_home", install_while_another_redeems)
    first = annexctl(*redeem)
    assert first.code == 0, first.err
    assert second[0].code == 1
    assert second[0].err.startswith("error: ") and second[0].err.count("\n") == 1
    assert "already redeemed" in second[0].err and "works once" in second[0].err
    tenant = f"annex-tenant-{ids['home']}"
    assert not remote.core.list_namespaced_secret(
        tenant, label_selector=PEERING_TOKEN_LABEL).items


@pytest.fixture
def token_cache(remote: ClusterHandle) -> Iterator[None]:
    """kube-apiserver's 10 s cache of successful token authentications, on kubesim too."""
    if remote.sim is not None:
        remote.sim.token_success_cache_ttl = 10.0
    yield
    if remote.sim is not None:
        remote.sim.token_success_cache_ttl = 0.0


def test_a_peering_token_redeemed_again_while_it_still_authenticates_is_refused(
        home: ClusterHandle, remote: ClusterHandle, ids: dict[str, str], annexctl: Annexctl,
        token_cache: None) -> None:
    """Right after a redemption the token's Secret is gone but the API server still
    authenticates the token (its cache): the second redemption loses the claim."""
    generated = annexctl("generate-peer-token", "--kubeconfig", str(remote.kubeconfig),
                         "--cluster-id", ids["provider"], "--consumer-cluster-id", ids["home"],
                         "-o", "json")
    redeem = ("peer", "--token", generated.json()["token"], *home_flags(home),
              "-n", ids["namespace"])
    first = annexctl(*redeem)
    assert first.code == 0, first.err
    again = annexctl(*redeem)
    assert again.code == 1 and "already redeemed" in again.err, again.err


@pytest.mark.parametrize("token", ["nonsense", f"{TOKEN_PREFIX}not-base64!", f"{TOKEN_PREFIX}e30"])
def test_a_damaged_token_is_a_usage_error(home: ClusterHandle, annexctl: Annexctl,
                                         token: str) -> None:
    run = annexctl("peer", "--token", token, *home_flags(home))
    assert run.code == 2 and run.err.startswith("error: ") and "token" in run.err


def test_peer_needs_the_providers_consent(home: ClusterHandle, annexctl: Annexctl) -> None:
    run = annexctl("peer", *home_flags(home), "--cluster-id", "h", "--remote-cluster-id", "p")
    assert run.code == 2 and "consent" in run.err


def test_peer_from_a_provider_discovered_in_dns(
        home: ClusterHandle, remote: ClusterHandle, ids: dict[str, str], annexctl: Annexctl,
        start_controller: Any) -> None:  # noqa: F811 - the fixture
    server_url = yaml.safe_load(remote.kubeconfig.read_text())["clusters"][0]["cluster"][
        "server"]
    with dns_server() as server:
        publish(server.zone, "annex.test", ids["provider"], ids["provider"], server_url)
        start_controller("--namespace", ids["namespace"], "--discover-dns-domains", "annex.test",
                         "--dns-servers", server.address, "--dns-interval-seconds", "0.5")
        wait_for(lambda: phase(annexctl, home, ids["provider"]) == "Discovered", timeout=30)
        listed = annexctl("discover", *home_flags(home))
        assert "DNS" in listed.out and "--from-discovered" in listed.out

        run = annexctl("peer", "--from-discovered", ids["provider"], *home_flags(home),
                       "--remote-kubeconfig", str(remote.kubeconfig),
                       "--cluster-id", ids["home"], "-n", ids["namespace"], "-o", "json")
        assert run.code == 0, run.err
        assert run.json()["remoteClusterId"] == ids["provider"]
        assert run.json()["server"] == server_url  # the announced address
        wait_for(lambda: phase(annexctl, home, ids["provider"]) == "Peered", timeout=30)


@pytest.mark.kubesim_only(reason="starts a fresh simulated cluster of its own, without annex's "
                                 "CRDs")
def test_peer_works_on_a_home_cluster_without_the_foreign_cluster_crd(
        home: ClusterHandle, remote: ClusterHandle, ids: dict[str, str], annexctl: Annexctl,
        tmp_path: Path) -> None:
    """A home chart upgraded from before ForeignClusters has no such CRD (helm installs CRDs
    on a first install only): peering works as it did, the ForeignCluster skipped. Even where
    another cluster at the same address, with the CRD, left the client library's discovery
    cache behind (a file per address, shared by every process on the machine)."""
    import hashlib
    import tempfile

    from kubernetes import config
    from kubernetes.dynamic import DynamicClient

    from kubesim.cluster import Cluster, ClusterThread

    bare = Cluster("bare")
    thread = ClusterThread([bare], tmp_path)
    thread.start()
    bare_client = config.new_client_from_config(config_file=str(tmp_path / "bare.kubeconfig"))
    digest = hashlib.md5(bare_client.configuration.host.encode(), usedforsecurity=False)
    shared_cache = Path(tempfile.gettempdir()) / f"osrcp-{digest.hexdigest()}.json"
    try:
        DynamicClient(home.api_client, cache_file=str(shared_cache)).resources.get(
            api_version=FOREIGN_CLUSTER.api_version, kind=FOREIGN_CLUSTER.kind)  # home's CRD
        run = annexctl("peer", "--kubeconfig", str(tmp_path / "bare.kubeconfig"),
                       "--remote-kubeconfig", str(remote.kubeconfig), "--cluster-id", ids["home"],
                       "--remote-cluster-id", ids["provider"], "-n", ids["namespace"],
                       "-o", "json")
    finally:
        thread.stop()
        bare_client.close()
        shared_cache.unlink(missing_ok=True)
    assert run.code == 0, run.err
    actions = {(o["cluster"], o["kind"]): o["action"] for o in run.json()["objects"]}
    assert actions[("home", "Secret")] == "created"
    assert actions[("home", "ForeignCluster")].startswith("skipped")
