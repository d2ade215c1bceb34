"""`annexctl peer` and `annexctl unpeer`.

peer, on the provider: the consumer's tenant namespace, confined identity and Quota (the same
objects the remote-enforcer chart creates per consumer: shared.tenancy), then a token for that
identity; at home: that token's kubeconfig as the Secret the home-agent chart mounts for this
remote (`remotes[].kubeconfigSecret`). Running it again is harmless: unchanged objects are not
written, and the token is renewed. The token lives a day by default; the agent renews it before
it expires and writes it back into the Secret (home_agent/credentials.py).

A consumer the remote-enforcer chart already declares is left as the chart made it: peer only
mints the token and installs the Secret. unpeer ends the peering on both sides with the cleanup
`annexctl uninstall` runs (annexctl/uninstall.py), then removes what annexctl created: a tenant
namespace the chart manages is the chart's to remove.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client

from annexctl import uninstall
from annexctl.clusters import EXIT_NOT_INSTALLED, CliError, Cluster
from annexctl.kubeconfigs import token_kubeconfig
from annexctl.output import Report, Table
from annexctl.version import NAME_LABEL
from shared.api.builtin import NAMESPACES, SECRETS
from shared.api.foreign_cluster import FOREIGN_CLUSTER
from shared.api.quota import LimitsEnforcement, PodPolicy
from shared.api.virtual_node import VIRTUAL_NODE
from shared.pools import flag_pool_names
from shared.tenancy import consumer_identity, consumer_quota, consumer_user_name
from shared.wellknown import (
    CONSUMER_SERVICE_ACCOUNT,
    REMOTE_CLUSTER_ID_LABEL,
    TENANT_NAMESPACE_LABEL,
)

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "annexctl"
KUBECONFIG_KEY = "kubeconfig"  # the key the home-agent chart mounts
DEFAULT_TOKEN_EXPIRATION_SECONDS = 24 * 3600
"""A day: the agent renews the token itself once half its lifetime has passed
(home_agent/credentials.py), so a copy of the Secret that leaks stops working soon."""


def kubeconfig_secret_name(remote_cluster_id: str) -> str:
    return f"{remote_cluster_id}-kubeconfig"


@dataclass(frozen=True)
class PeerRequest:
    home_cluster_id: str
    remote_cluster_id: str
    tenant_namespace: str | None = None
    namespace: str = "annex-system"  # home: where the home-agent chart runs
    secret_name: str | None = None
    server: str | None = None  # the provider's API server as the home agent reaches it
    token_expiration_seconds: int = DEFAULT_TOKEN_EXPIRATION_SECONDS
    limits_enforcement: LimitsEnforcement = LimitsEnforcement.NONE
    quota_resources: dict[str, str] = field(default_factory=dict)  # {}: what the offer says
    pod_policy: PodPolicy = field(default_factory=PodPolicy)
    pools: tuple[str, ...] | None = None  # None: every pool the provider declares


def _object_row(manifest: dict[str, Any], action: str, where: str) -> list[str]:
    metadata = manifest["metadata"]
    name = f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else (
        metadata["name"])
    return [where, manifest["kind"], name, action]


def mint_token(provider: Cluster, namespace: str, seconds: int,
               bound_to: dict[str, str] | None = None) -> tuple[str, str]:
    """A token for the consumer's ServiceAccount (bound to an object of the tenant namespace,
    e.g. a Secret, when `bound_to` names one: it dies with it); (token, expiration)."""
    core = client.CoreV1Api(provider.api_client)
    with provider.talking(f"requesting a token for {namespace}/{CONSUMER_SERVICE_ACCOUNT}"):
        answer = core.create_namespaced_service_account_token(
            CONSUMER_SERVICE_ACCOUNT, namespace, client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(
                    audiences=[], expiration_seconds=seconds,
                    bound_object_ref=None if bound_to is None else client.V1BoundObjectReference(
                        api_version="v1", **bound_to))))
    status = answer.status
    if status is None or not status.token:
        raise CliError(f"{provider.where}: the TokenRequest for {namespace}/"
                       f"{CONSUMER_SERVICE_ACCOUNT} returned no token")
    return str(status.token), str(status.expiration_timestamp)


def consumer_on_provider(provider: Cluster, request: PeerRequest) -> tuple[str, list[list[str]]]:
    """The consumer's tenant namespace, confined identity and Quota on the provider (left as
    they are when the chart or an admin made them): (tenant namespace, rows)."""
    labels = {MANAGED_BY_LABEL: MANAGED_BY}
    if request.pools is not None:
        check_lent_pools(provider, request.pools)
    provider_objects = [
        *consumer_identity(request.home_cluster_id, request.tenant_namespace, labels),
        consumer_quota(request.home_cluster_id, request.tenant_namespace,
                       limits_enforcement=request.limits_enforcement,
                       resources=request.quota_resources, pod_policy=request.pod_policy,
                       labels=labels, pools=request.pools),
    ]
    tenant = provider_objects[0]["metadata"]["name"]
    existing = provider.get("v1", "Namespace", tenant)
    if existing is not None and (existing["metadata"].get("labels") or {}).get(
            REMOTE_CLUSTER_ID_LABEL) not in (None, request.home_cluster_id):
        raise CliError(f"{provider.where}: namespace {tenant} is the tenant namespace of another "
                       "consumer; choose another with --tenant-namespace")
    manager = ((existing or {}).get("metadata", {}).get("labels") or {}).get(MANAGED_BY_LABEL)
    if existing is not None and manager != MANAGED_BY:
        # The remote-enforcer chart (or an admin) made this consumer: its objects are theirs.
        rows = [_object_row(m, f"kept (managed by {manager or 'someone else'})", "provider")
                for m in provider_objects]
    else:
        rows = [_object_row(m, provider.ensure(m), "provider") for m in provider_objects]
    return tenant, rows


def check_lent_pools(provider: Cluster, pools: tuple[str, ...]) -> None:
    """CliError unless the provider's enforcer declares each of `pools`: its Deployment's
    `--offer-pool` flags (the remote-enforcer chart's `offer.pools`)."""
    deployments = provider.list("apps/v1", "Deployment",
                                label_selector=f"{NAME_LABEL}=remote-enforcer")
    if not deployments:
        raise CliError(f"{provider.where}: no remote-enforcer Deployment ({NAME_LABEL}="
                       f"remote-enforcer): cannot check --pools against the pools it declares")
    declared = sorted({name for deployment in deployments
                       for container in (((deployment.get("spec") or {}).get("template") or {})
                                         .get("spec") or {}).get("containers") or []
                       for name in flag_pool_names(
                           [*(container.get("command") or []), *(container.get("args") or [])])})
    undeclared = [name for name in pools if name not in declared]
    if undeclared:
        raise CliError(f"--pools: {provider.where} declares no pool {', '.join(undeclared)} "
                       f"(its pools: {', '.join(declared) or 'none'}; the remote-enforcer "
                       f"chart's offer.pools)", 2)


def accepted_foreign_cluster(remote_cluster_id: str, server: str | None) -> dict[str, Any]:
    """The provider as the home controller knows it, accepted: once the consumer Secret is at
    home too, the controller creates its VirtualNode."""
    return {**FOREIGN_CLUSTER.type_meta(),
            "metadata": {"name": remote_cluster_id},
            "spec": {"clusterId": remote_cluster_id, "apiServerUrl": server, "accepted": True}}


def install_at_home(home: Cluster, request: PeerRequest, kubeconfig: dict[str, Any]
                    ) -> tuple[str, list[list[str]]]:
    """The consumer kubeconfig as the Secret the home agent mounts, and the provider's
    ForeignCluster accepted: (Secret name, rows)."""
    secret_name = request.secret_name or kubeconfig_secret_name(request.remote_cluster_id)
    home_objects = [
        {**NAMESPACES.type_meta(), "metadata": {"name": request.namespace}},
        {**SECRETS.type_meta(), "type": "Opaque",
         "metadata": {"name": secret_name, "namespace": request.namespace,
                      "labels": {MANAGED_BY_LABEL: MANAGED_BY,
                                 REMOTE_CLUSTER_ID_LABEL: request.remote_cluster_id}},
         "data": {KUBECONFIG_KEY: base64.b64encode(
             yaml.safe_dump(kubeconfig).encode()).decode()}},
    ]
    rows = [_object_row(m, home.ensure(m), "home") for m in home_objects]
    foreign = accepted_foreign_cluster(request.remote_cluster_id,
                                       kubeconfig["clusters"][0]["cluster"]["server"])
    try:
        rows.append(_object_row(foreign, home.ensure(foreign), "home"))
    except CliError as error:
        if error.exit_code != EXIT_NOT_INSTALLED:
            raise
        # A home chart upgraded from before ForeignClusters (helm installs CRDs only on a
        # first install): peering works without, as it did.
        rows.append(_object_row(foreign, "skipped (no ForeignCluster CRD: kubectl apply -f "
                                         "crds/)", "home"))
    return secret_name, rows


def peered(request: PeerRequest, tenant: str, kubeconfig: dict[str, Any], expires: str,
           secret_name: str, rows: list[list[str]]) -> Report:
    """What peer and a redeemed peering token report."""
    data = {
        "homeClusterId": request.home_cluster_id,
        "remoteClusterId": request.remote_cluster_id,
        "tenantNamespace": tenant,
        "user": consumer_user_name(tenant),
        "server": kubeconfig["clusters"][0]["cluster"]["server"],
        "tokenExpirationTimestamp": expires,
        "kubeconfigSecret": {"namespace": request.namespace, "name": secret_name},
        "objects": [dict(zip(("cluster", "kind", "name", "action"), row, strict=True))
                    for row in rows],
    }
    notes = [
        f"Peered: {request.home_cluster_id} consumes {request.remote_cluster_id} as "
        f"{consumer_user_name(tenant)} (token valid until {expires}).",
        f"ForeignCluster {request.remote_cluster_id} is accepted: the home controller creates "
        "its VirtualNode. Without the controller, run one agent with the home-agent chart, e.g.:",
        f"  helm upgrade --install annex charts/home-agent -n {request.namespace} "
        f"--set clusterId={request.home_cluster_id} "
        f"--set 'remotes[0].clusterId={request.remote_cluster_id}' "
        f"--set 'remotes[0].kubeconfigSecret={secret_name}'"
        + ("" if request.tenant_namespace is None
           else f" --set 'remotes[0].tenantNamespace={tenant}'"),
    ]
    return Report(data, [Table("Objects", ["CLUSTER", "KIND", "NAME", "ACTION"], rows)], notes)


def peer(home: Cluster, provider: Cluster, request: PeerRequest) -> Report:
    tenant, rows = consumer_on_provider(provider, request)
    token, expires = mint_token(provider, tenant, request.token_expiration_seconds)
    kubeconfig = token_kubeconfig(provider.configuration, token, tenant,
                                  cluster_name=request.remote_cluster_id,
                                  user_name=f"{request.home_cluster_id}-consumer",
                                  server=request.server)
    secret_name, home_rows = install_at_home(home, request, kubeconfig)
    return peered(request, tenant, kubeconfig, expires, secret_name, rows + home_rows)


def _owned_by_annexctl(obj: dict[str, Any] | None) -> bool:
    return obj is not None and (obj["metadata"].get("labels") or {}).get(
        MANAGED_BY_LABEL) == MANAGED_BY


def _wait_gone(cluster: Cluster, kind: str, name: str, deadline: float) -> bool:
    return uninstall.wait(lambda: cluster.get("v1", kind, name) is None, deadline)


def unpeer(home: Cluster, provider: Cluster, home_cluster_id: str, remote_cluster_id: str,
           tenant_namespace: str | None = None, namespace: str = "annex-system",
           secret_name: str | None = None, timeout: float = 60.0) -> Report:
    """Undo the peering: at home the provider no longer accepted, its VirtualNodes drained and
    what their agents leave removed (annexctl/uninstall.py, as the chart's hook does), the
    Secret annexctl made deleted; on the provider the consumer's offloaded namespaces withdrawn
    (the same), then its tenant namespace deleted when annexctl made it."""
    tenant = consumer_identity(home_cluster_id, tenant_namespace)[0]["metadata"]["name"]
    cleanup = uninstall.Cleanup(timeout=timeout)
    notes: list[str] = []

    try:
        foreign = home.get(FOREIGN_CLUSTER.api_version, FOREIGN_CLUSTER.kind, remote_cluster_id)
    except CliError:
        foreign = None  # an older home chart: no ForeignClusters
    if foreign is not None and (foreign.get("spec") or {}).get("accepted"):
        # No longer accepted: the home controller creates no VirtualNode for it again.
        cleanup.done("home", FOREIGN_CLUSTER.kind, remote_cluster_id, home.ensure(
            {**accepted_foreign_cluster(remote_cluster_id, foreign["spec"].get("apiServerUrl")),
             "spec": {**foreign["spec"], "accepted": False}}))
    served: set[str] = set()
    try:
        home.resource(VIRTUAL_NODE.api_version, VIRTUAL_NODE.kind)
    except CliError:
        pass  # no home chart installed: no VirtualNode to drain
    else:
        served = uninstall.drain_virtual_nodes(home, namespace, cleanup, remote_cluster_id)
        if served:
            notes.append(f"home: the VirtualNodes of {remote_cluster_id} in {namespace} are "
                         "drained and deleted: remove them from the home-agent chart's remotes "
                         "if it declares them")
    uninstall.remove_agent_leftovers(home, namespace, {remote_cluster_id} | served, cleanup)

    secret_name = secret_name or kubeconfig_secret_name(remote_cluster_id)
    secret = home.get("v1", "Secret", secret_name, namespace)
    if secret is not None and not _owned_by_annexctl(secret):
        notes.append(f"home Secret {namespace}/{secret_name} was not created by annexctl: kept")
    elif secret is not None:
        home.delete("v1", "Secret", secret_name, namespace)
        cleanup.done("home", "Secret", f"{namespace}/{secret_name}", "deleted")

    found = provider.get("v1", "Namespace", tenant)
    labels = (found or {}).get("metadata", {}).get("labels") or {}
    if found is None:
        notes.append(f"provider: no tenant namespace {tenant} (already unpeered?)")
    elif labels.get(TENANT_NAMESPACE_LABEL) != "true" or labels.get(
            REMOTE_CLUSTER_ID_LABEL) != home_cluster_id:
        raise CliError(f"{provider.where}: namespace {tenant} is not the tenant namespace of "
                       f"consumer {home_cluster_id}: not deleted")
    else:
        uninstall.withdraw_consumer(provider, found, remote_cluster_id, cleanup)
        if not _owned_by_annexctl(found):
            notes.append(f"provider: tenant namespace {tenant} is managed by "
                         f"{labels.get(MANAGED_BY_LABEL, 'someone else')}: remove the consumer "
                         "from the remote-enforcer chart's values instead")
        else:
            # The namespace takes the identity, its Quota and offer along.
            provider.delete("v1", "Namespace", tenant)
            gone = _wait_gone(provider, "Namespace", tenant, cleanup.deadline)
            cleanup.done("provider", "Namespace", tenant, "deleted" if gone else "terminating")
            if not gone:
                notes.append(f"provider: namespace {tenant} still terminating after "
                             f"{timeout:g}s")
    return cleanup.report({"homeClusterId": home_cluster_id,
                           "remoteClusterId": remote_cluster_id, "tenantNamespace": tenant,
                           "notes": notes}, notes)
