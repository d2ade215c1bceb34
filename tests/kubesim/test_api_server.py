"""The API server as clients meet it: HTTPS with the kubeconfig's CA, bearer tokens, health
endpoints, /version, and the official client's typed, dynamic and watch interfaces."""

from __future__ import annotations

import copy

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.kubesim.rest import call
from tests.kubesim.version import parse_release


def test_the_kubeconfig_reaches_the_server_over_https_with_its_ca_and_token(home) -> None:
    kubeconfig = yaml.safe_load(home.kubeconfig.read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")
    assert kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
    names = [ns.metadata.name for ns in home.core.list_namespace().items]
    assert "default" in names and "kube-system" in names


@pytest.mark.kubesim_only(reason="where kubesim listens and names its kubeconfigs")
def test_simulated_clusters_listen_on_loopback_each_with_its_own_kubeconfig(home, remote) -> None:
    assert home.sim.url.startswith("https://127.0.0.1:")
    assert home.sim.url != remote.sim.url
    assert home.kubeconfig.name == "home.kubeconfig"


def test_a_wrong_token_is_401_unauthorized(home) -> None:
    configuration = copy.copy(home.api_client.configuration)
    configuration.api_key = {"authorization": "Bearer not-a-token"}
    configuration.refresh_api_key_hook = None  # or the kubeconfig loader restores the token
    configuration.cert_file = configuration.key_file = None  # a kubeadm kubeconfig's identity
    stranger = client.CoreV1Api(client.ApiClient(configuration))
    with pytest.raises(ApiException) as raised:
        stranger.list_namespace()
    assert raised.value.status == 401
    assert yaml.safe_load(raised.value.body)["reason"] == "Unauthorized"


@pytest.mark.parametrize("path", ["/livez", "/readyz", "/healthz"])
def test_health_endpoints_answer_ok(home, path: str) -> None:
    assert call(home, "GET", path) == (200, "ok")


def test_version_names_the_release(home) -> None:
    info = client.VersionApi(home.api_client).get_code()
    if home.sim is None and parse_release(info.git_version) is None:
        pytest.skip(f"a development build's /version names no release ({info.git_version})")
    assert info.major == "1" and info.git_version.startswith("v1.")


def test_typed_dynamic_and_watch_clients_work_unchanged(home, namespace) -> None:
    home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "one"}})
    configmaps = home.dynamic.resources.get(api_version="v1", kind="ConfigMap")
    listed = configmaps.get(namespace=namespace, field_selector="metadata.name=one")
    assert [i.metadata.name for i in listed.items] == ["one"]
    events = list(watch.Watch().stream(home.core.list_namespaced_config_map, namespace,
                                       field_selector="metadata.name=one", timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "one")]


def test_the_kubernetes_service_lists_the_servers_address_as_the_endpoint_reconciler_does(
        home) -> None:
    """kube-apiserver publishes its advertised address and secure port for the `kubernetes`
    Service (what clients in pods and the home agent read), in an EndpointSlice named after the
    Service and in the Endpoints, which the mirroring controller must skip."""
    service = home.core.read_namespaced_service("kubernetes", "default")
    [https] = [p for p in service.spec.ports if p.name == "https"]
    [endpoint_slice] = client.DiscoveryV1Api(home.api_client).list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes").items
    assert endpoint_slice.metadata.name == "kubernetes"
    assert endpoint_slice.address_type in ("IPv4", "IPv6")
    assert [(p.name, p.port, p.protocol) for p in endpoint_slice.ports] == [
        ("https", https.target_port, "TCP")]
    addresses = [e.addresses[0] for e in endpoint_slice.endpoints]
    assert addresses and all(e.conditions.ready for e in endpoint_slice.endpoints)
    endpoints = home.core.read_namespaced_endpoints("kubernetes", "default")
    assert endpoints.metadata.labels == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    [subset] = endpoints.subsets
    assert sorted(a.ip for a in subset.addresses) == sorted(addresses)
    assert [(p.name, p.port) for p in subset.ports] == [("https", https.target_port)]
    if home.sim is not None:  # a real server advertises its own address, not the kubeconfig's
        assert (addresses, https.target_port) == ([home.sim.host], home.sim.port)
