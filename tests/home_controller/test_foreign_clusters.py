"""The home controller on a cluster: providers discovered (DNS-SD in a DNS server the test
runs, an enforcer process announcing with mDNS on loopback) become ForeignClusters in phase
Discovered; an announcement that goes takes along the ForeignCluster nobody acted on; accepting
waits for the provider's consent (its consumer kubeconfig Secret); with both, the VirtualNode is
created; the offer shows on the ForeignCluster, down to "none" when it shrinks to zero, and the
virtual node is cordoned meanwhile."""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.rest import ApiException

from kubesim.dns import dns_server, publish, withdraw
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.resource_offer import RESOURCE_OFFER
from shared.api.virtual_node import VIRTUAL_NODE
from shared.wellknown import POOL_LABEL, REMOTE_CLUSTER_ID_LABEL, TYPE_LABEL, TYPE_VIRTUAL_NODE
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import Enforcer

TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"  # the TTL controller's, on every node
DOMAIN = "providers.test"
KUBECTL = shutil.which("kubectl")


def foreign_cluster(home: ClusterHandle, name: str) -> dict[str, Any] | None:
    resource = home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                          kind=FOREIGN_CLUSTER.kind)
    try:
        return dict(resource.get(name=name).to_dict())
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def status_of(home: ClusterHandle, name: str) -> dict[str, Any]:
    return (foreign_cluster(home, name) or {}).get("status") or {}


def consumer_secret(remote: ClusterHandle, namespace: str, tenant: str,
                    cluster_id: str) -> dict[str, Any]:
    """A consumer kubeconfig Secret as consent leaves it at home: the provider's server, a
    context naming the tenant namespace."""
    kubeconfig = yaml.safe_load(remote.kubeconfig.read_text())
    for context in kubeconfig["contexts"]:
        context["context"]["namespace"] = tenant
    return {"metadata": {"name": f"{cluster_id}-kubeconfig", "namespace": namespace,
                         "labels": {REMOTE_CLUSTER_ID_LABEL: cluster_id}},
            "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(kubeconfig).encode()
                                                    ).decode()}}


def offer(remote: ClusterHandle, tenant: str, provider: str, resources: dict[str, str],
          pools: tuple[str, ...] = ()) -> None:
    """The provider's offer in the tenant namespace, declaring `pools` (made, or patched)."""
    body = {**RESOURCE_OFFER.type_meta(),
            "metadata": {"name": "offer", "namespace": tenant},
            "spec": {"clusterId": provider, "consumerClusterId": "home",
                     "resources": resources,
                     "pools": [{"name": pool, "nodeSelector": {"pool": pool}}
                               for pool in pools]}}
    offers = remote.dynamic.resources.get(api_version=RESOURCE_OFFER.api_version,
                                          kind=RESOURCE_OFFER.kind)
    try:
        offers.create(body=body, namespace=tenant)
    except ApiException as error:
        if error.status != 409:
            raise
        offers.patch(body={"spec": body["spec"]}, name="offer", namespace=tenant,
                     content_type="application/merge-patch+json")


def test_dns_discovery_consent_acceptance_and_the_offer(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_controller: Any,
        ) -> None:
    accepted, ignored = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("wan", "other"))
    fcs = home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                     kind=FOREIGN_CLUSTER.kind)
    with dns_server() as server:
        publish(server.zone, DOMAIN, accepted, accepted, f"https://{accepted}.test:6443")
        publish(server.zone, DOMAIN, ignored, ignored, f"https://{ignored}.test:6443")
        start_controller("--namespace", namespace, "--discover-dns-domains", DOMAIN,
                         "--dns-servers", server.address, "--dns-interval-seconds", "0.2")

        for cluster_id in (accepted, ignored):
            found = wait_for(lambda c=cluster_id: foreign_cluster(home, c), timeout=30)
            assert found["spec"] == {"clusterId": cluster_id, "accepted": False,
                                     "apiServerUrl": f"https://{cluster_id}.test:6443"}
            wait_for(lambda c=cluster_id: status_of(home, c).get("phase") == "Discovered")
            discovery = status_of(home, cluster_id)["discovery"]
            assert (discovery["source"], discovery["instance"], discovery["announced"]) == (
                "DNS", f"{cluster_id}._annex._tcp.{DOMAIN}.", True)

        # Nobody acted on it: it goes with its records.
        withdraw(server.zone, DOMAIN, ignored)
        wait_for(lambda: foreign_cluster(home, ignored) is None, timeout=15)

        # Accepted, but no consent: nothing is granted, no VirtualNode.
        fcs.patch(body={"spec": {"accepted": True}}, name=accepted,
                  content_type="application/merge-patch+json")
        wait_for(lambda: [c["reason"] for c in status_of(home, accepted).get("conditions", [])]
                 == ["WaitingForConsent"])
        assert status_of(home, accepted)["phase"] == "Discovered"

        # The provider consents (its consumer Secret arrives) and offers something.
        tenant = f"annex-tenant-{uuid.uuid4().hex[:8]}"
        remote.core.create_namespace({"metadata": {"name": tenant}})
        offer(remote, tenant, accepted, {"cpu": "4", "memory": "8Gi", "pods": "110"})
        home.core.create_namespaced_secret(namespace, consumer_secret(
            remote, namespace, tenant, accepted))
        wait_for(lambda: status_of(home, accepted).get("phase") == "Peered", timeout=15)
        vns = home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                         kind=VIRTUAL_NODE.kind)
        vn = vns.get(name=accepted, namespace=namespace).to_dict()
        assert vn["spec"]["clusterId"] == accepted
        assert vn["spec"]["kubeconfigSecretRef"] == {"name": f"{accepted}-kubeconfig"}
        assert status_of(home, accepted)["virtualNode"] == f"{namespace}/{accepted}"
        wait_for(lambda: (status_of(home, accepted).get("offer") or {}).get("summary")
                 == "cpu=4 memory=8Gi pods=110", timeout=15)

        if KUBECTL is not None:  # `kubectl get fc` shows what the printer columns promise
            table = subprocess.run(
                [KUBECTL, "--kubeconfig", str(home.kubeconfig), "get", "fc", accepted],
                capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
            assert table[0].split() == ["NAME", "CLUSTER", "API", "SOURCE", "OFFER", "PHASE",
                                        "AGE"]
            assert table[1].split()[:8] == [
                accepted, accepted, f"https://{accepted}.test:6443", "DNS", "cpu=4",
                "memory=8Gi", "pods=110", "Peered"]

        # Converged: further lookups showing the same records write nothing.
        version = foreign_cluster(home, accepted)["metadata"]["resourceVersion"]
        asked = len(server.queries)
        wait_for(lambda: len(server.queries) >= asked + 9)  # three more rounds (PTR, SRV, TXT)
        assert foreign_cluster(home, accepted)["metadata"]["resourceVersion"] == version

        # The announcement goes: a peered cluster stays, marked as no longer announced.
        withdraw(server.zone, DOMAIN, accepted)
        wait_for(lambda: status_of(home, accepted)["discovery"]["announced"] is False)
        assert status_of(home, accepted)["phase"] == "Peered"

        # The offer shrinks to nothing: the virtual nodes (the agent's, one per pool of the
        # offer; the test plays it) are cordoned, and uncordoned when the provider offers again.
        nodes = [f"liqo-{accepted}-{pool}" for pool in ("gpu", "general")]
        for node in nodes:
            home.core.create_node({"metadata": {"name": node, "labels": {
                TYPE_LABEL: TYPE_VIRTUAL_NODE, REMOTE_CLUSTER_ID_LABEL: accepted,
                POOL_LABEL: node.rsplit("-", 1)[1]}}})
        offer(remote, tenant, accepted, {"cpu": "0", "memory": "0", "pods": "0"})
        wait_for(lambda: status_of(home, accepted)["offer"]["summary"] == "none", timeout=15)
        for node in nodes:
            wait_for(lambda n=node: home.core.read_node(n).spec.unschedulable is True)
        offer(remote, tenant, accepted, {"cpu": "2", "memory": "4Gi", "pods": "10"})
        for node in nodes:
            wait_for(lambda n=node: not home.core.read_node(n).spec.unschedulable, timeout=15)
            # no annotation of the controller's (kube-controller-manager's TTL controller
            # annotates every node)
            assert set(home.core.read_node(node).metadata.annotations or {}) <= {TTL_ANNOTATION}
    fcs.delete(name=accepted)
    for node in nodes:
        home.core.delete_node(node)
    remote.core.delete_namespace(tenant)


def test_an_enforcer_announcing_on_mdns_becomes_a_discovered_foreign_cluster_until_it_stops(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, start_controller: Any,
        tmp_path: Path) -> None:
    cluster_id = f"lan-{uuid.uuid4().hex[:8]}"
    start_controller("--namespace", namespace, "--discover-mdns",
                     "--mdns-interfaces", "127.0.0.1", "--mdns-settle-seconds", "1")
    enforcer = Enforcer(remote.kubeconfig, tmp_path, [
        "--cluster-id", cluster_id, "--announce-mdns", "--announce-api-server",
        "https://127.0.0.1:6443", "--mdns-interfaces", "127.0.0.1"])
    enforcer.start()
    try:
        wait_for(lambda: status_of(home, cluster_id).get("phase") == "Discovered", timeout=30)
        found = foreign_cluster(home, cluster_id)
        assert found is not None
        assert found["spec"]["apiServerUrl"] == "https://127.0.0.1:6443"
        assert found["status"]["discovery"]["source"] == "mDNS"
        assert found["metadata"]["labels"] == {"discovery.liqo.io/discovered-by": "mDNS"}
    finally:
        enforcer.stop()  # SIGTERM: the enforcer withdraws its announcement on the way out
        print(enforcer.log_path.read_text()[-3000:])
    wait_for(lambda: foreign_cluster(home, cluster_id) is None, timeout=15)


def test_a_restarted_controller_keeps_what_is_still_announced_and_drops_what_went_meanwhile(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        start_controller: Any) -> None:
    kept, gone = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("kept", "gone"))
    with dns_server() as server:
        for cluster_id in (kept, gone):
            publish(server.zone, DOMAIN, cluster_id, cluster_id, f"https://{cluster_id}:6443")
        flags = ["--namespace", namespace, "--discover-dns-domains", DOMAIN,
                 "--dns-servers", server.address, "--dns-interval-seconds", "0.2"]
        first = start_controller(*flags)
        for cluster_id in (kept, gone):
            wait_for(lambda c=cluster_id: status_of(home, c).get("phase") == "Discovered",
                     timeout=30)
        first.stop()
        version = foreign_cluster(home, kept)["metadata"]["resourceVersion"]  # type: ignore[index]
        withdraw(server.zone, DOMAIN, gone)  # while no controller looks

        second = start_controller(*flags)
        wait_for(lambda: foreign_cluster(home, gone) is None, timeout=30)
        asked = len(server.queries)
        wait_for(lambda: len(server.queries) >= asked + 6)  # two more rounds
        # Still announced: neither deleted while the new controller took its first look, nor
        # written again.
        assert foreign_cluster(home, kept)["metadata"]["resourceVersion"] == version  # type: ignore[index]

    # Restarted with DNS discovery off: an absence it does not look for says nothing. The
    # cluster is kept as it was, and the controller serves it (consent moves its phase).
    second.stop()
    start_controller("--namespace", namespace)
    home.core.create_namespaced_secret(namespace, consumer_secret(remote, namespace, "t", kept))
    wait_for(lambda: status_of(home, kept).get("phase") == "Authenticated", timeout=30)
    assert status_of(home, kept)["discovery"]["announced"] is True
    fcs = home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                     kind=FOREIGN_CLUSTER.kind)
    fcs.delete(name=kept)


def test_an_accepted_cluster_whose_virtual_node_name_is_taken_says_so(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        start_controller: Any) -> None:
    cluster_id = f"taken-{uuid.uuid4().hex[:8]}"
    vns = home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                     kind=VIRTUAL_NODE.kind)
    vns.create(namespace=namespace, body={
        **VIRTUAL_NODE.type_meta(),
        "metadata": {"name": cluster_id, "namespace": namespace},
        "spec": {"clusterId": "someone-else"}})
    fcs = home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                                     kind=FOREIGN_CLUSTER.kind)
    fcs.create(body={**FOREIGN_CLUSTER.type_meta(),
                     "metadata": {"name": cluster_id},
                     "spec": {"clusterId": cluster_id, "accepted": True}})
    home.core.create_namespaced_secret(namespace, consumer_secret(remote, namespace, "t",
                                                                  cluster_id))
    start_controller("--namespace", namespace)
    wait_for(lambda: [c["reason"] for c in status_of(home, cluster_id).get("conditions", [])]
             == ["VirtualNodeNameTaken"], timeout=30)
    assert status_of(home, cluster_id)["phase"] == "Authenticated"
    assert status_of(home, cluster_id)["discovery"] == {"source": "Manual"}
    # The other cluster's VirtualNode is left as it was.
    assert vns.get(name=cluster_id, namespace=namespace).spec.clusterId == "someone-else"
    fcs.delete(name=cluster_id)
    vns.delete(name=cluster_id, namespace=namespace)
    wait_for(lambda: foreign_cluster(home, "someone-else") is not None)
    fcs.delete(name="someone-else")


def test_a_provider_peered_without_discovery_is_shown_as_a_foreign_cluster(
        home: ClusterHandle, remote: ClusterHandle, namespace: str,
        start_controller: Any) -> None:
    """What the chart's `remotes` make (a consumer Secret and a VirtualNode) is a provider the
    home cluster knows: its ForeignCluster appears, Peered, accepted, added by hand."""
    cluster_id = f"charted-{uuid.uuid4().hex[:8]}"
    secret = consumer_secret(remote, namespace, "t", cluster_id)
    home.core.create_namespaced_secret(namespace, secret)
    vns = home.dynamic.resources.get(api_version=VIRTUAL_NODE.api_version,
                                     kind=VIRTUAL_NODE.kind)
    vns.create(namespace=namespace, body={
        **VIRTUAL_NODE.type_meta(),
        "metadata": {"name": cluster_id, "namespace": namespace},
        "spec": {"clusterId": cluster_id,
                 "kubeconfigSecretRef": {"name": secret["metadata"]["name"]}}})
    start_controller("--namespace", namespace)
    wait_for(lambda: status_of(home, cluster_id).get("phase") == "Peered", timeout=30)
    found = foreign_cluster(home, cluster_id)
    assert found is not None and found["spec"]["accepted"] is True
    assert found["spec"]["apiServerUrl"] == yaml.safe_load(remote.kubeconfig.read_text())[
        "clusters"][0]["cluster"]["server"]
    assert found["status"]["discovery"] == {"source": "Manual"}
    assert found["status"]["virtualNode"] == f"{namespace}/{cluster_id}"
    home.dynamic.resources.get(api_version=FOREIGN_CLUSTER.api_version,
                               kind=FOREIGN_CLUSTER.kind).delete(name=cluster_id)
