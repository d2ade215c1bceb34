"""Secret, home → remote: verbatim, service-account-token Secrets excluded.

A `kubernetes.io/service-account-token` Secret holds a token of a home ServiceAccount; the remote
API server would also refuse it (its ServiceAccount does not exist there). Offloaded pods get
their tokens through the token reflector instead.

`stringData` is a write-only convenience that the API server merges into `data` (its keys win);
we do the same merge, so the desired copy compares equal to what the remote server stores.
"""

import base64
from collections.abc import Mapping
from typing import Any

from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, remote_metadata
from shared.wellknown import SERVICE_ACCOUNT_TOKEN_SECRET_TYPE

DEFAULT_SECRET_TYPE = "Opaque"


def is_reflectable_secret(secret: Mapping[str, Any]) -> bool:
    """False for service-account-token Secrets, which are never reflected."""
    return secret.get("type") != SERVICE_ACCOUNT_TOKEN_SECRET_TYPE


def _merged_data(secret: Mapping[str, Any]) -> dict[str, str]:
    data: dict[str, str] = dict(secret.get("data") or {})
    for key, value in (secret.get("stringData") or {}).items():
        data[key] = base64.b64encode(value.encode()).decode()
    return data


def remote_secret(
    local: Mapping[str, Any], remote_namespace: str, config: ReflectionConfig
) -> dict[str, Any]:
    """The desired remote copy of the home Secret `local` (check `is_reflectable_secret` first)."""
    remote: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": remote_metadata(local, remote_namespace, config),
        "type": local.get("type") or DEFAULT_SECRET_TYPE,
    }
    data = _merged_data(local)
    if data:
        remote["data"] = data
    if local.get("immutable") is not None:
        remote["immutable"] = copied(local["immutable"])
    return remote
