"""`annexctl version` / `--version`: the client's version always, the components' versions from
the Deployments the charts install (image tag and app.kubernetes.io/version) where a cluster is
reachable; `kubectl annex ...` runs annexctl as a kubectl plugin, with kubectl's global flags
before the command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from annex_demo.charts import render
from annexctl.cli import main
from annexctl.version import image_tag
from tests.annexctl.conftest import Annexctl, home_flags
from tests.annexctl.test_errors import _closed_port, _with_server
from tests.conftest import ClusterHandle

CLIENT_VERSION = package_version("kube-annex")


def _installed(home: ClusterHandle, namespace: str) -> None:
    """The Deployments the home-agent chart installs for one remote (image tag 9.9.9 set by
    the user, the chart's appVersion in the label), scaled to zero: only read here."""
    manifests = render("home-agent", {
        "clusterId": "home-1", "controller": {"enabled": False}, "image": {"tag": "9.9.9"},
        "remotes": [{"clusterId": "provider-1", "kubeconfigSecret": "provider-1-kubeconfig"}]},
        namespace=namespace)
    apps = client.AppsV1Api(home.api_client)
    for manifest in manifests:
        if manifest["kind"] == "Deployment":
            manifest["spec"]["replicas"] = 0
            apps.create_namespaced_deployment(namespace, manifest)


def _ours(report: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    [home] = [c for c in report["clusters"] if c["role"] == "home"]
    assert home["error"] is None
    return [c for c in home["components"] if c["namespace"] == namespace]


def test_version_reads_the_components_from_their_deployments(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, namespace: str) -> None:
    _installed(home, namespace)
    run = annexctl("version", *home_flags(home), "--remote-kubeconfig", str(remote.kubeconfig),
                   "-o", "json")
    assert run.code == 0, run.err
    report = run.json()
    assert report["clientVersion"] == CLIENT_VERSION
    [agent] = _ours(report, namespace)
    assert (agent["deployment"], agent["component"], agent["version"], agent["versionLabel"],
            agent["ready"]) == ("annex-home-agent-provider-1", "home-agent (remote provider-1)",
                                "9.9.9", "0.1.0", "0/0")
    [provider] = [c for c in report["clusters"] if c["role"] == "provider"]
    assert provider["error"] is None and provider["server"] == remote.core.api_client \
        .configuration.host

    table = annexctl("version", *home_flags(home))
    assert table.code == 0
    assert table.out.startswith(f"Client Version: {CLIENT_VERSION}\n")
    assert any(line.split()[:4] == [namespace, "annex-home-agent-provider-1", "home-agent",
                                    "(remote"] and "9.9.9" in line
               for line in table.out.splitlines())


def test_version_without_a_reachable_cluster_prints_the_client_version_and_says_why(
        annexctl: Annexctl, home: ClusterHandle, tmp_path: Path) -> None:
    unreachable = _with_server(home, f"https://127.0.0.1:{_closed_port()}",
                               tmp_path / "unreachable")
    run = annexctl("version", "--kubeconfig", str(unreachable))
    assert run.code == 0, run.err
    client_line, note = run.out.strip().splitlines()
    assert client_line == f"Client Version: {CLIENT_VERSION}"
    assert note.startswith("No component versions from the home cluster: home cluster ")
    assert "unreachable" in note
    assert annexctl("version", "--client", "-o", "json").json() == {
        "clientVersion": CLIENT_VERSION, "clusters": []}


def test_dash_dash_version_prints_the_client_version(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"annexctl {CLIENT_VERSION}\n"


def test_kubeconfig_and_context_before_the_command_as_kubectl_takes_them(
        annexctl: Annexctl, home: ClusterHandle, namespace: str) -> None:
    _installed(home, namespace)
    before = annexctl("--kubeconfig", str(home.kubeconfig), "version", "-o", "json")
    after = annexctl("version", "--kubeconfig", str(home.kubeconfig), "-o", "json")
    assert before.code == after.code == 0, before.err + after.err
    assert _ours(before.json(), namespace) == _ours(after.json(), namespace) != []
    # A context the kubeconfig lacks is refused, wherever it is given.
    for args in (("--kubeconfig", str(home.kubeconfig), "--context", "nowhere", "status"),
                 ("status", "--kubeconfig", str(home.kubeconfig), "--context", "nowhere")):
        refused = annexctl(*args)
        assert refused.code == 1 and "nowhere" in refused.err, refused


def test_annexctl_is_a_kubectl_plugin(home: ClusterHandle, namespace: str) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is needed (CI installs it)"
    _installed(home, namespace)
    # Where `pip install` put the console scripts, kubectl-annex among them.
    scripts = sysconfig.get_path("scripts")
    assert (Path(scripts) / "kubectl-annex").exists()
    environment = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ['PATH']}"}
    listed = subprocess.run([kubectl, "plugin", "list"], capture_output=True, text=True,
                            env=environment, timeout=60)
    assert f"{scripts}/kubectl-annex" in listed.stdout
    run = subprocess.run([kubectl, "annex", "--kubeconfig", str(home.kubeconfig), "version",
                          "-o", "json"], capture_output=True, text=True, env=environment,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["clientVersion"] == CLIENT_VERSION
    assert [c["version"] for c in _ours(report, namespace)] == ["9.9.9"]
    usage = subprocess.run([kubectl, "annex", "--help"], capture_output=True, text=True,
                           env=environment, timeout=60)
    assert usage.stdout.startswith("usage: kubectl annex ")


@pytest.mark.parametrize(("image", "tag"), [
    ("ghcr.io/annex/kube-annex:0.1.0", "0.1.0"),
    ("registry.local:5000/kube-annex:1.2", "1.2"),
    ("registry.local:5000/kube-annex", "latest"),
    ("kube-annex@sha256:abc", "sha256:abc"),
    ("kube-annex:0.2@sha256:abc", "0.2"),
])
def test_an_image_reference_s_tag(image: str, tag: str) -> None:
    assert image_tag(image) == tag
