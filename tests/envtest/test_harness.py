"""The envtest harness's pieces that need no binaries: what it says when they are missing, its
PKI, and the cache its stand-in kubelets read."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.envtest import controlplane
from tests.envtest.controlplane import EnvtestUnavailable, apiserver_address, find_binaries
from tests.envtest.pki import write_pki
from tests.envtest.remoteapi import Cache, CacheWatch


def test_missing_binaries_are_named(tmp_path: Path) -> None:
    with pytest.raises(EnvtestUnavailable, match="needs KUBEBUILDER_ASSETS"):
        find_binaries({"PATH": ""})
    (tmp_path / "kube-apiserver").write_text("#!/bin/sh\n")
    (tmp_path / "kube-apiserver").chmod(0o755)
    with pytest.raises(EnvtestUnavailable) as caught:
        find_binaries({"KUBEBUILDER_ASSETS": str(tmp_path), "PATH": ""})
    assert str(caught.value) == (
        f"--control-plane=envtest: no etcd, kube-controller-manager, kube-scheduler in "
        f"KUBEBUILDER_ASSETS={tmp_path} or on PATH")


def test_the_api_server_serves_at_a_non_loopback_address_or_says_why_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found = apiserver_address()
    assert ipaddress.ip_address(found.address).is_loopback == bool(found.fallback_reason)
    monkeypatch.setattr(controlplane, "ROUTE_PROBE", ("127.0.0.2", 9))  # a machine with only lo
    fallback = apiserver_address()
    assert fallback.address == "127.0.0.1"
    assert "no endpoints of the `kubernetes` Service" in fallback.fallback_reason


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    public_key = issuer.public_key()
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    assert cert.signature_hash_algorithm is not None
    try:
        public_key.verify(cert.signature, cert.tbs_certificate_bytes,
                          ec.ECDSA(cert.signature_hash_algorithm))
    except Exception:
        return False
    return cert.issuer == issuer.subject


def test_pki_is_laid_out_as_kubeadm_does(tmp_path: Path) -> None:
    pki = write_pki(tmp_path, "192.0.2.10", "10.96.0.1")
    ca, front_proxy_ca = _cert(pki.ca.cert), _cert(pki.front_proxy_ca.cert)
    serving = _cert(pki.apiserver.cert)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"192.0.2.10",
                                                                           "10.96.0.1"}
    assert "kubernetes.default.svc" in names.get_values_for_type(x509.DNSName)
    usages = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]

    def subject(cert: x509.Certificate) -> tuple[str, list[str]]:
        common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        groups = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        return str(common), [str(g.value) for g in groups]

    clients = {name: _cert(issued.cert) for name, issued in (
        ("admin", pki.admin), ("kubelet-client", pki.apiserver_kubelet_client),
        ("controller-manager", pki.controller_manager), ("scheduler", pki.scheduler))}
    assert subject(clients["admin"]) == ("kubernetes-admin", ["system:masters"])
    assert subject(clients["kubelet-client"]) == ("kube-apiserver-kubelet-client",
                                                  ["system:masters"])
    assert subject(clients["controller-manager"]) == ("system:kube-controller-manager", [])
    assert subject(clients["scheduler"]) == ("system:kube-scheduler", [])
    assert all(_signed_by(cert, ca) for cert in [serving, *clients.values()])
    front_proxy_client = _cert(pki.front_proxy_client.cert)
    assert _signed_by(front_proxy_client, front_proxy_ca)
    assert not _signed_by(front_proxy_client, ca)
    kubelet = _cert(pki.kubelet_serving.cert).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert [str(ip) for ip in kubelet.get_values_for_type(x509.IPAddress)] == ["192.0.2.10"]
    assert pki.service_account_key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY")
    assert oct(pki.admin.key.stat().st_mode & 0o777) == "0o600"


def _pod(name: str, rv: int, phase: str = "Running") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "status": {"phase": phase},
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


async def test_cache_keeps_the_newest_state_and_tells_watchers() -> None:
    cache, key = Cache(), ("", "pods")
    cache.apply(key, "ADDED", _pod("web", 5))
    watch = CacheWatch(cache, key, "ns")
    assert [(t, s.name) for t, s in watch.backlog] == [("ADDED", "web")]
    events = aiter(watch)
    assert (await anext(events))[0] == "ADDED"  # the backlog first
    cache.apply(key, "MODIFIED", _pod("web", 7, "Succeeded"))  # a write's answer
    cache.apply(key, "MODIFIED", _pod("web", 7, "Succeeded"))  # its watch event: no news
    cache.apply(key, "MODIFIED", _pod("web", 6))  # an older event after the write
    stored = cache.get(key, "ns", "web")
    assert stored is not None and stored.obj["status"] == {"phase": "Succeeded"}
    event_type, seen = await anext(events)
    assert (event_type, seen.rv) == ("MODIFIED", 7)
    cache.apply(key, "DELETED", _pod("web", 8, "Succeeded"))
    assert cache.get(key, "ns", "web") is None
    assert (await anext(events))[0] == "DELETED"
