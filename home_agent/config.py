"""The agent's configuration: command-line flags, parsed once into a frozen record.

One agent serves one remote cluster. Flags give defaults that the
VirtualNode resource overrides live (labels, taints, capacity, offloadingPatch).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field

from annex import tracing
from annex.kube import ClientLimits
from annex.leader_flags import LeaderElection, add_election_flags, boolean_flag, election_from_args
from shared.forge.agent import election_lease_name
from shared.tenancy import tenant_namespace_name

DEFAULT_WORKERS = 10
"""`--workers`: concurrent reconciles of the pods (and the agent's other keys)."""


@dataclass(frozen=True)
class AgentConfig:
    home_cluster_id: str
    remote_cluster_id: str
    remote_kubeconfig: str
    remote_kubeconfig_secret: tuple[str, str] | None = None
    """(namespace, name) of the home Secret holding the remote kubeconfig, followed live; the
    VirtualNode's kubeconfigSecretRef wins over it (home_agent/credentials.py)."""
    remote_token_refresh_fraction: float = 0.5
    """The remote token is renewed once this fraction of its lifetime has passed."""
    home_kubeconfig: str | None = None
    """None means in-cluster configuration (the agent runs in a home pod)."""
    node_name: str | None = None
    """Overrides `liqo-<remote cluster id>`; the VirtualNode's spec.nodeName wins over both."""
    home_storage_class: str | None = None
    """The real home class giving their volumes to claims of the virtual class whose first
    consumer runs on a physical home node; None: such claims are not provisioned."""
    tenant_namespace: str | None = None
    lease_renew_interval: float = 10.0
    lease_duration_seconds: int = 40
    health_check_interval: float = 10.0
    health_check_timeout: float = 5.0
    failure_threshold: int = 3
    remote_pod_cidr: str | None = None
    remapped_pod_cidr: str | None = None
    home_pod_cidr: str | None = None
    remapped_home_pod_cidr: str | None = None
    """Where the remote cluster reaches `home_pod_cidr` (reflected EndpointSlice addresses)."""
    agent_ip: str = "127.0.0.1"
    """The virtual node's address: where the API server reaches this replica's kubelet API."""
    kubelet_service: str | None = None
    """"namespace/name" of the Service in front of every replica's kubelet API: its ClusterIP
    is the offloaded pods' hostIP, the same whichever replica leads (`pods_host_ip`)."""
    pods_host_ip: str | None = None
    """The offloaded pods' hostIP: `kubelet_service`'s ClusterIP, read at start; None: the
    node's address."""
    kubelet_port: int = 10250
    """Where the nodes' kubelet API ports start: each node's is the lowest free one from it up
    (0: any free port for each, which its node then advertises)."""
    kubelet_address: str = "0.0.0.0"
    kubelet_cert: str | None = None
    """PEM serving certificate of the kubelet API; None: self-signed at start."""
    kubelet_key: str | None = None
    kubelet_serving_cert_from_csr: bool = False
    """Request the serving certificate from the home kubelet-serving signer (a CSR an
    administrator approves), renewed before expiry; self-signed until issued."""
    kubelet_client_ca: str | None = None
    """CA bundle verifying client certificates (the API server's kubelet client certificate);
    None: only bearer tokens (TokenReview at home) authenticate."""
    home_apiserver_host: str | None = None
    home_apiserver_port: int = 443
    enable_apiserver_support: bool = True
    token_refresh_fraction: float = 0.8
    """Service-account tokens are refreshed once this fraction of their lifetime has passed (or
    24 h after issue), as the kubelet does at 80%."""
    home_limits: ClientLimits = field(default_factory=ClientLimits)
    remote_limits: ClientLimits = field(default_factory=ClientLimits)
    workers: int = DEFAULT_WORKERS
    redis_url: str | None = None
    """Optional disposable cache of the pods last found converged (home_agent/synced_cache.py)."""
    metrics_address: str | None = None
    metrics_secure: bool = False
    """/metrics only for callers whose token a TokenReview at home accepts and whom a
    SubjectAccessReview lets get the non-resource URL /metrics."""
    webhook_address: str | None = None
    """host:port of the pod mutating webhook server; None disables it."""
    webhook_cert: str | None = None
    webhook_key: str | None = None
    log_format: str = "text"
    log_level: str = "INFO"
    otlp_endpoint: str = ""
    labels_not_reflected: tuple[str, ...] = ()
    annotations_not_reflected: tuple[str, ...] = ()
    reflection_workers: Mapping[str, int] = field(default_factory=dict)
    """Per reflected kind (its flag prefix, e.g. "configmap"): workers; 0 disables the kind."""
    reflection_types: Mapping[str, str] = field(default_factory=dict)
    """Per reflected kind: DenyList (the default) or AllowList."""
    leader_election: LeaderElection | None = None
    """Active/passive replicas: only the Lease's holder writes. None: this agent is the only
    one and writes from the start."""

    @property
    def reflects_tokens(self) -> bool:
        """Offloaded pods read their service-account tokens from a Secret this agent writes."""
        return self.enable_apiserver_support and (
            self.reflection_workers.get(TOKEN_REFLECTION, 0) > 0)

    @property
    def effective_tenant_namespace(self) -> str:
        """Where the provider keeps this consumer's NamespaceMap and ResourceOffer."""
        return tenant_namespace_name(self.home_cluster_id, self.tenant_namespace)

    @property
    def host_ip(self) -> str:
        """The offloaded pods' hostIP."""
        return self.pods_host_ip or self.agent_ip


REFLECTED_KINDS = ("configmap", "secret", "service", "endpointslice", "ingress",
                   "persistentvolumeclaim")
"""The kinds reflected home → remote, each with `--<kind>-reflection-workers` and
`--<kind>-reflection-type` flags and its module `home_agent.reflection.<kind>`."""
DEFAULT_REFLECTION_WORKERS = 3
REFLECTED_HOME_KINDS = ("event",)
"""Kinds reflected from the remote cluster home, with only `--<kind>-reflection-workers`: the
DenyList/AllowList annotations are how users keep their home objects home; remote Events are
written by remote components and carry none, so a policy flag would mean nothing."""


TOKEN_REFLECTION = "serviceaccount"
"""`--serviceaccount-reflection-workers` (Liqo's name): the per-pod token Secrets, no policy."""
DEFAULT_TOKEN_REFLECTION_WORKERS = DEFAULT_WORKERS
"""As many as the pods' `--workers`: every pod that mounts a token waits for its token Secret
before its ShadowPod is made, so with fewer the token reflection paces all offloading (3, the
other kinds' default, held a burst of new pods to the token Secrets' pace: docs/benchmarks.md)."""


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"not a fraction in (0, 1]: {text!r}")
    return value


def _secret_ref(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


"""The namespace of the pod the agent runs in (where its election Lease is by default)."""


def default_lease_name(remote_cluster_id: str) -> str:
    """One Lease per agent identity: the home cluster has one agent per remote cluster."""
    return election_lease_name(remote_cluster_id)


def _keys(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m home_agent",
        description="annex home agent: one virtual node for one remote cluster",
    )
    add = parser.add_argument
    add("--home-kubeconfig", default=None,
        help="kubeconfig of the home cluster (default: in-cluster configuration)")
    add("--remote-kubeconfig", required=True, help="kubeconfig of the remote cluster")
    add("--remote-kubeconfig-secret", type=_secret_ref, default=None, metavar="NAMESPACE/NAME",
        help="home Secret (key kubeconfig) holding the remote kubeconfig, followed live: a "
             "changed Secret replaces the credentials without a restart, and a renewed token "
             "is written back to it; the VirtualNode's kubeconfigSecretRef wins over it")
    add("--remote-token-refresh-fraction", type=_fraction, default=0.5,
        help="renew the remote service-account token once this fraction of its lifetime has "
             "passed (half: a link cut shorter than half the lifetime never lets it expire)")
    add("--cluster-id", required=True, help="the home cluster's id")
    add("--remote-cluster-id", required=True, help="the remote cluster's id")
    add("--node-name", default=None, help="virtual node name (default liqo-<remote-cluster-id>)")
    add("--home-storage-class", default=None,
        help="the home storage class that provisions claims of the virtual class whose first "
             "consumer runs on a physical home node (default: none, they stay Pending)")
    add("--tenant-namespace", default=None,
        help="remote namespace of this consumer (default annex-tenant-<cluster-id>)")
    add("--lease-renew-interval", type=float, default=10.0, help="seconds between Lease renewals")
    add("--lease-duration", type=int, default=40, help="Lease leaseDurationSeconds")
    add("--health-check-interval", type=float, default=10.0,
        help="seconds between remote /livez checks")
    add("--health-check-timeout", type=float, default=5.0, help="timeout of one /livez check")
    add("--failure-threshold", type=int, default=3,
        help="consecutive failed checks before the node turns Ready=False")
    add("--remote-pod-cidr", default=None, help="the remote cluster's pod CIDR")
    add("--remapped-pod-cidr", default=None,
        help="where the remote pod CIDR is reachable from home (with --remote-pod-cidr)")
    add("--home-pod-cidr", default=None, help="the home cluster's pod CIDR")
    add("--remapped-home-pod-cidr", default=None,
        help="where the remote cluster reaches the home pod CIDR (with --home-pod-cidr)")
    add("--agent-ip", default="127.0.0.1",
        help="the virtual node's address, where the API server reaches this replica's kubelet "
             "API (and the pods' hostIP without --kubelet-service)")
    add("--kubelet-service", default=None, metavar="NAMESPACE/NAME",
        help="the Service in front of the kubelet API of every replica of this agent: its "
             "ClusterIP, read at start, is the offloaded pods' hostIP, which then stays the same "
             "whichever replica leads (a takeover rewrites no pod)")
    add("--kubelet-port", type=int, default=10250,
        help="port of the virtual node's kubelet API, advertised in the node's "
             "daemonEndpoints; a remote declaring pools is one node per pool, each with a "
             "kubelet API of its own on the lowest free port from this one up (at start in the "
             "order of their names; 0: any free port for each)")
    add("--kubelet-address", default="0.0.0.0", help="address the kubelet API listens on")
    add("--kubelet-cert", default=None,
        help="PEM serving certificate of the kubelet API (default: self-signed at start for "
             "the node name and --agent-ip)")
    add("--kubelet-key", default=None, help="PEM private key of --kubelet-cert")
    add("--kubelet-serving-cert-from-csr", action="store_true",
        help="request the kubelet API's serving certificate from the home cluster's "
             "kubernetes.io/kubelet-serving signer with a CertificateSigningRequest (an "
             "administrator or an approver must approve it), for API servers started with "
             "--kubelet-certificate-authority; renewed at 70-90%% of its life; the self-signed "
             "certificate is served until the first is issued")
    add("--kubelet-client-ca", default=None,
        help="CA bundle verifying client certificates on the kubelet API (the API server's "
             "--kubelet-client-certificate; the cluster CA on kubeadm clusters); bearer "
             "tokens are reviewed with a TokenReview at home either way")
    add("--home-apiserver-host", default=None,
        help="where offloaded pods reach the home API server (default: the address it "
             "advertises in the default/kubernetes EndpointSlice, else the server of the "
             "agent's home kubeconfig unless that is the cluster-internal Service; the agent "
             "refuses to start when neither is known and apiserver support is on)")
    add("--home-apiserver-port", type=int, default=443,
        help="the port of --home-apiserver-host (a found address comes with its port)")
    add("--enable-apiserver-support", type=boolean_flag, default=True,
        help="reflect service-account tokens and point pods at the home API server")
    add("--home-qps", type=float, default=ClientLimits.qps)
    add("--home-burst", type=int, default=ClientLimits.burst)
    add("--remote-qps", type=float, default=ClientLimits.qps)
    add("--remote-burst", type=int, default=ClientLimits.burst)
    add("--workers", type=int, default=DEFAULT_WORKERS, help="concurrent reconciles")
    add("--redis-url", default=None,
        help="redis://host:port/db of an optional cache of the pods last found converged, so "
             "that a restart skips unchanged pods (default: none; the clusters stay the truth)")
    add("--metrics-address", default=None, help="host:port for /metrics (default: off)")
    add("--metrics-secure", action="store_true",
        help="serve /metrics only to callers whose bearer token a TokenReview at home accepts "
             "and who may get the non-resource URL /metrics (a SubjectAccessReview)")
    add("--webhook-address", default=None, help="host:port of the pod webhook (default: off)")
    add("--webhook-cert", default=None, help="PEM certificate of the webhook server")
    add("--webhook-key", default=None, help="PEM private key of the webhook server")
    add("--log-format", choices=("text", "json"), default="text")
    add("--log-level", default="INFO")
    tracing.add_endpoint_flag(add)
    add("--labels-not-reflected", type=_keys, default=(), help="comma-separated label keys")
    add("--annotations-not-reflected", type=_keys, default=(),
        help="comma-separated annotation keys")
    for kind in REFLECTED_KINDS:
        add(f"--{kind}-reflection-workers", type=int, default=DEFAULT_REFLECTION_WORKERS,
            help=f"concurrent {kind} reflections (0 disables {kind} reflection)")
        add(f"--{kind}-reflection-type", choices=("DenyList", "AllowList"), default="DenyList",
            help=f"which {kind} objects are reflected: all but those annotated "
                 "liqo.io/skip-reflection (DenyList) or only those annotated "
                 "liqo.io/allow-reflection (AllowList)")
    for kind in REFLECTED_HOME_KINDS:
        add(f"--{kind}-reflection-workers", type=int, default=DEFAULT_REFLECTION_WORKERS,
            help=f"concurrent remote {kind} reflections home (0 disables {kind} reflection)")
    add(f"--{TOKEN_REFLECTION}-reflection-workers", type=int,
        default=DEFAULT_TOKEN_REFLECTION_WORKERS,
        help="concurrent service-account token reflections (0 disables them, but offloaded "
             "pods still mount their token Secret: turn tokens off with "
             "--enable-apiserver-support=false)")
    add("--token-refresh-fraction", type=_fraction, default=0.8,
        help="refresh a reflected service-account token once this fraction of its lifetime has "
             "passed (the kubelet's 0.8; a small value makes tests see refreshes quickly)")
    add_election_flags(parser, leading="only the holder of a coordination.k8s.io Lease writes",
                       default_name=None,
                       name_help="the election Lease (default "
                                 "annex-home-agent-<remote-cluster-id>)")
    return parser


def parse_config(argv: list[str] | None = None) -> AgentConfig:
    args = build_parser().parse_args(argv)
    election = election_from_args(build_parser(), args, default_lease_name(args.remote_cluster_id))
    if (args.remote_pod_cidr is None) != (args.remapped_pod_cidr is None):
        build_parser().error("--remote-pod-cidr and --remapped-pod-cidr go together")
    if args.remapped_home_pod_cidr is not None and args.home_pod_cidr is None:
        build_parser().error("--remapped-home-pod-cidr needs --home-pod-cidr")
    if (args.kubelet_cert is None) != (args.kubelet_key is None):
        build_parser().error("--kubelet-cert and --kubelet-key go together")
    if args.kubelet_cert is not None and args.kubelet_serving_cert_from_csr:
        build_parser().error("--kubelet-cert and --kubelet-serving-cert-from-csr exclude each "
                             "other")
    if (args.webhook_address is None) != (args.webhook_cert is None) or (
        args.webhook_cert is None
    ) != (args.webhook_key is None):
        build_parser().error("--webhook-address, --webhook-cert and --webhook-key go together")
    return AgentConfig(
        home_cluster_id=args.cluster_id,
        remote_cluster_id=args.remote_cluster_id,
        remote_kubeconfig=args.remote_kubeconfig,
        remote_kubeconfig_secret=args.remote_kubeconfig_secret,
        remote_token_refresh_fraction=args.remote_token_refresh_fraction,
        home_kubeconfig=args.home_kubeconfig,
        node_name=args.node_name,
        home_storage_class=args.home_storage_class,
        tenant_namespace=args.tenant_namespace,
        lease_renew_interval=args.lease_renew_interval,
        lease_duration_seconds=args.lease_duration,
        health_check_interval=args.health_check_interval,
        health_check_timeout=args.health_check_timeout,
        failure_threshold=args.failure_threshold,
        remote_pod_cidr=args.remote_pod_cidr,
        remapped_pod_cidr=args.remapped_pod_cidr,
        home_pod_cidr=args.home_pod_cidr,
        remapped_home_pod_cidr=args.remapped_home_pod_cidr,
        agent_ip=args.agent_ip,
        kubelet_service=args.kubelet_service,
        kubelet_port=args.kubelet_port,
        kubelet_address=args.kubelet_address,
        kubelet_cert=args.kubelet_cert,
        kubelet_key=args.kubelet_key,
        kubelet_client_ca=args.kubelet_client_ca,
        kubelet_serving_cert_from_csr=args.kubelet_serving_cert_from_csr,
        home_apiserver_host=args.home_apiserver_host,
        home_apiserver_port=args.home_apiserver_port,
        enable_apiserver_support=args.enable_apiserver_support,
        token_refresh_fraction=args.token_refresh_fraction,
        home_limits=ClientLimits(qps=args.home_qps, burst=args.home_burst),
        remote_limits=ClientLimits(qps=args.remote_qps, burst=args.remote_burst),
        workers=args.workers,
        redis_url=args.redis_url,
        metrics_address=args.metrics_address,
        metrics_secure=args.metrics_secure,
        webhook_address=args.webhook_address,
        webhook_cert=args.webhook_cert,
        webhook_key=args.webhook_key,
        log_format=args.log_format,
        log_level=args.log_level,
        otlp_endpoint=args.otlp_endpoint,
        labels_not_reflected=args.labels_not_reflected,
        annotations_not_reflected=args.annotations_not_reflected,
        reflection_workers={kind: getattr(args, f"{kind}_reflection_workers")
                            for kind in (*REFLECTED_KINDS, *REFLECTED_HOME_KINDS,
                                         TOKEN_REFLECTION)},
        reflection_types={kind: getattr(args, f"{kind}_reflection_type")
                          for kind in REFLECTED_KINDS},
        leader_election=election,
    )
