"""Which API server an offloaded pod reaches (`api_server_support`, as its
`liqo.io/api-server-support` annotation says, else the agent's default), and the home
service-account tokens it projects (`projected_service_account_tokens`), by the names the pod's
forge and the token reflector share: the remote Secret that holds them and each token's key in
it."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.forge.metadata import annotations_of
from shared.forge.namespace import shortened
from shared.wellknown import (
    API_SERVER_SUPPORT_ANNOTATION,
    API_SERVER_SUPPORT_DISABLED,
    API_SERVER_SUPPORT_REMOTE,
)

API_SERVER_SUPPORT_HOME = "home"
"""The default: the remote pod reaches the home API server (not an annotation value)."""
API_SERVER_SUPPORT_VALUES = (API_SERVER_SUPPORT_DISABLED, API_SERVER_SUPPORT_REMOTE)


def service_account_token_secret_name(pod_name: str) -> str:
    """The remote Secret holding an offloaded pod's home service-account tokens (Liqo's name,
    shortened with a hash if it would exceed a Secret name's 253 characters)."""
    return shortened(f"{pod_name}-token", max_length=253)


@functools.lru_cache(maxsize=1024)
def service_account_token_key(volume_name: str, path: str) -> str:
    """The key, in that Secret, of the token projected into `volume_name` at `path` (Liqo's
    TokenAPI key: a pod may project several tokens, each with its own audience). Remembered:
    the pods of a cluster project a few (volume, path) pairs, each looked up several times a
    pod change."""
    return f"{volume_name}-{hashlib.sha256(path.encode()).hexdigest()[:6]}"


@dataclass(frozen=True)
class ProjectedToken:
    """A service-account token the home pod projects, to be requested from the home cluster
    (TokenRequest bound to the pod) and stored under `key` in the pod's token Secret."""

    key: str
    path: str
    audience: str | None
    expiration_seconds: int


DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600
"""The apiserver's default expirationSeconds for a projected token."""


def api_server_support(local_pod: Mapping[str, Any], enabled: bool) -> tuple[str, str | None]:
    """Which API server the remote pod reaches: API_SERVER_SUPPORT_HOME,
    API_SERVER_SUPPORT_DISABLED or API_SERVER_SUPPORT_REMOTE, as the pod's annotation says,
    else as the agent's default (`enabled`: home); and a warning for a value it does not know
    (then ignored, as Liqo ignores it)."""
    default = API_SERVER_SUPPORT_HOME if enabled else API_SERVER_SUPPORT_DISABLED
    value = annotations_of(local_pod).get(API_SERVER_SUPPORT_ANNOTATION)
    if value is None:
        return default, None
    if value in API_SERVER_SUPPORT_VALUES:
        return value, None
    return default, (f"unknown {API_SERVER_SUPPORT_ANNOTATION} value {value!r} ignored "
                     f"(expected {API_SERVER_SUPPORT_DISABLED} or {API_SERVER_SUPPORT_REMOTE})")


def projected_service_account_tokens(local_pod: Mapping[str, Any]) -> list[ProjectedToken]:
    """Every token the pod's projected volumes ask for of the home cluster: what the token
    reflector must keep in `service_account_token_secret_name(pod name)` for the remote pod's
    Secret projections. None when the pod's `liqo.io/api-server-support` is `disabled` (no
    token) or `remote` (the remote kubelet makes the provider's)."""
    if annotations_of(local_pod).get(API_SERVER_SUPPORT_ANNOTATION) in API_SERVER_SUPPORT_VALUES:
        return []
    tokens = []
    for volume in (local_pod.get("spec") or {}).get("volumes") or []:
        for source in (volume.get("projected") or {}).get("sources") or []:
            token = source.get("serviceAccountToken")
            if isinstance(token, dict):
                path = str(token.get("path", ""))
                tokens.append(
                    ProjectedToken(
                        key=service_account_token_key(str(volume.get("name", "")), path),
                        path=path,
                        audience=token.get("audience"),
                        expiration_seconds=int(
                            token.get("expirationSeconds") or DEFAULT_TOKEN_EXPIRATION_SECONDS
                        ),
                    )
                )
    return tokens
