"""Fixtures for the home agent's component tests: the agent as a real process against the
`home` and `remote` clusters, the test playing the remote enforcer where one is needed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from shared.wellknown import REMOTE_CLUSTER_ID_LABEL
from tests.conftest import ClusterHandle
from tests.home_agent.agentproc import (
    Process,
    agent_args,
    ensure_namespace,
    install_crds,
    tenant_labels,
    unique_id,
)


@pytest.fixture(scope="session")
def crds(home: ClusterHandle, remote: ClusterHandle) -> None:
    install_crds(home)
    install_crds(remote)


@dataclass
class RunningAgent:
    home_id: str
    remote_id: str
    tenant_namespace: str
    process: Process
    extra: list[str] = field(default_factory=list)

    @property
    def node_name(self) -> str:
        return f"liqo-{self.remote_id}"


@pytest.fixture
def start_agent(home: ClusterHandle, remote: ClusterHandle, crds: None,
                tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """start_agent(*extra_flags, remote_kubeconfig=None, remote_id=None, home_id=None,
    home_kubeconfig=None) →
    RunningAgent, with fresh cluster ids unless given (so tests never share a virtual node or a
    tenant namespace by accident)."""
    started: list[RunningAgent] = []

    def start(*extra: str, remote_kubeconfig: Path | None = None,
              remote_id: str | None = None, home_id: str | None = None,
              home_kubeconfig: Path | None = None) -> RunningAgent:
        home_id, remote_id = home_id or unique_id("home"), remote_id or unique_id("remote")
        tenant = f"annex-tenant-{home_id}"
        ensure_namespace(remote, tenant, tenant_labels(home_id))  # kept if it exists
        process = Process(
            agent_args(home_kubeconfig or home.kubeconfig, remote_kubeconfig or remote.kubeconfig,
                       home_id,
                       remote_id, *extra),
            tmp_path / f"agent-{len(started)}.log")
        agent = RunningAgent(home_id, remote_id, tenant, process, list(extra))
        started.append(agent)
        return agent

    yield start
    failed = getattr(request.node, "rep_call", None)
    for agent in started:
        agent.process.stop()
        if failed is not None and failed.failed:
            print(f"--- agent {agent.remote_id} log ---\n{agent.process.output()[-20000:]}")
    for agent in started:  # once every agent is stopped: none recreates a node
        try:
            labelled = home.core.list_node(
                label_selector=f"{REMOTE_CLUSTER_ID_LABEL}={agent.remote_id}").items
            for name in {agent.node_name} | {  # its pools' nodes too
                    node.metadata.name for node in labelled
                    if node.metadata.name.startswith(f"{agent.node_name}-")}:
                with contextlib.suppress(client.ApiException):
                    home.core.delete_node(name)
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
