"""Where offloaded pods reach the home API server when none is configured: the address the
`kubernetes` Service's EndpointSlice advertises, else the agent's kubeconfig server unless that
is the cluster-internal Service."""

from __future__ import annotations

from typing import Any

import pytest

from shared.home_apiserver import advertised_address, home_apiserver_address, kubeconfig_address

SERVICE = {"spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "fd00:96::1"],
                    "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}}


def _slice(name: str, addresses: list[str], *, ready: bool | None = True,
           ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """As kube-apiserver's endpoint reconciler writes it."""
    conditions = {} if ready is None else {"ready": ready}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv6" if ":" in addresses[0] else "IPv4",
            "endpoints": [{"addresses": [a], "conditions": conditions} for a in addresses],
            "ports": ports if ports is not None else [
                {"name": "https", "port": 6443, "protocol": "TCP"}]}


def test_the_advertised_address_and_secure_port_win_over_the_kubeconfig() -> None:
    slices = [_slice("kubernetes", ["172.18.0.2", "172.18.0.3"])]
    assert home_apiserver_address(slices, "https://127.0.0.1:36443", SERVICE) == (
        "172.18.0.2", 6443)


def test_the_primary_family_slice_first_and_not_ready_servers_skipped() -> None:
    slices = [_slice("kubernetes-v6", ["fd00::2"]),
              _slice("kubernetes", ["172.18.0.2"], ready=False),
              _slice("kubernetes", ["172.18.0.3"], ready=None)]  # unset ready means ready
    assert advertised_address(slices) == ("172.18.0.3", 6443)
    assert advertised_address([_slice("kubernetes-v6", ["fd00::2"])]) == ("fd00::2", 6443)


def test_a_slice_without_ports_or_addresses_advertises_nothing() -> None:
    assert advertised_address([_slice("kubernetes", ["172.18.0.2"], ports=[])]) is None
    assert advertised_address([]) is None
    other_name = _slice("kubernetes", ["172.18.0.2"], ports=[{"name": "api", "port": 8443}])
    assert advertised_address([other_name]) == ("172.18.0.2", 8443)


@pytest.mark.parametrize(("server", "expected"), [
    ("https://api.home.example:6443", ("api.home.example", 6443)),
    ("https://172.18.0.2", ("172.18.0.2", 443)),
    ("https://[fd00::7]:6443", ("fd00::7", 6443)),
    # What the in-cluster configuration and in-cluster DNS name: unreachable from remote pods.
    ("https://10.96.0.1:443", None),
    ("https://[fd00:96:0::1]:443", None),
    ("https://kubernetes.default.svc:443", None),
    ("https://kubernetes.default.svc.cluster.local", None),
    ("https://kubernetes", None),
])
def test_the_kubeconfig_server_serves_unless_it_is_the_internal_service(
        server: str, expected: tuple[str, int] | None) -> None:
    assert kubeconfig_address(server, SERVICE) == expected
    assert home_apiserver_address([], server, SERVICE) == expected


def test_no_slice_and_an_internal_server_means_no_address() -> None:
    assert home_apiserver_address([], "https://10.96.0.1:443", SERVICE) is None
    assert home_apiserver_address([], "https://kubernetes.default.svc", None) is None
