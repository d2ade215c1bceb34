"""annexctl tests: the CLI run in-process (`annexctl(*args)` → exit code, stdout, stderr) against
the `home` and `remote` clusters, with the e2e fixtures (CRDs, the enforcer, agent processes)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from annexctl.cli import main
from tests.conftest import ClusterHandle
from tests.e2e import conftest as e2e_fixtures

crds = e2e_fixtures.crds
enforcer = e2e_fixtures.enforcer
start_agent = e2e_fixtures.start_agent
pytest_runtest_makereport = e2e_fixtures.pytest_runtest_makereport


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Annexctl = Callable[..., Run]


@pytest.fixture
def annexctl(capsys: pytest.CaptureFixture[str]) -> Annexctl:
    def run(*args: str) -> Run:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)
    return run


def home_flags(home: ClusterHandle) -> list[str]:
    return ["--kubeconfig", str(home.kubeconfig)]


def peer_flags(home: ClusterHandle, remote: ClusterHandle, home_id: str, remote_id: str,
               namespace: str) -> list[str]:
    return [*home_flags(home), "--remote-kubeconfig", str(remote.kubeconfig),
            "--cluster-id", home_id, "--remote-cluster-id", remote_id, "-n", namespace]


def minted_kubeconfig(home: ClusterHandle, namespace: str, secret: str,
                      directory: Path) -> Path:
    """The kubeconfig `annexctl peer` installed at home, as a file."""
    data = home.core.read_namespaced_secret(secret, namespace).data["kubeconfig"]
    path = directory / f"{secret}.kubeconfig"
    path.write_text(yaml.safe_dump(yaml.safe_load(base64.b64decode(data))))
    return path
