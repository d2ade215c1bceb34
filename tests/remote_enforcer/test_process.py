"""The process contract: flags, probes and metrics."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

from annex.kube import load_connection
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
