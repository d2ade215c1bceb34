"""The process contract: flags, probes and metrics, a clean stop on SIGTERM."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from annex.kube import load_connection
from home_agent.config import parse_config
from tests.helpers import free_port, metric_samples, sample, wait_for
from tests.home_agent.agentproc import REPO


def test_flags_have_generous_defaults() -> None:
    config = parse_config(["--remote-kubeconfig", "r", "--cluster-id", "h",
                           "--remote-cluster-id", "r"])
    assert config.home_kubeconfig is None  # in-cluster configuration
    assert (config.lease_renew_interval, config.lease_duration_seconds) == (10.0, 40)
    assert config.failure_threshold == 3
    assert config.home_limits.qps == config.remote_limits.qps == 0  # unthrottled
    assert config.effective_tenant_namespace == "annex-tenant-h"


@pytest.mark.parametrize("flags", [
    ["--remote-pod-cidr", "10.0.0.0/16"],
    ["--webhook-address", "0.0.0.0:9443"],
])
def test_flags_that_go_together_are_checked(flags: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_config(["--remote-kubeconfig", "r", "--cluster-id", "h",
                      "--remote-cluster-id", "r", *flags])


def test_help_lists_the_flags() -> None:
    result = subprocess.run([sys.executable, "-m", "home_agent", "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for flag in ("--home-kubeconfig", "--remote-kubeconfig", "--failure-threshold",
                 "--remapped-pod-cidr", "--enable-apiserver-support", "--home-qps",
                 "--remote-burst", "--workers", "--metrics-address", "--webhook-address",
                 "--log-format"):
        assert flag in result.stdout


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def _host(handle: Any) -> str:
    """host:port of a cluster's API server, as client-go's `host` label names it."""
    return urlsplit(load_connection(str(handle.kubeconfig)).server).netloc


def test_probes_and_metrics_then_a_clean_stop(start_agent: Any, home: Any, remote: Any) -> None:
    port = free_port()
    agent = start_agent("--metrics-address", f"127.0.0.1:{port}", "--log-format", "json")
    wait_for(lambda: _get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout=30,
             message="ready once the home cluster is listed")
    assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    body = wait_for(lambda: (b := _get(f"http://127.0.0.1:{port}/metrics")[1])
                    and 'kind="node",result="success"' in b and b, timeout=30,
                    message="node reconciles counted")
    assert "annex_home_agent_remote_ready" in body
    # The requests of its clients, on both clusters: the node it wrote at home, the offers it
    # listed remotely.
    assert f'rest_client_requests_total{{code="200",host="{_host(home)}",method="GET"}}' in body
    assert f'rest_client_requests_total{{code="200",host="{_host(remote)}",method="GET"}}' in body
    assert re.search(r'annex_rest_client_requests_by_resource_total\{code="20[01]",group="",'
                     rf'host="{re.escape(_host(home))}",resource="nodes(/status)?",'
                     r'verb="(create|patch|update)"\} [1-9]', body), body
    # What a controller-runtime operator exports, moving when the agent has work: a label
    # set on its node by someone else is a change the agent reconciles.
    found = metric_samples(body)
    assert sample(found, "annex_virtual_node_ready", node=agent.node_name,
                  remote_cluster=agent.remote_id) is not None
    assert (sample(found, "annex_remote_health_check_duration_seconds_count",
                   remote_cluster=agent.remote_id) or 0) >= 1
    assert sample(found, "workqueue_depth", name="agent") is not None
    [build] = [dict(labels) for name, labels in found if name == "annex_build_info"]
    assert build["component"] == "home-agent"

    def reconciled() -> float:
        return sample(metric_samples(_get(f"http://127.0.0.1:{port}/metrics")[1]),
                      "controller_runtime_reconcile_total", controller="agent",
                      result="success") or 0

    before = reconciled()
    home.core.patch_node(agent.node_name, {"metadata": {"labels": {"example.org/poked": "1"}}})
    wait_for(lambda: reconciled() > before, timeout=30, message="the node's change reconciled")
    assert agent.process.stop() == 0
    assert '"level": "INFO"' in agent.process.output()


def test_without_a_reachable_home_api_server_address_the_agent_refuses_to_start(
        home: Any, tmp_path: Path) -> None:
    """Its kubeconfig names the cluster-internal `kubernetes` Service (as in-cluster
    configuration does) and no EndpointSlice can be read there: offloaded pods would get a home
    token and no way to use it, so the agent says so in one line and exits."""
    kubeconfig = yaml.safe_load(home.kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = "https://kubernetes.default.svc:1"
    internal = tmp_path / "internal.kubeconfig"
    internal.write_text(yaml.safe_dump(kubeconfig))
    result = subprocess.run(
        [sys.executable, "-m", "home_agent", "--home-kubeconfig", str(internal),
         "--remote-kubeconfig", str(home.kubeconfig), "--cluster-id", "h",
         "--remote-cluster-id", "r"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert "https://kubernetes.default.svc:1" in line and "--home-apiserver-host" in line
