"""Bearer tokens that rotate under a running process, read again as client-go reads them: a
file rewritten when it rotates (`FileToken`: the in-cluster service-account token, a kubeconfig's
`tokenFile`; kubelet rewrites a projected token at 80 % of its lifetime; read again once a
minute, and at once after a 401) and an exec plugin's credential (`ExecToken`: run again once
its `expirationTimestamp` passes, or after a 401); and what a service-account token says of
itself (`token_claims`, `token_service_account`)."""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import config
from kubernetes.config.exec_provider import ExecProvider
from kubernetes.config.kube_config import ConfigNode

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
