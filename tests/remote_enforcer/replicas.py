"""Enforcer replicas as the chart runs them: processes electing a leader on a Lease
(--leader-elect), sharing one webhook certificate, behind one webhook address (`Balancer`, the
Service), registered with the cluster under a name of the caller's."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.balancer import Balancer
from remote_enforcer.webhooks import registrations
from tests.helpers import metric_samples, wait_for
from tests.home_agent.agentproc import install_crds
from tests.remote_enforcer.conftest import Enforcer, WebhookCertificate, new_name

WRITES = ("create", "update", "patch", "delete", "deletecollection")


@dataclass
class Replicas:
    enforcers: list[Enforcer]
    balancer: Balancer
    lease_namespace: str
    lease: str

    def holder(self, remote: Any) -> str:
        lease = client.CoordinationV1Api(remote.api_client).read_namespaced_lease(
            self.lease, self.lease_namespace)
        return str(lease.spec.holder_identity or "")

    @staticmethod
    def role(enforcer: Enforcer) -> str:
        """What its /readyz says: "ok: leader", or "ok: standby (leader: ...)"."""
        return enforcer.get("/readyz").data.decode()

    def running(self) -> list[Enforcer]:
        return [e for e in self.enforcers if e.process is not None and e.process.poll() is None]

    def leader(self, timeout: float = 60) -> Enforcer:
        return wait_for(lambda: next((e for e in self.running()
                                      if self.role(e) == "ok: leader"), None),
                        timeout=timeout, interval=0.05, message="a replica leads")

    def standby(self) -> Enforcer:
        leader = self.leader()
        return next(e for e in self.running() if e is not leader)


def enforcer_writes(enforcer: Enforcer, codes: Sequence[str] | None = None) -> dict[str, float]:
    """The write requests the replica sent so far (answered with one of `codes`: any without),
    by `verb resource`, but those of its election Lease."""
    found: dict[str, float] = {}
    for (name, labels), value in metric_samples(enforcer.get("/metrics").data.decode()).items():
        of = dict(labels)
        if (name == "annex_rest_client_requests_by_resource_total" and of["verb"] in WRITES
                and of["resource"] != "leases" and (codes is None or of["code"] in codes)):
            key = f"{of['verb']} {of['resource']}"
            found[key] = found.get(key, 0) + value
    return found


@contextlib.contextmanager
def running_replicas(remote: Any, directory: Path, webhook_name: str, domain: str,
                     flags: Sequence[str] = (), count: int = 2) -> Iterator[Replicas]:
    """`count` replicas on a Lease of their own (in a namespace made for it), their webhooks
    registered as `webhook_name` (`<webhook>.<domain>` each) at the balancer's address."""
    install_crds(remote)  # and the consumer ClusterRole
    lease_namespace, lease = new_name("enforcer-lease"), f"enforcer-{uuid.uuid4().hex[:8]}"
    remote.core.create_namespace({"metadata": {"name": lease_namespace}})
    certificate = WebhookCertificate(directory)
    enforcers = [Enforcer(remote.kubeconfig, directory, [
        "--leader-elect", "--leader-elect-resource-namespace", lease_namespace,
        "--leader-elect-resource-name", lease, "--webhook-advertise-address", "127.0.0.1",
        *flags], certificate, f"replica-{index}") for index in range(count)]
    registrations_api = client.AdmissionregistrationV1Api(remote.api_client)
    try:
        for enforcer in enforcers:
            enforcer.start()
        with Balancer([e.webhook_port for e in enforcers]).running() as balancer:
            registrations_api.create_validating_webhook_configuration({
                "metadata": {"name": webhook_name},
                "webhooks": registrations(domain, {"url": balancer.url,
                                                   "caBundle": certificate.ca_bundle})})
            try:
                yield Replicas(enforcers, balancer, lease_namespace, lease)
            finally:
                registrations_api.delete_validating_webhook_configuration(webhook_name)
    finally:
        for enforcer in enforcers:
            enforcer.stop()
        remote.core.delete_namespace(lease_namespace)
