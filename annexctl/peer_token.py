"""Peering by token, as liqoctl's generate-peer-command: the provider's admin generates a token
(`annexctl generate-peer-token`, run against the provider), hands it over out of band, and the
consumer redeems it (`annexctl peer --token ...`, run against home). The admin's consent is the
token; discovery plays no part in it.

Generating creates what `annexctl peer` creates on the provider (the tenant namespace, the
confined identity, its Quota: `peering.consumer_on_provider`), plus the Secret
`annex-peering-token` in the tenant namespace and a Role letting the consumer patch and delete
that one Secret, and mints a short-lived token for the consumer identity bound to the Secret (a
bound token dies with its object). The token carries the Secret's uid and resourceVersion.

Redeeming first claims the token: a patch of the Secret pinned to that resourceVersion, which
only one redeemer can win (the API server answers any other 409 Conflict, or 404 once the
Secret is gone); a lost claim is refused before anything is requested. The winner requests the
consumer's own day-long token (the identity may request tokens for itself, as its agent does to
renew them), installs that at home exactly as `annexctl peer` does
(`peering.install_at_home`), then deletes the Secret (preconditioned on its uid). "Works once"
rests on the claim, not on the deletion: kube-apiserver keeps a successful token authentication
for 10 seconds (TokenSuccessCacheTTL, pkg/kubeapiserver/options/authentication.go), so a bound
token still authenticates that long after its Secret is deleted. The token also stops working
when it expires (an hour by default), when the admin deletes the Secret, or when the admin
generates a newer one for the same consumer.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import replace
from typing import Any

from kubernetes import client

from annexctl.clusters import CliError, Cluster, connect
from annexctl.kubeconfigs import token_kubeconfig
from annexctl.output import Report, Table
from annexctl.peering import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PeerRequest,
    consumer_on_provider,
    install_at_home,
    mint_token,
    peered,
)
from shared.api.builtin import ROLE_BINDINGS, ROLES, SECRETS
from shared.wellknown import CONSUMER_SERVICE_ACCOUNT

TOKEN_PREFIX = "annex-peer-v1."
PEERING_TOKEN_LABEL = "annex.io/peering-token"
CLAIMED_BY_ANNOTATION = "annex.io/peering-token-claimed-by"
"""Set on the token's Secret by the redemption that won the claim (the consumer's cluster
ID)."""
PEERING_SECRET = "annex-peering-token"
"""The tenant namespace's Secret the peering token is bound to: one token per consumer at a
time."""
DEFAULT_TTL_SECONDS = 3600
MIN_TTL_SECONDS = 600  # the API server's shortest TokenRequest


def encode(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return TOKEN_PREFIX + base64.urlsafe_b64encode(text).decode().rstrip("=")


def decode(token: str) -> dict[str, Any]:
    """The token's payload; CliError (usage) when it is not one annexctl generated."""
    token = token.strip()
    if not token.startswith(TOKEN_PREFIX):
        raise CliError("not an annex peering token (it starts with "
                       f"{TOKEN_PREFIX!r}; `annexctl generate-peer-token` makes them)", 2)
    body = token[len(TOKEN_PREFIX):]
    try:
        payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, ValueError):
        raise CliError("the peering token is damaged (copied in part?)", 2) from None
    fields = ("providerClusterId", "consumerClusterId", "tenantNamespace", "kubeconfig")
    if not isinstance(payload, dict) or any(not payload.get(f) for f in fields):
        raise CliError("the peering token is damaged (copied in part?)", 2)
    return payload


def _anchor(tenant: str) -> dict[str, Any]:
    return {**SECRETS.type_meta(), "type": "Opaque",
            "metadata": {"name": PEERING_SECRET, "namespace": tenant,
                         "labels": {MANAGED_BY_LABEL: MANAGED_BY, PEERING_TOKEN_LABEL: "true"}}}


def _redeemer_rights(tenant: str) -> list[dict[str, Any]]:
    """A Role and RoleBinding letting the consumer patch and delete the token's Secret, and
    nothing else: redeeming claims, then spends the token."""
    metadata = {"name": PEERING_SECRET, "namespace": tenant,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY}}
    return [
        {**ROLES.type_meta(), "metadata": metadata,
         "rules": [{"apiGroups": [""], "resources": ["secrets"],
                    "resourceNames": [PEERING_SECRET], "verbs": ["patch", "delete"]}]},
        {**ROLE_BINDINGS.type_meta(),
         "metadata": metadata,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": PEERING_SECRET},
         "subjects": [{"kind": "ServiceAccount", "name": CONSUMER_SERVICE_ACCOUNT,
                       "namespace": tenant}]},
    ]


def generate(provider: Cluster, provider_cluster_id: str, request: PeerRequest,
             ttl_seconds: int = DEFAULT_TTL_SECONDS) -> Report:
    """On the provider: the consumer's objects, the Secret the token is bound to (made anew:
    an earlier token for this consumer stops working), and the token."""
    if ttl_seconds < MIN_TTL_SECONDS:
        raise CliError(f"--ttl-seconds must be at least {MIN_TTL_SECONDS}", 2)
    tenant, rows = consumer_on_provider(provider, request)
    rows += [["provider", m["kind"], f"{tenant}/{PEERING_SECRET}", provider.ensure(m)]
             for m in _redeemer_rights(tenant)]
    replaced = provider.delete("v1", "Secret", PEERING_SECRET, tenant)
    provider.ensure(_anchor(tenant))
    rows.append(["provider", "Secret", f"{tenant}/{PEERING_SECRET}",
                 "replaced" if replaced else "created"])
    created = (provider.get("v1", "Secret", PEERING_SECRET, tenant) or {}).get("metadata", {})
    token, expires = mint_token(provider, tenant, ttl_seconds, bound_to={
        "kind": "Secret", "name": PEERING_SECRET, "uid": str(created.get("uid") or "")})
    kubeconfig = token_kubeconfig(provider.configuration, token, tenant,
                                  cluster_name=provider_cluster_id,
                                  user_name=f"{request.home_cluster_id}-consumer",
                                  server=request.server)
    peering_token = encode({"providerClusterId": provider_cluster_id,
                            "consumerClusterId": request.home_cluster_id,
                            "tenantNamespace": tenant, "kubeconfig": kubeconfig,
                            "secretUid": str(created.get("uid") or ""),
                            "secretResourceVersion": str(created.get("resourceVersion") or "")})
    command = f"annexctl peer --token {peering_token}"
    data = {"providerClusterId": provider_cluster_id,
            "consumerClusterId": request.home_cluster_id, "tenantNamespace": tenant,
            "expirationTimestamp": expires, "token": peering_token, "command": command,
            "objects": [dict(zip(("cluster", "kind", "name", "action"), row, strict=True))
                        for row in rows]}
    notes = [f"Peering token for consumer {request.home_cluster_id}: it works once, until "
             f"{expires} (revoke it: kubectl delete secret -n {tenant} {PEERING_SECRET}).",
             "On the consumer (home) cluster, run:", f"  {command}"]
    return Report(data, [Table("Objects", ["CLUSTER", "KIND", "NAME", "ACTION"], rows)], notes)


def redeem(home: Cluster, token: str, namespace: str = "annex-system",
           secret_name: str | None = None,
           token_expiration_seconds: int | None = None) -> Report:
    """At home: exchange the peering token for the consumer's own token, install it, and spend
    the peering token."""
    payload = decode(token)
    request = PeerRequest(home_cluster_id=payload["consumerClusterId"],
                          remote_cluster_id=payload["providerClusterId"],
                          namespace=namespace, secret_name=secret_name)
    if token_expiration_seconds is not None:
        request = replace(request, token_expiration_seconds=token_expiration_seconds)
    tenant = payload["tenantNamespace"]
    if not payload.get("secretUid") or not payload.get("secretResourceVersion"):
        raise CliError("the peering token was generated by an older annexctl, which cannot "
                       "claim it once; generate a new one (annexctl generate-peer-token)", 2)
    provider = connect(f"provider {request.remote_cluster_id}", None,
                       contents=payload["kubeconfig"])
    try:
        claimed = claim(provider, tenant, payload, request.home_cluster_id)
        try:
            own, expires = mint_token(provider, tenant, request.token_expiration_seconds)
            kubeconfig = token_kubeconfig(provider.configuration, own, tenant,
                                          cluster_name=request.remote_cluster_id,
                                          user_name=f"{request.home_cluster_id}-consumer",
                                          server=payload["kubeconfig"]["clusters"][0][
                                              "cluster"]["server"])
            secret, rows = install_at_home(home, request, kubeconfig)
        finally:
            # Spent, whatever happened once claimed: its Secret goes, and the token bound to
            # it with it (10 s later at most, once the API server's token cache lets go).
            spend(provider, tenant, claimed)
    finally:
        provider.close()
    return peered(request, tenant, kubeconfig, expires, secret,
                  [["provider", "TokenRequest", f"{tenant}/{CONSUMER_SERVICE_ACCOUNT}",
                    "redeemed"], *rows,
                   ["provider", "Secret", f"{tenant}/{PEERING_SECRET}", "deleted (spent)"]])


SPENT = ("the peering token was already redeemed, revoked or replaced by a newer one (a peering "
         "token works once): ask the provider's admin for a new one (annexctl "
         "generate-peer-token)")


def claim(provider: Cluster, tenant: str, payload: dict[str, Any], by: str) -> dict[str, Any]:
    """Win the token or refuse: a merge patch of its Secret pinned to the resourceVersion the
    token was generated with. The API server applies one such patch; every other redeemer gets
    409 Conflict (the Secret changed: claimed by another, or made anew by a newer token), 404
    (spent or revoked) or 401 (the bound token died with its Secret). Returns the claimed
    Secret's metadata."""
    core = client.CoreV1Api(provider.api_client)
    patch = {"metadata": {"resourceVersion": payload["secretResourceVersion"],
                          "annotations": {CLAIMED_BY_ANNOTATION: by}}}
    with provider.talking(f"claiming the peering token (Secret {tenant}/{PEERING_SECRET})"):
        try:
            secret = core.patch_namespaced_secret(PEERING_SECRET, tenant, patch)
        except client.ApiException as error:
            if error.status in (401, 404, 409):
                raise CliError(f"{provider.where}: {SPENT}") from None
            raise
    metadata = secret.metadata
    if metadata is None or metadata.uid != payload["secretUid"]:
        raise CliError(f"{provider.where}: {SPENT}")
    return {"uid": metadata.uid, "resourceVersion": metadata.resource_version}


def spend(provider: Cluster, tenant: str, claimed: dict[str, Any]) -> None:
    """Delete the claimed Secret, and only it (a uid precondition: never a newer token's)."""
    core = client.CoreV1Api(provider.api_client)
    with provider.talking(f"spending the peering token (Secret {tenant}/{PEERING_SECRET})"):
        try:
            core.delete_namespaced_secret(PEERING_SECRET, tenant, body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid=claimed["uid"])))
        except client.ApiException as error:
            if error.status not in (404, 409):  # already gone, or no longer ours
                raise
