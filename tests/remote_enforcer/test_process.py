"""The process contract: flags, probes and metrics."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

from annex.kube import load_connection
from remote_enforcer.admission import WEBHOOK_PATH
from tests.helpers import metric_samples, sample
from tests.remote_enforcer.conftest import (
    ROOT,
    ShadowPods,
    make_twin_namespace,
    new_name,
    settled,
    shadowpod,
)

CONSUMER = "consumer-process"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "remote_enforcer", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_help_lists_the_flags() -> None:
    answer = run_cli("--help")
    assert answer.returncode == 0
    for flag in ("--kubeconfig", "--cluster-id", "--webhook-cert", "--offer-mode",
                 "--offer-percent", "--offer-resources", "--region", "--log-format", "--qps",
                 "--burst", "--health-port", "--workers"):
        assert flag in answer.stdout


def test_inconsistent_flags_are_refused() -> None:
    answer = run_cli("--cluster-id", "p", "--offer-mode", "fixed")
    assert answer.returncode == 2
    assert "--offer-mode fixed needs --offer-resources" in answer.stderr
    answer = run_cli("--cluster-id", "p", "--offer-resources", "cpu=lots")
    assert answer.returncode == 2
    assert "cpu:" in answer.stderr
    answer = run_cli("--cluster-id", "p", "--workers", "0")  # workers are bounded
    assert answer.returncode == 2
    assert "--workers must be at least 1" in answer.stderr


def test_leader_election_needs_what_replicas_reach_each_other_with(tmp_path: Any) -> None:
    """The Lease's namespace (outside a pod), where this replica's webhook is, and the CA the
    replicas verify each other's certificate with."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    for path in (cert, key):
        path.write_text("")
    elect = ("--cluster-id", "p", "--leader-elect", "--webhook-cert", str(cert),
             "--webhook-key", str(key))
    for flags, error in (
            ((), "--leader-elect needs --leader-elect-resource-namespace outside a pod"),
            (("--leader-elect-resource-namespace", "ns"),
             "--leader-elect needs --webhook-advertise-address"),
            (("--leader-elect-resource-namespace", "ns", "--webhook-advertise-address", "10.0.0.1"),
             f"--leader-elect needs ca.crt beside {cert}"),  # at start
            (("--leader-elect-resource-namespace", "ns", "--leader-elect-lease-duration", "5"),
             "--leader-elect: the lease duration must be greater than the renew deadline")):
        answer = run_cli(*elect, *flags)
        assert answer.returncode == 2, answer.stderr
        assert error in answer.stderr, answer.stderr


def test_probes_and_metrics(remote: Any, enforcer: Any, shadowpods: ShadowPods) -> None:
    assert enforcer.get("/healthz").status == 200
    assert enforcer.get("/readyz").status == 200
    twin = make_twin_namespace(remote, CONSUMER)
    name = new_name("p")
    shadowpods.create(twin, shadowpod(name, CONSUMER))
    settled(shadowpods, twin, name)
    text = enforcer.get("/metrics").data.decode()
    assert 'annex_remote_enforcer_admissions_total{result="allowed"}' in text
    assert "annex_remote_enforcer_pods_created_total " in text
    assert "annex_remote_enforcer_shadowpods_counted " in text
    # Its controllers' reconciles and queues (annex.controller).
    assert re.search(r'annex_remote_enforcer_controller_reconciles_total\{'
                     r'controller="shadowpods",result="success"\} [1-9]', text)
    assert 'annex_remote_enforcer_controller_queued_keys{controller="shadowpods"}' in text
    assert ('annex_remote_enforcer_controller_queued_keys{controller="twin-namespace-labels"}'
            in text)
    # The requests of its client: here the pod it created for the ShadowPod.
    host = urlsplit(load_connection(str(remote.kubeconfig)).server).netloc
    assert re.search(r'annex_rest_client_requests_by_resource_total\{code="201",group="",'
                     rf'host="{re.escape(host)}",resource="pods",verb="create"\}} [1-9]', text)
    assert re.search(rf'rest_client_requests_total\{{code="201",host="{re.escape(host)}",'
                     r'method="POST"\} [1-9]', text)


def test_metrics_follow_controller_runtime(remote: Any, enforcer: Any,
                                          shadowpods: ShadowPods) -> None:
    """What a controller-runtime operator exports, moving as a ShadowPod is admitted and its
    pod made; every watch's requests counted (NamespaceMaps' too); the pods it runs for the
    consumer by phase."""
    def scraped() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        return metric_samples(enforcer.get("/metrics").data.decode())

    before = scraped()
    twin = make_twin_namespace(remote, CONSUMER)
    name = new_name("p")
    shadowpods.create(twin, shadowpod(name, CONSUMER))
    settled(shadowpods, twin, name)
    after = scraped()

    def grew(metric: str, /, **labels: str) -> bool:
        return (sample(after, metric, **labels) or 0) > (sample(before, metric, **labels) or 0)

    assert grew("controller_runtime_reconcile_total", controller="shadowpods", result="success")
    assert grew("workqueue_adds_total", name="shadowpods")
    assert grew("controller_runtime_reconcile_time_seconds_count", controller="shadowpods")
    assert grew("controller_runtime_webhook_latency_seconds_count", webhook=WEBHOOK_PATH)
    assert grew("controller_runtime_webhook_requests_total", webhook=WEBHOOK_PATH, code="200")
    for result in ("success", "error", "requeue", "requeue_after"):
        assert sample(after, "controller_runtime_reconcile_total",
                      controller="twin-namespace-labels", result=result) is not None
    assert sample(after, "workqueue_depth", name="twin-namespace-labels") is not None
    assert sum(value for (metric, labels), value in after.items()
               if metric == "annex_offloaded_pods" and ("consumer", CONSUMER) in labels) >= 1
    for controller in ("namespacemaps", "offers", "quota-status", "node-failures"):
        assert sample(after, "workqueue_depth", name=controller) is not None
    assert any(metric == "annex_rest_client_requests_by_resource_total"
               and {("resource", "namespacemaps"), ("verb", "watch")} <= labels
               for metric, labels in after)
    [build] = [dict(labels) for metric, labels in after if metric == "annex_build_info"]
    assert build["component"] == "remote-enforcer"
