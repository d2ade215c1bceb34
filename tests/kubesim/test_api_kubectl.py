"""kubectl works against the cluster with nothing but the kubeconfig (when it is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

POD = """apiVersion: v1
kind: Pod
metadata: {name: p, labels: {app: a}}
spec:
  schedulerName: none
  containers: [{name: c, image: IMAGE}]
"""


def kubectl(cluster, *args: str, stdin: str | None = None) -> str:
    assert KUBECTL is not None
    result = subprocess.run([KUBECTL, "--kubeconfig", str(cluster.kubeconfig), *args],
                            input=stdin, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kubectl_creates_lists_applies_and_deletes(home, namespace, tmp_path: Path) -> None:
    assert "default" in kubectl(home, "get", "namespaces", "-o", "name")
    kubectl(home, "-n", namespace, "create", "configmap", "x", "--from-literal=a=b")
    assert kubectl(home, "-n", namespace, "get", "configmap", "x",
                   "-o", "jsonpath={.data.a}") == "b"
    # kubesim publishes no OpenAPI documents: client-side validation must be off
    for image in ("nginx:1", "nginx:2"):
        kubectl(home, "-n", namespace, "apply", "--validate=false", "-f", "-",
                stdin=POD.replace("IMAGE", image))
    kubectl(home, "-n", namespace, "label", "pod", "p", "x=y")
    assert kubectl(home, "-n", namespace, "get", "pod", "p", "-o",
                   "jsonpath={.spec.containers[0].image} {.metadata.labels.x}") == "nginx:2 y"
    kubectl(home, "-n", namespace, "delete", "configmap", "x")
