"""`python -m kubesim up`: a real subprocess that serves clusters until SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client, config

pytestmark = pytest.mark.kubesim_only(reason="kubesim's command line, which starts simulated "
                                             "clusters of its own")


def start(directory: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kubesim", "up", "--dir", str(directory), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_up_serves_each_cluster_until_signalled(tmp_path: Path, signum: int) -> None:
    process = start(tmp_path, "home", "--workers", "2", "remote", "--pod-cidr", "10.9.0.0/16")
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline().split() for _ in range(2)]
        assert [line[0] for line in lines] == ["home", "remote"]
        for name, url, kubeconfig, *_ in lines:  # 4th column: the fault-control URL
            assert url.startswith("https://127.0.0.1:")
            assert kubeconfig == str(tmp_path / f"{name}.kubeconfig")
            api = config.new_client_from_config(config_file=kubeconfig)
            names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
            assert "default" in names
            api.close()
    finally:
        process.send_signal(signum)
        assert process.wait(timeout=30) == 0


def test_up_without_names_prints_usage_and_fails(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kubesim", "up", "--dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 2 and "usage:" in result.stderr


def test_per_cluster_flags_are_kept_on_the_cluster() -> None:
    from kubesim.__main__ import parse

    directory, specs = parse(["up", "--dir", "d", "home", "--workers", "3", "--pod-cidr",
                              "10.1.0.0/16", "remote"])
    assert directory == Path("d")
    assert [(s.name, s.workers, s.pod_cidr) for s in specs] == [
        ("home", 3, "10.1.0.0/16"), ("remote", 1, "10.0.0.0/16")]


def test_metrics_server_runs_on_the_clusters_that_ask_for_it() -> None:
    from kubesim.__main__ import _make_cluster, parse

    _, specs = parse(["up", "--dir", "d", "home", "--metrics-resolution", "2", "remote"])
    home, remote = (_make_cluster(spec) for spec in specs)
    assert home.metrics_server is not None and home.metrics_server.resolution == 2.0
    assert remote.metrics_server is None
