"""The enforcer as a real process against the `remote` cluster, with its webhooks registered
through a ValidatingWebhookConfiguration (URL + caBundle) as the chart registers them
(remote_enforcer.webhooks), and helpers to build tenants."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from remote_enforcer.admission import WEBHOOK_PATH
from remote_enforcer.rbac import TWIN_NAMESPACE_RULES
from remote_enforcer.webhooks import registrations
from shared.api.quota import QUOTA
from shared.api.shadowpod import SHADOWPOD
from shared.forge.tenancy import OBJECT_COUNTS_QUOTA
from shared.ownership import ownership_labels
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL, TENANT_NAMESPACE_LABEL, TWIN_NAMESPACE_ROLE
from tests.helpers import free_ports, wait_for

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_ID = "provider-test"
WEBHOOK_DOMAIN = "enforcer.annex.test"
WEBHOOK_NAME = f"shadowpods.{WEBHOOK_DOMAIN}"
QUOTA_NOT_COUNTED = "status unknown for quota"
QUOTA_COUNTING = 60.0  # seconds: the quota controller's discovery, then its resync
QUOTA_POLL = 0.5



class WebhookCertificate:
    """A CA and the webhook serving certificate it issued for 127.0.0.1 and localhost, in
    `directory` as the chart's Secret volume holds them: tls.crt, tls.key, ca.crt."""

    def __init__(self, directory: Path) -> None:
        authority = trustme.CA()
        issued = authority.issue_cert("127.0.0.1", "localhost")
        self.cert, self.key = directory / "tls.crt", directory / "tls.key"
        self.ca = directory / "ca.crt"
        issued.cert_chain_pems[0].write_to_path(str(self.cert))
        issued.private_key_pem.write_to_path(str(self.key))
        authority.cert_pem.write_to_path(str(self.ca))
        self.ca_bundle = base64.b64encode(authority.cert_pem.bytes()).decode()


class Enforcer:
    """`python -m remote_enforcer` as a subprocess: start, wait until ready, kill, restart.
    Replicas share one `certificate` (each makes its own without)."""

    def __init__(self, kubeconfig: Path, directory: Path, extra_args: list[str],
                 certificate: WebhookCertificate | None = None, name: str = "enforcer") -> None:
        certificate = certificate or WebhookCertificate(directory)
        self.cert, self.key = certificate.cert, certificate.key
        self.ca_bundle = certificate.ca_bundle
        self.webhook_port, self.health_port = free_ports(2)
        self.log_path = directory / f"{name}.log"
        self.args = [sys.executable, "-m", "remote_enforcer", "--kubeconfig", str(kubeconfig),
                     "--cluster-id", PROVIDER_ID, "--webhook-address", "127.0.0.1",
                     "--webhook-port", str(self.webhook_port), "--webhook-cert", str(self.cert),
                     "--webhook-key", str(self.key), "--health-address", "127.0.0.1",
                     "--health-port", str(self.health_port), *extra_args]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{self.base_url}{WEBHOOK_PATH}"

    @property
    def base_url(self) -> str:
        """The webhook server, without a webhook's path."""
        return f"https://127.0.0.1:{self.webhook_port}"

    def ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"the enforcer exited: {self.log_path.read_text()[-3000:]}")
        try:
            answer = urllib3.request("GET", f"http://127.0.0.1:{self.health_port}/readyz",
                                     timeout=1.0, retries=False)
        except urllib3.exceptions.HTTPError:
            return False
        return answer.status == 200

    def get(self, path: str) -> urllib3.BaseHTTPResponse:
        """GET on the health/metrics port."""
        return urllib3.request("GET", f"http://127.0.0.1:{self.health_port}{path}",
                               timeout=5.0, retries=False)

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(self.args, cwd=ROOT, stdout=log, stderr=log)
        wait_for(self.ready, timeout=30, message="the enforcer did not get ready")

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash or an evicted pod."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        self.kill()
        self.start()


def install_consumer_cluster_role(cluster: Any) -> None:
    """The consumer ClusterRole the chart ships (kept if it exists), under the name the enforcer
    binds by default: the tests' enforcers run without the chart."""
    try:
        client.RbacAuthorizationV1Api(cluster.api_client).create_cluster_role(
            {"metadata": {"name": TWIN_NAMESPACE_ROLE}, "rules": TWIN_NAMESPACE_RULES})
    except ApiException as error:
        if error.status != 409:
            raise


def webhook_configuration(enforcer: Enforcer, name: str = WEBHOOK_NAME,
                          domain: str = WEBHOOK_DOMAIN) -> dict[str, Any]:
    """Every webhook of the enforcer, as the chart registers them, named `<webhook>.<domain>`
    (`shadowpods.<domain>`, `persistentvolumeclaims.<domain>`, `network.<domain>`)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": registrations(domain, {"url": enforcer.base_url,
                                           "caBundle": enforcer.ca_bundle}),
    }


@contextlib.contextmanager
def running_enforcer(remote: Any, kubeconfig: Path, directory: Path,
                     extra_args: list[str] | None = None) -> Iterator[Enforcer]:
    """An enforcer process whose webhook the remote cluster calls, stopped afterwards."""
    from tests.home_agent.agentproc import install_crds

    install_crds(remote)  # and the consumer ClusterRole
    process = Enforcer(kubeconfig, directory,
                       ["--offer-debounce-seconds", "0.1", "--region", "eu-west",
                        "--provider", "annex-test", *(extra_args or [])])
    process.start()
    registrations = client.AdmissionregistrationV1Api(remote.api_client)
    registrations.create_validating_webhook_configuration(webhook_configuration(process))
    try:
        yield process
    finally:
        registrations.delete_validating_webhook_configuration(WEBHOOK_NAME)
        process.stop()
        if os.environ.get("ENFORCER_LOG"):
            print(process.log_path.read_text())


@pytest.fixture(scope="module")
def enforcer(remote: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforcer]:
    """A running enforcer (module-wide), with the cluster administrator's credentials."""
    with running_enforcer(remote, remote.kubeconfig,
                          tmp_path_factory.mktemp("enforcer")) as process:
        yield process


def denial(webhook: str, action: Any) -> str:
    """The reason the admission webhook named `webhook` gives for refusing `action` (a 403)."""
    with pytest.raises(ApiException) as error:
        action()
    assert error.value.status == 403, error.value.body
    message: str = json.loads(error.value.body)["message"]
    denied = f'admission webhook "{webhook}" denied the request: '
    assert message.startswith(denied), message
    return message[len(denied):]


MADE_NAMESPACES: list[tuple[client.CoreV1Api, str]] = []
"""The namespaces `make_twin_namespace` and `make_tenant_namespace` made, in order."""


@pytest.fixture(autouse=True)
def namespaces_made_are_removed() -> Iterator[None]:
    """The namespaces a test made with the helpers below are deleted after it (not those of
    module-wide fixtures, made before it starts): the remote cluster is the session's, and the
    pods a test leaves there hold its nodes' room for every test after it (an offer that cannot
    shrink, a pod that cannot be scheduled)."""
    before = len(MADE_NAMESPACES)
    yield
    while len(MADE_NAMESPACES) > before:
        core, name = MADE_NAMESPACES.pop()
        try:
            core.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_twin_namespace(remote: Any, consumer: str) -> str:
    """A namespace labelled as the enforcer labels twin namespaces it creates."""
    name = new_name("twin")
    remote.core.create_namespace({"metadata": {
        "name": name, "labels": ownership_labels(consumer, PROVIDER_ID)}})
    MADE_NAMESPACES.append((remote.core, name))
    return name


def counted_twin_namespace(remote: Any, consumer: str) -> str:
    """A twin namespace (`make_twin_namespace`) once its object-count ResourceQuota (the
    enforcer's) lets ShadowPods in: a real API server refuses them ("status unknown for quota")
    until its quota controller has discovered the kind and counted the quota."""
    twin = make_twin_namespace(remote, consumer)
    wait_for(lambda: remote.core.read_namespaced_resource_quota(OBJECT_COUNTS_QUOTA, twin),
             message="the enforcer made the twin's ResourceQuota")
    probe = shadowpod(new_name("probe"), consumer)

    def admitted() -> bool:
        try:
            ShadowPods(remote.api_client).api.create_namespaced_custom_object(
                SHADOWPOD.group, SHADOWPOD.version, twin, SHADOWPOD.plural, probe,
                dry_run="All")
        except ApiException as error:
            if "status unknown for quota" in str(error.body):
                return False
            raise
        return True

    wait_for(admitted, timeout=90, interval=1, message="the twin's quota counts ShadowPods")
    return twin


def make_tenant_namespace(remote: Any, consumer: str) -> str:
    name = new_name("tenant")
    remote.core.create_namespace({"metadata": {"name": name, "labels": {
        TENANT_NAMESPACE_LABEL: "true", REMOTE_CLUSTER_ID_LABEL: consumer}}})
    MADE_NAMESPACES.append((remote.core, name))
    return name


def room_for_pods(remote: Any, consumer: str, pods: int = 100) -> str:
    """A Quota with room for `pods` pods of `consumer`, for tests about something else than
    quota: without a Quota a consumer gets what its offer says, a share of the free pods of the
    simulated nodes, which the other tests' pods make smaller. Its tenant namespace, where the
    Quota is named after the consumer."""
    tenant = make_tenant_namespace(remote, consumer)
    client.CustomObjectsApi(remote.api_client).create_namespaced_custom_object(
        QUOTA.group, QUOTA.version, tenant, QUOTA.plural,
        {**QUOTA.type_meta(),
         "metadata": {"name": consumer},
         "spec": {"consumerClusterId": consumer, "resources": {"pods": str(pods)}}})
    return tenant


def shadowpod(name: str, consumer: str, pod_spec: dict[str, Any] | None = None,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        **SHADOWPOD.type_meta(),
        "metadata": {"name": name, "labels": {**ownership_labels(consumer, PROVIDER_ID),
                                              "app": "demo", **(labels or {})},
                     "annotations": {"note": "from home"}},
        "spec": {"pod": pod_spec or {"containers": [{"name": "main", "image": "nginx:1"}]}},
    }


class ShadowPods:
    """ShadowPod reads and writes on the remote cluster (CustomObjectsApi)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = client.CustomObjectsApi(api_client)

    def create(self, namespace: str, body: dict[str, Any], dry_run: bool = False) -> Any:
        """Create, retried while the twin namespace's ResourceQuota is not counted yet, as the
        agent retries: a real quota refuses every ShadowPod ("status unknown for quota") until
        the quota controller has counted it, seconds after it is made (after it has
        discovered the kind, every 30 s, and resynced the quota, which envtest's control
        planes do every 10 s)."""
        deadline = time.monotonic() + QUOTA_COUNTING
        while True:
            try:
                return self.api.create_namespaced_custom_object(
                    SHADOWPOD.group, SHADOWPOD.version, namespace, SHADOWPOD.plural, body,
                    dry_run="All" if dry_run else None)
            except ApiException as error:
                if (error.status != 403 or QUOTA_NOT_COUNTED not in (error.body or "")
                        or time.monotonic() > deadline):
                    raise
            time.sleep(QUOTA_POLL)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return self.api.get_namespaced_custom_object(  # type: ignore[no-any-return]
            SHADOWPOD.group, SHADOWPOD.version, namespace, SHADOWPOD.plural, name)

    def patch(self, namespace: str, name: str, body: dict[str, Any]) -> Any:
        return self.api.patch_namespaced_custom_object(
            SHADOWPOD.group, SHADOWPOD.version, namespace, SHADOWPOD.plural, name, body)

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        return self.get(namespace, name).get("status") or {}


def settled(shadowpods: ShadowPods, namespace: str, name: str, phase: str = "Running") -> None:
    """Wait until the enforcer has reported `phase`: no status write of its races the next
    update (kubesim answers 409 to a patch that lost such a race; kube-apiserver retries it)."""
    wait_for(lambda: shadowpods.status(namespace, name).get("phase") == phase,
             message=f"{namespace}/{name} never reported {phase}")


@pytest.fixture
def shadowpods(remote: Any) -> ShadowPods:
    return ShadowPods(remote.api_client)
