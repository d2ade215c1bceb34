"""Who may call the virtual node's kubelet API, as a kubelet with `--anonymous-auth=false`,
`--client-ca-file`, `--authentication-token-webhook` and `--authorization-mode=Webhook` decides:
a client certificate verified against the configured CA (the API server's kubelet client
certificate: CN is the user, O the groups), else a bearer token reviewed with a TokenReview at
home; then a SubjectAccessReview at home for the `nodes` subresource the path maps to. Answers
are cached as a kubelet caches them (authentication 2 min; authorization 5 min allowed, 30 s
denied: `annex.reviews`), so that a stream of requests does not become a stream of reviews."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annex.reviews import Caller, Reviews

__all__ = ["Caller", "Reviews", "certificate_caller"]


def certificate_caller(peercert: Mapping[str, Any] | None) -> Caller | None:
    """The user a verified client certificate names (CN; O are groups), as x509 request
    authentication reads it."""
    if not peercert:
        return None
    name, groups = "", []
    for rdn in peercert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                name = str(value)
            elif key == "organizationName":
                groups.append(str(value))
    return Caller(name, tuple(groups)) if name else None
