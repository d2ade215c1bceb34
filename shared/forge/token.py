"""Service-account tokens, home → remote: per offloaded pod, one Secret in
its twin namespace holding a home-cluster token for every token the pod's projected volumes ask
for (`shared.forge.pod_tokens.projected_service_account_tokens`), plus the pod's home namespace (the
remote pod's projected `namespace` file reads it from there, see `shared.forge.pod`).

Liqo's forge/secrets.go is the model: the Secret's name and keys, its two labels (which tell the
Secret reflector to leave it alone) and its pod-uid and expiration annotations. We also record
the refresh time, so that a restarted agent reuses a fresh Secret without asking for new tokens.

Refresh as the kubelet's token manager does it (pkg/kubelet/token/token_manager.go,
`requiresRefresh`): once 80% of the token's lifetime has passed, or 24 h after it was issued,
whichever comes first. The kubelet adds up to 10 s of jitter; we do not (a refresh time that
differs on every call could never be compared with the recorded one). `refresh_fraction`
replaces the 80% (a flag, for tests that cannot wait 8 minutes for a 10-minute token).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.api.builtin import PODS
from shared.forge.namespace import shortened
from shared.forge.pod import service_account_name
from shared.forge.pod_tokens import ProjectedToken, service_account_token_secret_name
from shared.ownership import ownership_labels
from shared.rfc3339 import parse_rfc3339, rfc3339
from shared.wellknown import (
    TOKEN_SECRET_EXPIRATION_ANNOTATION,
    TOKEN_SECRET_NAMESPACE_KEY,
    TOKEN_SECRET_POD_ANNOTATION,
    TOKEN_SECRET_POD_LABEL,
    TOKEN_SECRET_POD_UID_ANNOTATION,
    TOKEN_SECRET_REFRESH_ANNOTATION,
    TOKEN_SECRET_SERVICE_ACCOUNT_LABEL,
)

DEFAULT_REFRESH_FRACTION = 0.8
"""The kubelet refreshes a token once 80% of its lifetime has passed."""
MAX_TOKEN_AGE = timedelta(hours=24)
"""... or once it is 24 hours old (the kubelet's maxTTL)."""
LABEL_VALUE_MAX_LENGTH = 63




def token_request(local_pod: Mapping[str, Any], token: ProjectedToken) -> dict[str, Any]:
    """The TokenRequest for one of the pod's tokens: its audience and lifetime, bound to the home
    pod (the token dies with it, as the kubelet's do)."""
    metadata = local_pod.get("metadata") or {}
    spec: dict[str, Any] = {
        "expirationSeconds": token.expiration_seconds,
        "boundObjectRef": {**PODS.type_meta(), "name": metadata.get("name"),
                           "uid": metadata.get("uid")},
    }
    if token.audience:
        spec["audiences"] = [token.audience]
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


@dataclass(frozen=True)
class IssuedToken:
    """A token the home API server issued, under the Secret key it is stored at."""

    key: str
    token: str
    expires: datetime
    lifetime: timedelta
    """As granted (the server may shorten what was asked for)."""

    def refresh_due(self, refresh_fraction: float = DEFAULT_REFRESH_FRACTION) -> datetime:
        issued = self.expires - self.lifetime
        return issued + min(self.lifetime * refresh_fraction, MAX_TOKEN_AGE)


def issued_token(key: str, answer: Mapping[str, Any], requested_seconds: int) -> IssuedToken:
    """The TokenRequest answer (status.token, status.expirationTimestamp) as an IssuedToken
    (ValueError when the answer lacks them); its lifetime is the answer's expirationSeconds, or
    the requested one when the answer does not say."""
    status = answer.get("status") or {}
    token = status.get("token")
    expiration = status.get("expirationTimestamp")
    if not token or not expiration:
        raise ValueError("the TokenRequest answer has no status.token or expirationTimestamp")
    seconds = (answer.get("spec") or {}).get("expirationSeconds") or requested_seconds
    return IssuedToken(key=key, token=str(token), expires=parse_rfc3339(str(expiration)),
                       lifetime=timedelta(seconds=int(seconds)))


def token_secret(
    local_pod: Mapping[str, Any],
    remote_namespace: str,
    tokens: Iterable[IssuedToken],
    home_cluster_id: str,
    remote_cluster_id: str,
    refresh_fraction: float = DEFAULT_REFRESH_FRACTION,
) -> dict[str, Any]:
    """The remote Secret for `local_pod` holding `tokens` (at least one) and its home namespace."""
    tokens = list(tokens)
    metadata = local_pod.get("metadata") or {}
    pod_name = str(metadata.get("name", ""))
    data = {token.key: _b64(token.token) for token in tokens}
    data[TOKEN_SECRET_NAMESPACE_KEY] = _b64(str(metadata.get("namespace", "")))
    labels = {
        **ownership_labels(home_cluster_id, remote_cluster_id),
        TOKEN_SECRET_POD_LABEL: shortened(pod_name, LABEL_VALUE_MAX_LENGTH),
        TOKEN_SECRET_SERVICE_ACCOUNT_LABEL: shortened(
            service_account_name(local_pod.get("spec") or {}), LABEL_VALUE_MAX_LENGTH),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": service_account_token_secret_name(pod_name),
            "namespace": remote_namespace,
            "labels": labels,
            "annotations": {
                TOKEN_SECRET_POD_ANNOTATION: pod_name,
                TOKEN_SECRET_POD_UID_ANNOTATION: str(metadata.get("uid", "")),
                TOKEN_SECRET_EXPIRATION_ANNOTATION: rfc3339(min(t.expires for t in tokens)),
                TOKEN_SECRET_REFRESH_ANNOTATION: rfc3339(
                    min(t.refresh_due(refresh_fraction) for t in tokens)),
            },
        },
        "type": "Opaque",
        "data": data,
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


_SUMMARY_METADATA = ("namespace", "name", "uid", "resourceVersion", "labels", "annotations")


def token_secret_summary(secret: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent keeps of a token Secret: its metadata and its data with each token
    replaced by the token's digest (a token is most of the Secret and only ever compared:
    `stale_reason` reads the keys and the namespace, a drift check the digests)."""
    metadata = secret.get("metadata") or {}
    data = {key: value if key == TOKEN_SECRET_NAMESPACE_KEY
            else "sha256:" + hashlib.sha256(str(value).encode()).hexdigest()
            for key, value in (secret.get("data") or {}).items()}
    return {"metadata": {key: metadata[key] for key in _SUMMARY_METADATA if key in metadata},
            "data": data}


def is_token_secret(obj: Mapping[str, Any]) -> bool:
    """A Secret of the token reflector (Liqo's IsServiceAccountSecret: both labels present)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return TOKEN_SECRET_POD_LABEL in labels and TOKEN_SECRET_SERVICE_ACCOUNT_LABEL in labels


def token_secret_pod_name(secret: Mapping[str, Any]) -> str | None:
    """The home pod a token Secret was written for."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    name = annotations.get(TOKEN_SECRET_POD_ANNOTATION)
    return str(name) if name else None


def refresh_time(secret: Mapping[str, Any]) -> datetime | None:
    """When the Secret's tokens are due for a refresh, or None if it does not say (or says it in
    a form we cannot read: then it is refreshed now)."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    try:
        return parse_rfc3339(str(annotations[TOKEN_SECRET_REFRESH_ANNOTATION]))
    except (KeyError, ValueError):
        return None


def stale_reason(
    secret: Mapping[str, Any], local_pod: Mapping[str, Any], keys: Iterable[str], now: datetime
) -> str | None:
    """Why the Secret's tokens must be requested again (a message for the log), or None when it
    is fresh and complete for `local_pod`, whose tokens are stored under `keys`."""
    metadata = local_pod.get("metadata") or {}
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    if annotations.get(TOKEN_SECRET_POD_UID_ANNOTATION) != metadata.get("uid"):
        return "issued for another pod of that name"
    data = secret.get("data") or {}
    if set(data) != {*keys, TOKEN_SECRET_NAMESPACE_KEY}:
        return "its keys are not the pod's tokens"
    if data.get(TOKEN_SECRET_NAMESPACE_KEY) != _b64(str(metadata.get("namespace", ""))):
        return "its namespace key is not the home namespace"
    due = refresh_time(secret)
    if due is None:
        return "no readable refresh time"
    if due <= now:
        return "due for a refresh"
    return None
