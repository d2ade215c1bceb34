"""Kubernetes clients for both components, built from one kubeconfig (or in-cluster config).

`load_connection` reads the kubeconfig once. A `LiveConnection` holds credentials that
are replaced while clients use them (a rotated token): `annex.kubeapi.ClusterApi` follows it.

Tokens that rotate under a running process are read again as client-go reads them: the
in-cluster service-account token and a kubeconfig's `tokenFile` (`FileToken`: kubelet rewrites a
projected token at 80 % of its lifetime; read again once a minute, and at once after a 401), and
an exec plugin's credential (`ExecToken`: run again once its `expirationTimestamp` passes, or
after a 401). Each process names itself (`name_component`): its User-Agent, in client-go's form,
and the `fieldManager` of its writes, so that audit logs and managedFields tell the components
apart.

The Python client has no built-in client-side rate limiting (client-go's QPS/burst), so
`ClientLimits` carries those numbers and `RateLimiter` enforces them for whoever writes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import importlib.metadata
import json
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
from kubernetes.config.exec_provider import ExecProvider
from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader

from annex.proxies import Proxy, proxy_for


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

FILE_TOKEN_MAX_AGE = 60.0
"""Seconds a token read from a file is used before the file is read again (client-go's
cachedFileTokenSource: one minute)."""
EXEC_EXPIRY_SKEW = 10.0
"""Seconds before its expirationTimestamp an exec plugin's credential is renewed."""


class TokenSource:
    """A bearer token that rotates while the process runs. `current` costs nothing; `stale`
    says when `read` (file I/O, a plugin run: call it off the event loop) is due. Thread-safe.
    Sources compare by where they read from: a kubeconfig loaded again gives an equal one."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        """Held while the token is read: one read at a time."""
        self._token: str | None = None
        self._due = 0.0
        """When (clock) the token must be read again."""

    def current(self) -> str | None:
        with self._lock:
            return self._token

    def stale(self) -> bool:
        with self._lock:
            return self._token is None or self._clock() >= self._due

    def renew_if_stale(self) -> str | None:
        """The token, read again first when it is due (one reader at a time; the others get
        what it read)."""
        with self._reading:
            return self._read() if self.stale() else self.current()

    def refresh(self, rejected: str | None) -> str | None:
        """The token after the API server rejected `rejected` (401): read again, unless
        another caller did since."""
        with self._reading:
            current = self.current()
            return current if current is not None and current != rejected else self._read()

    def read(self) -> str | None:
        """Read the token now."""
        with self._reading:
            return self._read()

    def _read(self) -> str | None:
        """A failed read keeps the token there was, as client-go does, and is logged."""
        try:
            token, due = self._fetch()
        except (OSError, ValueError, config.ConfigException) as error:
            log.warning("reading the bearer token from %s failed (the current one stays in "
                        "use): %s", self, error)
            with self._lock:
                self._due = self._clock() + 1.0  # not at every request
                return self._token
        with self._lock:
            self._token, self._due = token, due
            return token

    def _fetch(self) -> tuple[str, float]:
        """(token, when to read again)."""
        raise NotImplementedError

    def _key(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())


class FileToken(TokenSource):
    """A token kept in a file that is rewritten when it rotates (a projected service-account
    token, a kubeconfig's tokenFile)."""

    def __init__(self, path: str, max_age: float = FILE_TOKEN_MAX_AGE,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self.path, self.max_age = path, max_age

    def _fetch(self) -> tuple[str, float]:
        with open(self.path, encoding="utf-8") as file:
            token = file.read().strip()
        if not token:
            raise ValueError("the file is empty")
        return token, self._clock() + self.max_age

    def _key(self) -> tuple[Any, ...]:
        return (self.path, self.max_age)

    def __repr__(self) -> str:
        return f"token file {self.path}"


class ExecToken(TokenSource):
    """A kubeconfig user's exec plugin (`users[].user.exec`), run again when the credential's
    `status.expirationTimestamp` passes (never, without one) or after a 401."""

    def __init__(self, exec_config: Mapping[str, Any], base_path: str,
                 cluster: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self.exec_config, self.base_path = dict(exec_config), base_path
        self.cluster = dict(cluster or {})

    def _fetch(self) -> tuple[str, float]:
        plugin = ExecProvider(ConfigNode("exec", self.exec_config),  # type: ignore[no-untyped-call]
                              self.base_path,
                              ConfigNode("cluster", self.cluster))  # type: ignore[no-untyped-call]
        status: dict[str, Any] = plugin.run()  # type: ignore[no-untyped-call]
        token = status.get("token")
        if not token:
            raise ValueError("the exec plugin gave no token (client certificates from exec "
                             "plugins are not supported)")
        due = float("inf")
        if status.get("expirationTimestamp"):
            expires = datetime.datetime.fromisoformat(
                str(status["expirationTimestamp"]).replace("Z", "+00:00"))
            due = expires.timestamp() - EXEC_EXPIRY_SKEW
        return str(token), due

    def _key(self) -> tuple[Any, ...]:
        return (json.dumps(self.exec_config, sort_keys=True), self.base_path)

    def __repr__(self) -> str:
        return f"exec plugin {self.exec_config.get('command')}"


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


@dataclass(frozen=True)
class ServiceAccountRef:
    namespace: str
    name: str
    uid: str


def token_claims(token: str | None) -> dict[str, Any] | None:
    """The claims of a JSON Web Token (a service-account token), None for any other token.
    Read, not verified: the API server verifies the token it is sent."""
    parts = (token or "").split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    return claims if isinstance(claims, dict) else None


def token_service_account(token: str | None) -> ServiceAccountRef | None:
    """The ServiceAccount a bound service-account token was issued for (its `kubernetes.io`
    claim, as the API server writes it), None for any other token."""
    private = (token_claims(token) or {}).get("kubernetes.io")
    if not isinstance(private, dict) or not isinstance(private.get("serviceaccount"), dict):
        return None
    namespace, name, uid = (private.get("namespace"), private["serviceaccount"].get("name"),
                            private["serviceaccount"].get("uid"))
    if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str)
            and namespace and name and uid):
        return None
    return ServiceAccountRef(namespace, name, uid)


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
