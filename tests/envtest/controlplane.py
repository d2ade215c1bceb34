"""One real control plane on this machine: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler as processes on free ports, configured as kubeadm configures them (Node and RBAC
authorization, NodeRestriction and the default admission plugins, PodSecurity among them;
service-account tokens signed with the PKI's key; the controller manager signing with the
cluster CA and using a credential per controller).

kube-apiserver serves at, and advertises, the machine's own non-loopback address
(`apiserver_address`): it publishes that address as the endpoint of the `kubernetes` Service,
which it refuses to do for a loopback address. The stand-in workers' nodes have that address
too (tests/envtest/workers.py); etcd, the controller manager and the scheduler listen on
loopback.

The binaries come from a directory named by KUBEBUILDER_ASSETS (envtest's variable, where
`setup-envtest` puts them); etcd from there or from PATH. `find_binaries` says what is missing."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.envtest.pki import Pki, write_kubeconfig, write_pki

ADDRESS = "127.0.0.1"  # etcd, the controller manager, the scheduler
ROUTE_PROBE = ("192.0.2.1", 9)  # any address off the machine: connecting a UDP socket sends nothing
SERVICE_CIDR = "10.96.0.0/12"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: the range's first address
START_TIMEOUT = 120.0  # two cores shared with other work: an API server can take a minute
STOP_TIMEOUT = 3.0
QUOTA_SYNC_PERIOD = "10s"


class EnvtestUnavailable(RuntimeError):
    """The binaries a real control plane needs are not here."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    apiserver: Path
    controller_manager: Path
    scheduler: Path


def find_binaries(environ: dict[str, str] | None = None) -> Binaries:
    environ = dict(os.environ if environ is None else environ)
    assets = environ.get("KUBEBUILDER_ASSETS", "")
    if not assets:
        raise EnvtestUnavailable(
            "--control-plane=envtest needs KUBEBUILDER_ASSETS: a directory holding "
            "kube-apiserver, kube-controller-manager and kube-scheduler (etcd there or on PATH)")
    directory = Path(assets)
    found: dict[str, Path] = {}
    missing = []
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            found[name] = candidate
        elif name == "etcd" and (on_path := shutil.which("etcd", path=environ.get("PATH"))):
            found[name] = Path(on_path)
        else:
            missing.append(name)
    if missing:
        raise EnvtestUnavailable(
            f"--control-plane=envtest: no {', '.join(missing)} in KUBEBUILDER_ASSETS={assets}"
            + (" or on PATH" if "etcd" in missing else ""))
    return Binaries(found["etcd"], found["kube-apiserver"], found["kube-controller-manager"],
                    found["kube-scheduler"])


def free_port(address: str = ADDRESS) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class ApiServerAddress:
    address: str
    fallback_reason: str = ""  # why it is loopback, when it is


def apiserver_address() -> ApiServerAddress:
    """The address kube-apiserver serves at and advertises: the one this machine's default
    route leaves from, or loopback, saying why, on a machine without one (the `kubernetes`
    Service then has no endpoints)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(ROUTE_PROBE)
            address = str(probe.getsockname()[0])
        if ipaddress.ip_address(address).is_loopback:
            raise OSError(f"the default route leaves from {address}")
        free_port(address)
    except OSError as error:
        return ApiServerAddress(ADDRESS, f"no non-loopback address to serve at ({error}): "
                                         "kube-apiserver publishes no endpoints of the "
                                         "`kubernetes` Service for a loopback address")
    return ApiServerAddress(address)


class ControlPlane:
    """Start with `start()`, stop with `stop()` (every process, then the data)."""

    def __init__(self, name: str, binaries: Binaries, directory: Path, address: str) -> None:
        self.name = name
        self.binaries = binaries
        self.directory = directory
        self.address = address  # kube-apiserver's (apiserver_address)
        self.port = free_port(address)
        self.url = f"https://{address}:{self.port}"
        self.pki: Pki | None = None
        self.kubeconfig = directory / f"{name}.kubeconfig"
        self.workers_kubeconfig = directory / f"{name}-workers.kubeconfig"
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self) -> None:
        pki = self.pki = write_pki(self.directory / "pki", self.address, SERVICE_IP)
        etcd_url = self._start_etcd()
        self._spawn("kube-apiserver", [str(self.binaries.apiserver), *self._apiserver_flags(
            pki, etcd_url)])
        write_kubeconfig(self.kubeconfig, self.name, self.url, pki.ca_pem, pki.admin)
        write_kubeconfig(self.workers_kubeconfig, self.name, self.url, pki.ca_pem, pki.workers)
        self._wait_ready()
        manager = write_kubeconfig(self.directory / "controller-manager.kubeconfig", self.name,
                                   self.url, pki.ca_pem, pki.controller_manager)
        scheduler = write_kubeconfig(self.directory / "scheduler.kubeconfig", self.name,
                                     self.url, pki.ca_pem, pki.scheduler)
        self._spawn("kube-controller-manager", [
            str(self.binaries.controller_manager), f"--kubeconfig={manager}",
            f"--authentication-kubeconfig={manager}", f"--authorization-kubeconfig={manager}",
            f"--bind-address={ADDRESS}", "--secure-port=0", "--leader-elect=false",
            "--controllers=*,bootstrapsigner,tokencleaner", "--use-service-account-credentials",
            f"--root-ca-file={pki.ca.cert}", f"--service-account-private-key-file="
            f"{pki.service_account_key}", f"--cluster-signing-cert-file={pki.ca.cert}",
            f"--cluster-signing-key-file={pki.ca.key}",
            f"--requestheader-client-ca-file={pki.front_proxy_ca.cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # an object-count quota on a kind refuses creations ("status unknown for quota")
            # until the quota controller has discovered the kind (every 30 s) and synced the
            # quota again (every 5 min by default): the tests install CRDs as they start
            f"--resource-quota-sync-period={QUOTA_SYNC_PERIOD}"])
        self._spawn("kube-scheduler", [
            str(self.binaries.scheduler), f"--kubeconfig={scheduler}",
            f"--authentication-kubeconfig={scheduler}", f"--authorization-kubeconfig={scheduler}",
            f"--bind-address={ADDRESS}", "--secure-port=0", "--leader-elect=false"])

    def _apiserver_flags(self, pki: Pki, etcd_url: str) -> list[str]:
        return [
            f"--etcd-servers={etcd_url}", f"--bind-address={self.address}",
            f"--advertise-address={self.address}", f"--secure-port={self.port}",
            f"--tls-cert-file={pki.apiserver.cert}", f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            f"--kubelet-client-certificate={pki.apiserver_kubelet_client.cert}",
            f"--kubelet-client-key={pki.apiserver_kubelet_client.key}",
            # the stand-in workers listen on loopback, each node at its own port
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            "--enable-bootstrap-token-auth=true", "--allow-privileged=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_public_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--requestheader-client-ca-file={pki.front_proxy_ca.cert}",
            f"--proxy-client-cert-file={pki.front_proxy_client.cert}",
            f"--proxy-client-key-file={pki.front_proxy_client.key}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--cert-dir={self.directory / 'serving'}",
        ]

    def _start_etcd(self) -> str:
        client, peer = free_port(), free_port()
        client_url, peer_url = f"http://{ADDRESS}:{client}", f"http://{ADDRESS}:{peer}"
        self._spawn("etcd", [
            str(self.binaries.etcd), f"--name={self.name}",
            f"--data-dir={self.directory / 'etcd'}", f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}", f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster={self.name}={peer_url}",
            # a test cluster's data need not survive a crash of the machine
            "--quota-backend-bytes=2147483648", "--snapshot-count=100000"])
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{client_url}/health", timeout=2) as answer:
                    if b'"health":"true"' in answer.read():
                        return client_url
            self._check_alive(deadline, "etcd")
            time.sleep(0.2)

    def _wait_ready(self) -> None:
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        context.load_cert_chain(str(self.pki.admin.cert), str(self.pki.admin.key))
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=5,
                                            context=context) as answer:
                    if answer.status == 200:
                        return
            self._check_alive(deadline, "kube-apiserver")
            time.sleep(0.3)

    def _check_alive(self, deadline: float, waiting_for: str) -> None:
        for name, process in self._processes:
            if process.poll() is not None:
                raise RuntimeError(f"{self.name}: {name} exited ({process.returncode}); "
                                   f"its log: {self.log_path(name)}\n{self.log_tail(name)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{self.name}: {waiting_for} not ready after {START_TIMEOUT:.0f} "
                               f"s; its log: {self.log_path(waiting_for)}\n"
                               f"{self.log_tail(waiting_for)}")

    def log_path(self, name: str) -> Path:
        return self.directory / f"{name}.log"

    def log_tail(self, name: str, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path(name).read_text(errors="replace").splitlines()[-lines:])
        return ""

    def _spawn(self, name: str, argv: list[str]) -> None:
        with self.log_path(name).open("ab") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self._processes.append((name, process))

    def stop(self) -> None:
        """Stop every process (SIGTERM; SIGKILL after a few seconds: the data is thrown away,
        and kube-scheduler takes 15 s to heed SIGTERM) and remove etcd's data."""
        for _, process in self._processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for _, process in self._processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self._processes.clear()
        shutil.rmtree(self.directory / "etcd", ignore_errors=True)
