"""`--leader-elect` and its friends, the same for every component that runs as replicas (the
agent, the enforcer, the home controller): where its replicas elect their leader
(`annex.leader`) and with which durations, client-go's flag names and defaults; and the
candidacy they make."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from annex.kube import Connection, current_token
from annex.kubeapi import ClusterApi
from annex.leader import ElectionTimings, LeaderElector, candidate_identity
from annex.tokens import token_service_account
from shared.api.builtin import SERVICE_ACCOUNTS

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
"""The namespace of the pod a component runs in (where its election Lease is by default)."""


@dataclass(frozen=True)
class LeaderElection:
    """The Lease a component's replicas elect their leader on."""

    namespace: str
    name: str
    timings: ElectionTimings = field(default_factory=ElectionTimings)


def boolean_flag(text: str) -> bool:
    """A flag's boolean value, as Kubernetes components take them (true/false, 1/0, ...)."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def add_election_flags(parser: argparse.ArgumentParser, *, leading: str,
                       default_name: str | None, name_help: str = "the election Lease") -> None:
    """The flags, `leading` saying what only the leader does."""
    add = parser.add_argument
    add("--leader-elect", type=boolean_flag, nargs="?", const=True, default=False,
        help=f"run as one of several replicas: {leading}; a standby keeps its watches warm and "
             "takes over when the leader is gone (client-go's leader election)")
    add("--leader-elect-lease-duration", type=float, default=ElectionTimings.lease_duration,
        help="seconds a standby waits after the Lease last changed before taking it over")
    add("--leader-elect-renew-deadline", type=float, default=ElectionTimings.renew_deadline,
        help="seconds the leader keeps trying to renew the Lease before it stops leading "
             "(and exits, to restart as a standby)")
    add("--leader-elect-retry-period", type=float, default=ElectionTimings.retry_period,
        help="seconds between two renewals of the Lease (a standby watches it, and reads it "
             "this often only while the API server refuses it the watch)")
    add("--leader-elect-resource-name", default=default_name, help=name_help)
    add("--leader-elect-resource-namespace", default=None,
        help="the election Lease's namespace (default: the namespace of the pod it runs in)")


ELECTION_ARGS = ("leader_elect", "leader_elect_lease_duration", "leader_elect_renew_deadline",
                 "leader_elect_retry_period", "leader_elect_resource_name",
                 "leader_elect_resource_namespace")
"""What `add_election_flags` adds to the parsed arguments."""


def election_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace,
                       default_name: str = "") -> LeaderElection | None:
    """The election the flags ask for (None: none), its namespace found in the pod when not
    given; a bad combination is the parser's error. The flags' values leave `args`."""
    values = {name: vars(args).pop(name) for name in ELECTION_ARGS}
    if not values["leader_elect"]:
        return None
    namespace = values["leader_elect_resource_namespace"]
    if namespace is None and SERVICE_ACCOUNT_NAMESPACE.exists():
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    if not namespace:
        parser.error("--leader-elect needs --leader-elect-resource-namespace outside a pod")
    try:
        timings = ElectionTimings(values["leader_elect_lease_duration"],
                                  values["leader_elect_renew_deadline"],
                                  values["leader_elect_retry_period"])
    except ValueError as error:
        parser.error(f"--leader-elect: {error}")
    return LeaderElection(namespace, values["leader_elect_resource_name"] or default_name,
                          timings)


def candidacy(election: LeaderElection, connection: Connection,
            annotations: dict[str, str] | None = None) -> LeaderElector:
    """This replica's candidacy for `election`'s Lease, with a client of its own on
    `connection` (the renewals never wait behind the component's other requests). The Lease
    goes with the component's ServiceAccount (an uninstalled release leaves none) when it runs
    as one of the Lease's namespace."""
    account = token_service_account(current_token(connection))
    owner = ({**SERVICE_ACCOUNTS.type_meta(), "name": account.name,
              "uid": account.uid} if account and account.namespace == election.namespace
             else None)
    return LeaderElector(ClusterApi(connection), election.namespace, election.name,
                         candidate_identity(), election.timings, annotations=annotations,
                         owner=owner)
