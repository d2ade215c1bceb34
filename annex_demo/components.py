"""The remote enforcer and the home agent as local processes, with the identities the charts
give them (a token of the chart's ServiceAccount) and a serving certificate for their webhooks."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import trustme
import yaml
from kubernetes import client

from annex_demo.charts import REPOSITORY

# Long enough for `--keep`; the demo's processes do not refresh their token.
TOKEN_SECONDS = 24 * 3600


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ServingCertificate:
    cert: Path
    key: Path
    ca_bundle: str  # base64 PEM, as a webhook configuration's caBundle


def serving_certificate(directory: Path, name: str) -> ServingCertificate:
    """A certificate for 127.0.0.1 from a throwaway CA (what the charts generate at install),
    in `directory`/`name` as the chart's Secret volume holds it: tls.crt, tls.key and the CA's
    ca.crt (the enforcer's replicas verify each other with it)."""
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    mounted = directory / name
    mounted.mkdir(parents=True, exist_ok=True)
    cert, key = mounted / "tls.crt", mounted / "tls.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    authority.cert_pem.write_to_path(str(mounted / "ca.crt"))
    return ServingCertificate(cert, key, base64.b64encode(authority.cert_pem.bytes()).decode())


def service_account_kubeconfig(admin_kubeconfig: Path, api_client: client.ApiClient,
                               namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig for the cluster of `admin_kubeconfig` that authenticates as the
    ServiceAccount (a TokenRequest token), as a pod of that account would."""
    answer = client.CoreV1Api(api_client).create_namespaced_service_account_token(
        account, namespace, client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=TOKEN_SECONDS)))
    if answer.status is None or not answer.status.token:
        raise RuntimeError(f"no token for {namespace}/{account}")
    token = answer.status.token
    config = yaml.safe_load(admin_kubeconfig.read_text())
    for entry in config["users"]:
        entry["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def service_account_user(namespace: str, account: str) -> str:
    """The user name an API server gives a ServiceAccount's tokens."""
    return f"system:serviceaccount:{namespace}:{account}"


class ComponentProcess:
    """`python -m <component> ...` with its output in a log file; stopped with SIGTERM."""

    def __init__(self, name: str, command: Sequence[str], log_path: Path,
                 ready_url: str) -> None:
        if command[:2] != ["python", "-m"]:
            raise ValueError(f"{name}: expected a `python -m` command, got {command[:2]}")
        self.name = name
        self.log_path = log_path
        self.ready_url = ready_url
        self._log: IO[bytes] = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            [sys.executable, *command[1:]], stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=REPOSITORY, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    @property
    def pid(self) -> int:
        return self.popen.pid

    def ready(self) -> bool:
        """Its /readyz answers 200; raises if the process is gone."""
        if self.popen.poll() is not None:
            raise RuntimeError(f"the {self.name} exited ({self.popen.returncode}):\n"
                               f"{self.tail()}")
        try:
            with urllib.request.urlopen(self.ready_url, timeout=1.0) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def tail(self, characters: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-characters:]

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log.close()

    def __enter__(self) -> ComponentProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
