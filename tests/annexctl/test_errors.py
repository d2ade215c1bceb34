"""annexctl's failures are one `error:` line naming the cluster and the cause, with an exit code
scripts can tell apart (1 failed, 3 unreachable, 4 annex not installed), never a traceback."""

from __future__ import annotations

import io
import logging
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import pytest
import yaml

from tests.annexctl.conftest import Annexctl
from tests.conftest import ClusterHandle


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _with_server(handle: ClusterHandle, server: str, path: Path) -> Path:
    kubeconfig = yaml.safe_load(handle.kubeconfig.read_text())
    for entry in kubeconfig["clusters"]:
        entry["cluster"]["server"] = server
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the stderr of the moment, as Python's last-resort handler does."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass


def _closed_stream() -> logging.Handler:
    stream = io.StringIO()
    stream.close()
    return logging.StreamHandler(stream)


@pytest.fixture(params=[_Stderr, _closed_stream],
                ids=["a handler on stderr", "a handler that cannot write"])
def root_handler(request: pytest.FixtureRequest) -> Iterator[None]:
    """Whatever logging the process that runs the command has: a handler on stderr (as Python's
    last resort when there is none), or one whose stream has closed (logging then prints its
    own traceback on stderr)."""
    make: Callable[[], logging.Handler] = request.param
    handler = make()
    logging.root.addHandler(handler)
    yield
    logging.root.removeHandler(handler)


@pytest.mark.usefixtures("root_handler")
def test_an_unreachable_cluster_is_exit_code_3(
        annexctl: Annexctl, home: ClusterHandle, tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = _with_server(home, server, tmp_path / "down.kubeconfig")

    run = annexctl("status", "--kubeconfig", str(kubeconfig))

    assert run.code == 3
    # One line, though urllib3 logged a warning for the retry the command made meanwhile.
    assert run.err.startswith(f"error: home cluster {server} is unreachable: ")
    assert run.err.count("\n") == 1, run.err


def test_a_wrong_kubeconfig_is_named(annexctl: Annexctl, home: ClusterHandle,
                                     tmp_path: Path) -> None:
    missing = tmp_path / "missing.kubeconfig"
    run = annexctl("status", "--kubeconfig", str(missing))
    assert (run.code, run.err) == (1, f"error: home kubeconfig {missing}: no such file\n")

    run = annexctl("status", "--kubeconfig", str(home.kubeconfig), "--context", "nope")
    assert run.code == 1
    assert run.err.startswith(f"error: home kubeconfig {home.kubeconfig}: ")
    assert "nope" in run.err


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cluster without annex's CRDs."""
    from kubesim.cluster import Cluster, ClusterThread

    directory = tmp_path_factory.mktemp("bare")
    thread = ClusterThread([Cluster("bare")], directory)
    thread.start()
    try:
        yield directory / "bare.kubeconfig"
    finally:
        thread.stop()


@pytest.mark.kubesim_only(reason="starts a fresh simulated cluster of its own, without annex's "
                                 "CRDs")
def test_missing_crds_are_exit_code_4(annexctl: Annexctl, bare: Path) -> None:
    run = annexctl("status", "--kubeconfig", str(bare))
    assert run.code == 4
    assert run.err.startswith("error: home cluster https://127.0.0.1:")
    assert "VirtualNode (offloading.liqo.io/v1beta1)" in run.err
    assert "are annex's CRDs installed" in run.err

    run = annexctl("peer", "--kubeconfig", str(bare), "--remote-kubeconfig", str(bare),
                   "--cluster-id", "a", "--remote-cluster-id", "b")
    assert run.code == 4 and "Quota (offloading.liqo.io/v1beta1)" in run.err
