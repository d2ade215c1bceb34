"""The home controller's command line, parsed into one frozen `Settings`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal

from annex import tracing
from annex.leader_flags import LeaderElection, add_election_flags, election_from_args

ELECTION_LEASE = "annex-home-controller"
"""The election Lease of the controller's replicas, in its namespace."""


@dataclass(frozen=True)
class Settings:
    kubeconfig: str | None = None
    namespace: str = "annex-system"
    agent_template: str | None = None
    drain_timeout_seconds: float = 300.0
    discover_mdns: bool = False
    mdns_interfaces: tuple[str, ...] = ()
    mdns_settle_seconds: float = 3.0
    discover_dns_domains: tuple[str, ...] = ()
    dns_servers: tuple[str, ...] = ()
    dns_interval_seconds: float = 60.0
    workers: int = 2
    health_address: str = "0.0.0.0"
    health_port: int = 8080
    metrics_secure: bool = False
    webhook_address: str = ""
    webhook_cert: str = ""
    webhook_key: str = ""
    log_format: Literal["text", "json"] = "text"
    log_level: str = "INFO"
    otlp_endpoint: str = ""
    leader_election: LeaderElection | None = None
    """One of several replicas: only the holder of the election Lease runs the controllers;
    every replica watches and serves the agents' admission webhook. None: the only one."""


def _names(text: str) -> tuple[str, ...]:
    return tuple(filter(None, (part.strip() for part in text.split(","))))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m home_controller",
        description="annex home controller: discovered providers as ForeignClusters, accepted "
                    "ones as VirtualNodes")
    p.add_argument("--kubeconfig", help="home kubeconfig (default: in-cluster config)")
    p.add_argument("--namespace", default="annex-system",
                   help="where the consumer kubeconfig Secrets and the VirtualNodes are (the "
                        "home chart's namespace)")
    p.add_argument("--agent-template",
                   help="the agents' template (the home chart's ConfigMap <release>-agent-template"
                        "): with it, every VirtualNode of the namespace gets its agent "
                        "Deployment, owned by it; without it, agents are made elsewhere")
    p.add_argument("--drain-timeout-seconds", type=float, default=300.0,
                   help="how long a deleted VirtualNode waits for its pods, its remote objects "
                        "and its agent to go before the agent is removed all the same")
    p.add_argument("--discover-mdns", action="store_true",
                   help="browse the LAN for providers announced with mDNS (_annex._tcp.local.)")
    p.add_argument("--mdns-interfaces", type=_names, default=(),
                   help="addresses of the interfaces to browse on (default: all)")
    p.add_argument("--mdns-settle-seconds", type=float, default=3.0,
                   help="how long the first mDNS browse runs before a discovered cluster that "
                        "was not seen again counts as gone")
    p.add_argument("--discover-dns-domains", type=_names, default=(),
                   help="domains whose DNS-SD records (_annex._tcp.<domain> PTR, SRV, TXT) "
                        "announce providers, e.g. example.org,example.net")
    p.add_argument("--dns-servers", type=_names, default=(),
                   help="DNS servers to ask, host or host:port (default: the system's)")
    p.add_argument("--dns-interval-seconds", type=float, default=60.0,
                   help="how often the DNS records are looked up again")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--health-address", default="0.0.0.0")
    p.add_argument("--health-port", type=int, default=8080,
                   help="/healthz, /readyz and /metrics (0: pick a free port)")
    p.add_argument("--metrics-secure", action="store_true",
                   help="serve /metrics only to callers whose bearer token a TokenReview accepts "
                        "and who may get the non-resource URL /metrics (a SubjectAccessReview)")
    p.add_argument("--webhook-address", default="",
                   help="host:port of the agents' admission webhook (home_controller/"
                        "agent_admission.py: each agent confined to its virtual node), with "
                        "--agent-template; empty: not served")
    p.add_argument("--webhook-cert", default="", help="its TLS certificate (PEM)")
    p.add_argument("--webhook-key", default="", help="its TLS key (PEM)")
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    p.add_argument("--log-level", default="INFO")
    tracing.add_endpoint_flag(p.add_argument)
    add_election_flags(p, leading="only the holder of a coordination.k8s.io Lease runs the "
                                  "controllers (ForeignClusters, VirtualNodes and their agents, "
                                  "the agents' namespace grants); every replica watches, serves "
                                  "the agents' admission webhook and its probes",
                       default_name=ELECTION_LEASE)
    return p


def parse(argv: list[str] | None = None) -> Settings:
    args = parser().parse_args(argv)
    if args.workers < 1:
        parser().error("--workers must be at least 1")
    if args.webhook_address and not (args.webhook_cert and args.webhook_key
                                     and args.agent_template):
        parser().error("--webhook-address needs --webhook-cert, --webhook-key and "
                       "--agent-template")
    election = election_from_args(parser(), args)
    return Settings(**vars(args), leader_election=election)
