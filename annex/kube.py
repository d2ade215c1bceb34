"""Kubernetes clients for both components, built from one kubeconfig (or in-cluster config).

`load_connection` reads the kubeconfig once. A `LiveConnection` holds credentials that
are replaced while clients use them (a rotated token): `annex.kubeapi.ClusterApi` follows it.

Tokens that rotate under a running process (a projected service-account token, an exec
plugin's credential) come from `annex.tokens`. Each process names itself (`name_component`):
its User-Agent, in client-go's form, and the `fieldManager` of its writes, so that audit logs
and managedFields tell the components apart.

The Python client has no built-in client-side rate limiting (client-go's QPS/burst), so
`ClientLimits` carries those numbers and `RateLimiter` enforces them for whoever writes.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import platform
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.config import incluster_config
from kubernetes.config.kube_config import KubeConfigLoader

from annex.proxies import Proxy, proxy_for
from annex.tokens import ExecToken, FileToken, TokenSource


@dataclass(frozen=True)
class ClientLimits:
    """Client-side throttling, as client-go's rest.Config QPS and Burst. Off by default (qps
    0), as in controller-runtime since v0.21 on SIG API Machinery's advice: the API server's
    Priority and Fairness guards it and slows a client down with 429 and Retry-After, which
    `annex.kubeapi.ClusterApi` honours. A fixed cap would bound a whole cluster's offloading
    (a pod is 8 writes of the agent's and 2 of the enforcer's) whatever the server could take."""

    qps: float = 0.0
    burst: int = 100


log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate: what both clients are built from.
    `token_source`, when set, gives the token (`token` is the one read when loading)."""

    server: str
    ca_path: str | None = None
    insecure: bool = False
    token: str | None = None
    certificate_path: str | None = None
    private_key_path: str | None = None
    tls_server_name: str | None = None
    limits: ClientLimits = field(default_factory=ClientLimits)
    token_source: TokenSource | None = None
    proxy: Proxy | None = None
    """The HTTP proxy connections go through (the kubeconfig's proxy-url, else the
    environment's), or None."""


def current_token(connection: Connection) -> str | None:
    """The bearer token to send now: the token source's latest (read again by the clients'
    requests, `annex.kubeapi.ClusterApi`), else the one loaded."""
    source = connection.token_source
    return (source.current() if source is not None else None) or connection.token


_component = "annex"


def name_component(component: str) -> None:
    """Name this process's component (`annex-home-agent`…): its clients' User-Agent and
    fieldManager. Call once at start, before any client is built."""
    global _component  # noqa: PLW0603 - one process, one component
    _component = component


def component_name() -> str:
    """The component this process runs: the fieldManager of its writes."""
    return _component


def user_agent(component: str | None = None) -> str:
    """client-go's form: `<component>/<version> (<os>/<arch>) annex/<commit>`; the commit from
    $ANNEX_GIT_COMMIT (the image build's), else "unknown"."""
    try:
        version = importlib.metadata.version("kube-annex")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine or "unknown")
    commit = os.environ.get("ANNEX_GIT_COMMIT") or "unknown"
    return (f"{component or _component}/v{version} ({platform.system().lower()}/{arch}) "
            f"annex/{commit}")


def bearer_token(configuration: client.Configuration) -> str | None:
    """The bearer token from a loaded configuration.

    kubernetes>=36 stores it under `api_key['BearerToken']` (with the "Bearer" prefix kept apart);
    older versions store `api_key['authorization'] = "Bearer <token>"`. Both are accepted.
    """
    if configuration.refresh_api_key_hook is not None:
        configuration.refresh_api_key_hook(configuration)
    for key in ("BearerToken", "authorization"):
        value = configuration.api_key.get(key)
        if value:
            text = str(value)
            return text.split(" ", 1)[1] if text.lower().startswith("bearer ") else text
    return None


def load_connection(kubeconfig: str | None = None, *, context: str | None = None,
                    limits: ClientLimits | None = None) -> Connection:
    """Read a kubeconfig file, or the in-cluster service account when `kubeconfig` is None."""
    configuration = client.Configuration()
    if kubeconfig:
        with open(kubeconfig, encoding="utf-8") as file:
            contents = yaml.safe_load(file) or {}
        base_path = os.path.dirname(os.path.abspath(kubeconfig))
        KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=_without_exec(contents), active_context=context,
            config_base_path=base_path).load_and_set(configuration)
        user, cluster = _chosen(contents, context)
        source = _token_source(user, cluster, base_path)
        proxy_url = cluster.get("proxy-url")
    else:
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration)
        source, proxy_url = FileToken(incluster_config.SERVICE_TOKEN_FILENAME), None
    return _connection_of(configuration, limits, source, proxy_url)


def _without_exec(contents: Mapping[str, Any]) -> dict[str, Any]:
    """The kubeconfig without its users' exec plugins, which `ExecToken` runs (once, not
    also by the kubernetes package's loader)."""
    users = [{**entry, "user": {key: value for key, value in (entry.get("user") or {}).items()
                                if key != "exec"}}
             if isinstance(entry, Mapping) else entry for entry in contents.get("users") or ()]
    return {**contents, "users": users}


def _chosen(contents: Mapping[str, Any], context: str | None) -> tuple[dict[str, Any],
                                                                   dict[str, Any]]:
    """The (user, cluster) entries of the kubeconfig's `context` (else its current one)."""
    def named(kind: str, name: Any) -> dict[str, Any]:
        for entry in contents.get(kind) or ():
            if isinstance(entry, Mapping) and entry.get("name") == name:
                return dict(entry)
        return {}

    chosen = named("contexts", context or contents.get("current-context")).get("context") or {}
    return (dict(named("users", chosen.get("user")).get("user") or {}),
            dict(named("clusters", chosen.get("cluster")).get("cluster") or {}))


def _token_source(user: Mapping[str, Any], cluster: Mapping[str, Any],
                  base_path: str) -> TokenSource | None:
    """What gives the token of a kubeconfig user, when it rotates: its exec plugin or its
    tokenFile (a `token` given inline wins over tokenFile, as in client-go)."""
    if user.get("exec"):
        return ExecToken(user["exec"], base_path, cluster)
    if user.get("tokenFile") and not user.get("token"):
        return FileToken(os.path.join(base_path, str(user["tokenFile"])))
    return None


def connection_from_kubeconfig(contents: Mapping[str, Any], *,
                               limits: ClientLimits | None = None) -> Connection:
    """The connection a kubeconfig's current context describes (e.g. one kept in a Secret);
    ValueError when it is not a usable kubeconfig."""
    configuration = client.Configuration()
    try:
        config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
            _without_exec(contents), client_configuration=configuration, persist_config=False)
    except (config.ConfigException, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"not a usable kubeconfig: {error}") from None
    user, cluster = _chosen(contents, None)
    return _connection_of(configuration, limits, _token_source(user, cluster, os.getcwd()),
                          cluster.get("proxy-url"))


def _connection_of(configuration: client.Configuration, limits: ClientLimits | None,
                   source: TokenSource | None, proxy_url: str | None) -> Connection:
    """`proxy_url`: the kubeconfig cluster's (the client's own `proxy` may come from the
    environment, which NO_PROXY and loopback addresses must be checked against)."""
    token = bearer_token(configuration)
    if source is not None:
        source.read()  # the token just loaded is the first; this starts the source's clock
        token = source.current() or token
    try:
        proxy = proxy_for(configuration.host, proxy_url, os.environ)
    except ValueError as error:
        raise ValueError(f"kubeconfig of {configuration.host}: {error}") from None
    return Connection(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        token=token,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
        tls_server_name=getattr(configuration, "tls_server_name", None),
        limits=limits or ClientLimits(),
        token_source=source,
        proxy=proxy,
    )


class LiveConnection:
    """A connection whose credentials may be replaced while clients use it (thread-safe).

    Clients subscribe; `replace` calls each subscriber (on the replacing thread) so that it can
    move its own connections over. Subscribers are held weakly: a client nobody uses any more
    does not stay alive for being subscribed.
    """

    def __init__(self, connection: Connection) -> None:
        self._current = connection
        self._lock = threading.Lock()
        self._subscribers: list[weakref.WeakMethod[Callable[[], None]]] = []

    @property
    def current(self) -> Connection:
        with self._lock:
            return self._current

    def subscribe(self, callback: Callable[[], None]) -> None:
        """`callback`: a bound method, called after each replacement."""
        with self._lock:
            self._subscribers.append(weakref.WeakMethod(callback))

    def replace(self, connection: Connection) -> bool:
        """Use `connection` from now on; False (nothing done) when it is the current one."""
        with self._lock:
            if connection == self._current:
                return False
            self._current = connection
            self._subscribers = [ref for ref in self._subscribers if ref() is not None]
            callbacks = [ref() for ref in self._subscribers]
        for callback in callbacks:
            if callback is not None:
                callback()
        return True


class RateLimiter:
    """A token bucket (client-go's flowcontrol): `qps` tokens a second, at most `burst` saved."""

    def __init__(self, limits: ClientLimits, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._rate = limits.qps
        self._capacity = float(max(1, limits.burst))
        self._tokens = self._capacity
        self._clock = clock
        self._sleep = sleep
        self._updated = clock()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self._rate <= 0:  # qps <= 0 disables throttling, as in client-go
            return
        async with self._lock:
            now = self._clock()
            self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
            self._updated = now
            if self._tokens < 1:
                await self._sleep((1 - self._tokens) / self._rate)
                self._updated = self._clock()
                self._tokens = 1
            self._tokens -= 1
