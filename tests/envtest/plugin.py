"""The `--control-plane` option: `kubesim` (the default) simulates `home` and `remote`;
`envtest` starts two real control planes for the session and runs the same tests on them, as
E2E_HOME_KUBECONFIG / E2E_REMOTE_KUBECONFIG would name two real clusters."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.envtest.controlplane import (
    ApiServerAddress,
    ControlPlane,
    EnvtestUnavailable,
    apiserver_address,
    find_binaries,
)

# Each cluster's pod CIDR (the stand-in kubelets' pod IPs), told to the tests as on real
# clusters (E2E_HOME_POD_CIDR, E2E_REMOTE_POD_CIDR).
POD_CIDRS = {"home": "10.244.0.0/16", "remote": "10.245.0.0/16"}
WORKERS = 1  # per cluster, as kubesim's clusters have
ADDRESS_KEY = pytest.StashKey[ApiServerAddress]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--control-plane", choices=("kubesim", "envtest"), default="kubesim",
        help="what the end-to-end tests' home and remote clusters are: kubesim (simulated) or "
             "envtest (real kube-apiserver, kube-controller-manager, kube-scheduler from "
             "KUBEBUILDER_ASSETS, etcd from there or PATH, with stand-in worker nodes)")


def envtest_requested(config: pytest.Config) -> bool:
    return bool(config.getoption("control_plane", "kubesim") == "envtest")


def pytest_configure(config: pytest.Config) -> None:
    if envtest_requested(config):
        try:
            find_binaries()
        except EnvtestUnavailable as error:
            raise pytest.UsageError(str(error)) from None
        config.stash[ADDRESS_KEY] = apiserver_address()


def pytest_report_header(config: pytest.Config) -> str | None:
    if ADDRESS_KEY not in config.stash:
        return None
    found = config.stash[ADDRESS_KEY]
    return (f"envtest: kube-apiserver at {found.address}"
            + (f", on loopback: {found.fallback_reason}" if found.fallback_reason else ""))


@contextlib.contextmanager
def envtest_clusters(config: pytest.Config, directory: Path, remote_workers: int = WORKERS,
                     worker_pods: int = 110) -> Iterator[dict[str, Path]]:
    """Start `home` and `remote` (in parallel), their workers (`remote_workers` remotely, each
    with room for `worker_pods` pods), and yield their admin kubeconfigs; stop everything
    afterwards."""
    from kubesim.controllers.kubelet import KubeletConfig
    from tests.envtest.workers import Workers

    binaries = find_binaries()
    address = config.stash[ADDRESS_KEY].address
    planes = [ControlPlane(name, binaries, directory / name, address) for name in POD_CIDRS]
    workers = Workers([(plane, KubeletConfig(
        workers=remote_workers if plane.name == "remote" else WORKERS, pods=worker_pods,
        node_prefix=f"{plane.name}-worker", pod_cidr=POD_CIDRS[plane.name]))
        for plane in planes])
    saved = {name: os.environ.get(name) for name in ("E2E_HOME_POD_CIDR", "E2E_REMOTE_POD_CIDR")}
    try:
        with concurrent.futures.ThreadPoolExecutor(len(planes)) as pool:
            for started in [pool.submit(plane.start) for plane in planes]:
                started.result()
        workers.start()
        for name, cidr in POD_CIDRS.items():
            os.environ.setdefault(f"E2E_{name.upper()}_POD_CIDR", cidr)
        yield {plane.name: plane.kubeconfig for plane in planes}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        workers.stop()
        for plane in planes:
            plane.stop()
