"""Kubernetes clients for both components, built from one kubeconfig (or in-cluster config).

`load_connection` reads the credentials once; `kopf_login` turns them into a kopf
`ConnectionInfo`, so the enforcer's operator framework and `annex.kubeapi.ClusterApi` always talk to
the same server as the same identity. A `LiveConnection` holds credentials that
are replaced while clients use them (a rotated token): `annex.kubeapi.ClusterApi` follows it.

The Python client has no built-in client-side rate limiting (client-go's QPS/burst), so
`ClientLimits` carries those numbers and `RateLimiter` enforces them for whoever writes.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes import client, config

if TYPE_CHECKING:
    import kopf


@dataclass(frozen=True)
class ClientLimits:
    """Client-side throttling, as client-go's rest.Config QPS and Burst. Off by default (qps
    0), as in controller-runtime since v0.21 on SIG API Machinery's advice: the API server's
    Priority and Fairness guards it and slows a client down with 429 and Retry-After, which
    `annex.kubeapi.ClusterApi` honours. A fixed cap would bound a whole cluster's offloading
    (a pod is 8 writes of the agent's and 2 of the enforcer's) whatever the server could take."""

    qps: float = 0.0
    burst: int = 100


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate: what both clients are built from."""

    server: str
    ca_path: str | None = None
    insecure: bool = False
    token: str | None = None
    certificate_path: str | None = None
    private_key_path: str | None = None
    tls_server_name: str | None = None
    limits: ClientLimits = field(default_factory=ClientLimits)


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
        config.load_kube_config(config_file=kubeconfig, context=context,
                                client_configuration=configuration,  # type: ignore[no-untyped-call]
                                persist_config=False)
    else:
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration)
    return _connection_of(configuration, limits)


def connection_from_kubeconfig(contents: Mapping[str, Any], *,
                               limits: ClientLimits | None = None) -> Connection:
    """The connection a kubeconfig's current context describes (e.g. one kept in a Secret);
    ValueError when it is not a usable kubeconfig."""
    configuration = client.Configuration()
    try:
        config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
            dict(contents), client_configuration=configuration, persist_config=False)
    except (config.ConfigException, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"not a usable kubeconfig: {error}") from None
    return _connection_of(configuration, limits)


def _connection_of(configuration: client.Configuration,
                   limits: ClientLimits | None) -> Connection:
    return Connection(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        token=bearer_token(configuration),
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
        tls_server_name=getattr(configuration, "tls_server_name", None),
        limits=limits or ClientLimits(),
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


def kopf_login(connection: Connection) -> kopf.ConnectionInfo:
    """The kopf login for the same connection (use it from an `@kopf.on.login` handler). kopf
    is imported here: the agent does not use it, and importing it costs memory."""
    import kopf  # noqa: PLC0415

    return kopf.ConnectionInfo(
        server=connection.server,
        ca_path=connection.ca_path,
        insecure=connection.insecure,
        token=connection.token,
        scheme="Bearer" if connection.token else None,
        certificate_path=connection.certificate_path,
        private_key_path=connection.private_key_path,
    )


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
