"""Connections through an HTTP proxy, chosen as client-go chooses it: the kubeconfig cluster's
proxy-url, else HTTPS_PROXY/HTTP_PROXY unless NO_PROXY names the server; tunnels opened with
HTTP CONNECT."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from annex.api_paths import core_path
from annex.kube import connection_from_kubeconfig, load_connection
from annex.kubeapi import ClusterApi
from annex.listwatch import list_and_watch
from annex.proxies import Proxy, bypasses_proxy, parse_proxy, proxy_for
from annex.transport_errors import ProxyRefused


def test_the_kubeconfig_proxy_url_wins_over_the_environment() -> None:
    environ = {"HTTPS_PROXY": "http://env-proxy:3128", "NO_PROXY": "*"}
    assert proxy_for("https://api.example.com", "http://kubeconfig-proxy:8080", environ) == (
        Proxy("kubeconfig-proxy", 8080, url="http://kubeconfig-proxy:8080"))


def test_the_environment_names_the_proxy_by_the_server_scheme_in_either_case() -> None:
    environ = {"https_proxy": "http://secure:3128", "HTTP_PROXY": "plain:8080"}
    assert proxy_for("https://api.example.com:6443", None, environ) == parse_proxy(
        "http://secure:3128")
    assert proxy_for("http://api.example.com", None, environ) == parse_proxy("plain:8080")
    assert proxy_for("https://api.example.com", None, {}) is None


def test_loopback_servers_never_use_the_environment_proxy() -> None:
    environ = {"HTTPS_PROXY": "http://proxy:3128"}
    for server in ("https://localhost:6443", "https://127.0.0.1:6443", "https://[::1]:6443"):
        assert proxy_for(server, None, environ) is None


@pytest.mark.parametrize(("host", "port", "no_proxy", "bypassed"), [
    ("api.example.com", 443, "api.example.com", True),
    ("api.example.com", 443, "example.com", True),  # a domain covers its subdomains
    ("example.com", 443, ".example.com", False),  # a leading dot: subdomains only
    ("api.example.com", 443, ".example.com", True),
    ("api.example.com", 443, "*.example.com", True),
    ("notexample.com", 443, "example.com", False),
    ("10.1.2.3", 443, "10.0.0.0/8", True),
    ("10.1.2.3", 443, "192.168.0.0/16, 10.1.2.3", True),
    ("fd00::1", 443, "fd00::/8", True),
    ("api.example.com", 443, "api.example.com:6443", False),
    ("api.example.com", 6443, "api.example.com:6443", True),
    ("anything", 443, "*", True),
    ("api.example.com", 443, "", False),
])
def test_no_proxy_names_hosts_domains_addresses_and_networks(
        host: str, port: int, no_proxy: str, bypassed: bool) -> None:
    assert bypasses_proxy(host, port, no_proxy) is bypassed


def test_a_proxy_url_with_credentials_authorizes_the_tunnel_and_other_schemes_are_refused(
        ) -> None:
    assert parse_proxy("http://user:p%40ss@proxy:3128").authorization == (
        "Basic dXNlcjpwQHNz")  # user:p@ss
    with pytest.raises(ValueError, match="only http:// proxies"):
        parse_proxy("socks5://proxy:1080")


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback that counts the tunnels it opened (and can refuse)."""

    def __init__(self, refuse: bool = False) -> None:
        self.tunnels: list[str] = []
        self.refuse = refuse
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ")
        if method != "CONNECT" or self.refuse:
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        host, _, port = target.rpartition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(
            host.strip("[]"), int(port))
        self.tunnels.append(target)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[ConnectProxy]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()


def _kubeconfig_through(remote: Any, tmp_path: Path, proxy_port: int) -> Path:
    contents = yaml.safe_load(remote.kubeconfig.read_text())
    base = remote.kubeconfig.parent
    for entry in contents["clusters"]:
        entry["cluster"]["proxy-url"] = f"http://127.0.0.1:{proxy_port}"
        authority = entry["cluster"].get("certificate-authority")
        if authority:  # relative to the original kubeconfig
            entry["cluster"]["certificate-authority"] = str(base / authority)
    path = tmp_path / "proxied.kubeconfig"
    path.write_text(yaml.safe_dump(contents))
    return path


def test_requests_and_watches_go_through_the_kubeconfig_proxy(remote: Any,
                                                              tmp_path: Path) -> None:
    name = f"proxied-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[list[str], str]:
        async with ConnectProxy().running() as proxy:
            connection = load_connection(str(_kubeconfig_through(remote, tmp_path, proxy.port)))
            assert connection.proxy is not None and connection.proxy.port == proxy.port
            api = ClusterApi(connection)
            seen = asyncio.Event()
            watch = asyncio.create_task(list_and_watch(
                api, core_path("configmaps", "default"),
                lambda _, obj: seen.set() if obj["metadata"]["name"] == name else None,
                query={"fieldSelector": f"metadata.name={name}"}, name="proxied"))
            try:
                await api.create(core_path("configmaps", "default"),
                                 {"metadata": {"name": name}})
                async with asyncio.timeout(10):
                    await seen.wait()
                found = await api.get(core_path("configmaps", "default", name))
                await api.delete(core_path("configmaps", "default", name))
            finally:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
                await api.close()
            return proxy.tunnels, found["metadata"]["name"]

    tunnels, found = asyncio.run(scenario())
    server = load_connection(str(remote.kubeconfig)).server.split("://", 1)[1]
    assert found == name
    assert len(tunnels) >= 2 and set(tunnels) == {server}  # the pool's, and the watch's own


def test_a_proxy_that_refuses_the_tunnel_is_a_connection_failure_naming_it(
        remote: Any, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with ConnectProxy(refuse=True).running() as proxy:
            api = ClusterApi(load_connection(str(_kubeconfig_through(remote, tmp_path,
                                                                       proxy.port))))
            try:
                await api.get("/version")
            finally:
                await api.close()

    with pytest.raises(ProxyRefused, match="refused CONNECT .*403 Forbidden"):
        asyncio.run(scenario())


def test_a_loaded_kubeconfig_takes_the_proxy_from_the_environment_unless_no_proxy_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = {"current-context": "c",
                  "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                  "clusters": [{"name": "k", "cluster": {"server": "https://api.example.com"}}],
                  "users": [{"name": "u", "user": {"token": "t"}}]}
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert connection_from_kubeconfig(kubeconfig).proxy == parse_proxy("http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", ".example.com")
    assert connection_from_kubeconfig(kubeconfig).proxy is None
