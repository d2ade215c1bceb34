"""Which HTTP proxy a connection to the API server goes through, as client-go chooses it.

client-go uses the kubeconfig cluster's `proxy-url` when it has one, else Go's
`http.ProxyFromEnvironment`: HTTPS_PROXY (https servers) or HTTP_PROXY (http servers), upper or
lower case, unless NO_PROXY names the host (golang.org/x/net/http/httpproxy): a comma-separated
list of host names (which match their subdomains too), `.domain` (subdomains only, as Go treats
it), IP addresses, CIDRs, `host:port`, or `*` for every host. Requests to localhost and loopback
addresses never use the environment's proxy. The proxy is reached with HTTP CONNECT
(`annex.http1`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy that tunnels with CONNECT; `authorization` its Proxy-Authorization value
    (Basic, from the URL's user info), if any."""

    host: str
    port: int
    authorization: str | None = None
    url: str = ""
    """As configured (for clients that take a URL: aiohttp's, the kubelet API's streams)."""


def parse_proxy(url: str) -> Proxy:
    """The proxy an `http://[user:password@]host[:port]` URL names; ValueError for any other
    scheme (client-go also speaks socks5 and https to proxies; annex does not)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")  # Go: a bare host means http
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"proxy {url!r}: only http:// proxies (HTTP CONNECT) are supported")
    authorization = None
    if parts.username is not None:
        import base64  # noqa: PLC0415 - rarely needed

        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode()
    return Proxy(parts.hostname, parts.port or 80, authorization, parts.geturl())


def proxy_for(server: str, proxy_url: str | None, environ: Mapping[str, str]) -> Proxy | None:
    """The proxy for connections to `server` (the API server's URL): `proxy_url` (the
    kubeconfig's) when given, else the environment's unless NO_PROXY excludes the server."""
    if proxy_url:
        return parse_proxy(proxy_url)
    parts = urlsplit(server)
    https = parts.scheme == "https"
    url = _variable(environ, "HTTPS_PROXY" if https else "HTTP_PROXY")
    host = (parts.hostname or "").lower()
    if not url or not host or _never_proxied(host):
        return None
    port = parts.port or (443 if https else 80)
    if bypasses_proxy(host, port, _variable(environ, "NO_PROXY")):
        return None
    return parse_proxy(url)


def _variable(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name) or environ.get(name.lower()) or ""


def _never_proxied(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bypasses_proxy(host: str, port: int, no_proxy: str) -> bool:
    """Whether NO_PROXY (`no_proxy`) names `host` (lower case, no brackets) on `port`."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if address is not None:
            try:
                if address == ipaddress.ip_address(name):
                    return True
            except ValueError:
                pass
            continue
        if name.startswith("*."):
            name = name[1:]
        if name.startswith("."):
            if host.endswith(name):  # Go: ".example.com" matches subdomains only
                return True
        elif host == name or host.endswith("." + name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """`host:port` → (host, port); an IPv6 address in brackets loses them; no port → None."""
    if entry.startswith("["):
        address, _, rest = entry[1:].partition("]")
        return address, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None
