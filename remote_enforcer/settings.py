"""The enforcer's command line: every flag, parsed into one frozen `Settings`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from annex import tracing
from annex.kube import ClientLimits
from annex.leader_flags import LeaderElection, add_election_flags, election_from_args
from shared.offer import is_lendable_pattern
from shared.pools import Pool, check_pools, parse_pool
from shared.quantity import canonical
from shared.wellknown import TWIN_NAMESPACE_ROLE

ELECTION_LEASE = "annex-remote-enforcer"
"""The election Lease of the enforcer's replicas, in its namespace."""


@dataclass(frozen=True)
class Settings:
    cluster_id: str
    kubeconfig: str | None = None
    webhook_address: str = "0.0.0.0"
    webhook_port: int = 9443
    webhook_cert: str | None = None
    webhook_key: str | None = None
    webhook_hosts: tuple[str, ...] = ("localhost", "127.0.0.1")
    webhook_cert_dir: str | None = None
    health_address: str = "0.0.0.0"
    health_port: int = 8080
    metrics_secure: bool = False
    """/metrics only for callers a TokenReview and a SubjectAccessReview (get /metrics) let in."""
    workers: int = 32
    offer_mode: Literal["fixed", "share"] = "share"
    offer_percent: Decimal = Decimal(50)
    offer_resources: tuple[tuple[str, str], ...] = ()
    offer_extended_resources: tuple[str, ...] = ()
    """Extended resources and huge pages the offer lends (`nvidia.com/gpu`, `hugepages-*`)."""
    offer_pools: tuple[Pool, ...] = ()
    """The offer split by node selector (`--offer-pool`); empty: one offer of every node."""
    offer_threshold_percent: Decimal = Decimal(1)
    offer_debounce_seconds: float = 1.0
    region: str | None = None
    provider: str | None = None
    storage_classes: tuple[str, ...] = ()
    ingress_classes: tuple[str, ...] = ()
    log_format: Literal["text", "json"] = "text"
    log_level: str = "INFO"
    otlp_endpoint: str = ""
    qps: float = ClientLimits.qps
    burst: int = ClientLimits.burst
    announce_mdns: bool = False
    announce_api_server: str | None = None
    mdns_interfaces: tuple[str, ...] = ()
    consumer_cluster_role: str = TWIN_NAMESPACE_ROLE
    node_failure_grace_seconds: float = 60.0
    leader_election: LeaderElection | None = None
    """One of several replicas: only the holder of the election Lease runs the controllers and
    decides quotas; every replica serves the webhooks. None: the only one."""
    webhook_advertise_address: str | None = None
    """Where the other replicas reach this one's webhook (its pod's address)."""


def _resources(text: str) -> tuple[tuple[str, str], ...]:
    """`cpu=4,memory=8Gi` → (("cpu", "4"), ("memory", "8Gi")), quantities checked."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if not name or not value:
            raise argparse.ArgumentTypeError(f"expected name=quantity, got {item!r}")
        try:
            pairs.append((name, canonical(value)))
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{name}: {error}") from None
    return tuple(pairs)


def _names(text: str) -> tuple[str, ...]:
    return tuple(filter(None, (part.strip() for part in text.split(","))))


def _extended_resources(text: str) -> tuple[str, ...]:
    names = _names(text)
    for name in names:
        if not is_lendable_pattern(name):
            raise argparse.ArgumentTypeError(
                f"{name!r} is not an extended resource (<domain>/<name> outside kubernetes.io, "
                f"or <domain>/*) nor huge pages (hugepages-<size>, hugepages-*)")
    return names


def _pool(text: str) -> Pool:
    try:
        return parse_pool(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m remote_enforcer",
                                description="annex remote enforcer (provider-side operator)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    p.add_argument("--cluster-id", required=True, help="this (provider) cluster's id")
    p.add_argument("--webhook-address", default="0.0.0.0")
    p.add_argument("--webhook-port", type=int, default=9443)
    p.add_argument("--webhook-cert", help="TLS certificate (PEM); self-signed when omitted")
    p.add_argument("--webhook-key", help="TLS private key (PEM)")
    p.add_argument("--webhook-host", action="append", dest="webhook_hosts",
                   help="host name/IP for the self-signed certificate (repeatable)")
    p.add_argument("--webhook-cert-dir",
                   help="where the self-signed certificate and its CA (ca.crt) are written")
    p.add_argument("--health-address", default="0.0.0.0")
    p.add_argument("--health-port", type=int, default=8080,
                   help="/healthz, /readyz and /metrics (0: pick a free port)")
    p.add_argument("--metrics-secure", action="store_true",
                   help="serve /metrics only to callers whose bearer token a TokenReview accepts "
                        "and who may get the non-resource URL /metrics (a SubjectAccessReview)")
    p.add_argument("--workers", type=int, default=32,
                   help="reconciles run at once, by each of the ShadowPod, twin namespace and "
                        "NamespaceMap controllers; each holds at most one request, so this also "
                        "bounds the connections to the API server")
    p.add_argument("--offer-mode", choices=("fixed", "share"), default="share")
    p.add_argument("--offer-percent", type=Decimal, default=Decimal(50))
    p.add_argument("--offer-resources", type=_resources, default=(),
                   help="fixed offer, e.g. cpu=4,memory=8Gi,pods=110")
    p.add_argument("--offer-extended-resources", type=_extended_resources, default=(),
                   help="extended resources and huge pages of the nodes to offer besides cpu, "
                        "memory, pods and ephemeral-storage, e.g. nvidia.com/gpu,hugepages-* "
                        "(default: none: devices are lent only when named)")
    p.add_argument("--offer-pool", type=_pool, action="append", dest="offer_pools",
                   metavar="NAME=KEY=VALUE[,KEY=VALUE]",
                   help="a pool of the nodes whose labels hold every pair, offered on its own "
                        "(the consumer's virtual node liqo-<cluster id>-<NAME>; its pods run on "
                        "those nodes only), e.g. gpu=nvidia.com/gpu.present=true (repeatable; "
                        "once given, only the pools' nodes are lent)")
    p.add_argument("--offer-threshold-percent", type=Decimal, default=Decimal(1),
                   help="republish a share offer only when a resource moves by more than this")
    p.add_argument("--offer-debounce-seconds", type=float, default=1.0,
                   help="how long a changed picture (nodes, pods, ShadowPods) waits before the "
                        "offers and the Quotas' status.used are looked at again: one look for "
                        "every change of that while")
    p.add_argument("--region")
    p.add_argument("--provider")
    p.add_argument("--storage-classes", type=_names, default=())
    p.add_argument("--ingress-classes", type=_names, default=())
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    p.add_argument("--log-level", default="INFO")
    tracing.add_endpoint_flag(p.add_argument)
    p.add_argument("--qps", type=float, default=ClientLimits.qps,
                   help="client-side write rate (0: unthrottled, the API server's Priority and "
                        "Fairness guards it); pods and status writes")
    p.add_argument("--burst", type=int, default=ClientLimits.burst)
    p.add_argument("--announce-mdns", action="store_true",
                   help="announce this cluster on the LAN with mDNS (_annex._tcp.local.); "
                        "discovery grants nothing: consumers still need the admin's consent")
    p.add_argument("--announce-api-server", metavar="URL",
                   help="the API server URL consumers reach, put in the announcement")
    p.add_argument("--mdns-interfaces", type=_names, default=(),
                   help="addresses of the interfaces to announce on (default: all)")
    p.add_argument("--consumer-cluster-role", default=TWIN_NAMESPACE_ROLE,
                   help="the ClusterRole holding a consumer's rights in its twin namespaces "
                        "(the chart ships it), which the enforcer binds in each of them")
    p.add_argument("--node-failure-grace-seconds", type=float, default=60.0,
                   help="a ShadowPod's pod Terminating on a node NotReady for this long is "
                        "force-deleted (made again elsewhere), unless it mounts a claim; "
                        "longer than a kubelet restart, short beside the 300 s the pods "
                        "tolerate a NotReady node for before they are marked for deletion")
    add_election_flags(p, leading="every replica serves the webhooks, only the holder of a "
                                  "coordination.k8s.io Lease runs the controllers and decides "
                                  "quotas (the others forward it those reviews)",
                       default_name=ELECTION_LEASE)
    p.add_argument("--webhook-advertise-address",
                   help="with --leader-elect: the address the other replicas reach this one's "
                        "webhook at (its pod's IP); the leader publishes it on the Lease. Replicas "
                        "verify each other with the CA in ca.crt beside --webhook-cert")
    return p


def parse(argv: list[str] | None = None) -> Settings:
    args = parser().parse_args(argv)
    if bool(args.webhook_cert) != bool(args.webhook_key):
        parser().error("--webhook-cert and --webhook-key go together")
    if args.workers < 1:
        parser().error("--workers must be at least 1")
    if args.offer_mode == "fixed" and not args.offer_resources:
        parser().error("--offer-mode fixed needs --offer-resources")
    if args.node_failure_grace_seconds < 0:
        parser().error("--node-failure-grace-seconds must not be negative")
    if args.announce_mdns and not args.announce_api_server:
        parser().error("--announce-mdns needs --announce-api-server")
    args.offer_pools = tuple(args.offer_pools or ())
    try:
        check_pools(args.offer_pools)
    except ValueError as error:
        parser().error(f"--offer-pool: {error}")
    election = election_from_args(parser(), args)
    if election is not None:
        _check_election(args)
    values = {**vars(args), "leader_election": election}
    values["webhook_hosts"] = tuple(args.webhook_hosts or ("localhost", "127.0.0.1"))
    return Settings(**values)


def _check_election(args: argparse.Namespace) -> None:
    """What --leader-elect needs of the webhook."""
    if not args.webhook_advertise_address:
        parser().error("--leader-elect needs --webhook-advertise-address: the replicas that do "
                       "not lead forward quota reviews to the leader there")
    if not (args.webhook_cert and args.webhook_key):
        parser().error("--leader-elect needs --webhook-cert and --webhook-key: every replica "
                       "serves the same certificate")
