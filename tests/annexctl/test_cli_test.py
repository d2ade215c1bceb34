"""`annexctl test`: a peering checked end to end as a user would (offload a probe namespace, run
a pod on the virtual node, read its logs and exec into it, find a ConfigMap reflected on the
provider, clean up), each step printed with its time; a peering that is not ready fails the
first step, named, with exit code 1. Output without a terminal has no control characters: the
progress line is drawn on a terminal only."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from kubernetes import client

from annexctl.probe import NAMESPACE_PREFIX, _pod_state, probe_node
from annexctl.progress import waiting
from tests.annexctl.conftest import Annexctl, home_flags, minted_kubeconfig, peer_flags
from tests.annexctl.test_story import _virtual_node, agent_namespace, allow_borrowed_toleration
from tests.conftest import ClusterHandle
from tests.e2e.test_kubelet_api import agent_address
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id
from tests.remote_enforcer.conftest import PROVIDER_ID, Enforcer

__all__ = ["agent_namespace"]  # the fixture

STEPS = ["peering ready", "offload namespace", "run pod", "read logs", "exec",
         "reflect ConfigMap", "clean up"]
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # all but tab and newline
STEP_LINE = re.compile(r"^(?P<step>.+?) +(?P<result>ok|FAILED) +(?P<seconds>\d+\.\d\d)s  ")


def _steps(out: str) -> list[tuple[str, str]]:
    return [(m["step"], m["result"]) for line in out.splitlines()
            if (m := STEP_LINE.match(line))]


def _ready(home: ClusterHandle, node: str) -> bool:
    try:
        conditions = home.core.read_node(node).status.conditions or []
    except client.ApiException:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def test_a_working_peering_passes_every_step_and_leaves_nothing(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, enforcer: Enforcer,
        start_agent: Any, agent_namespace: str, tmp_path: Path) -> None:
    home_id = unique_id("home")
    assert annexctl("peer", *peer_flags(home, remote, home_id, PROVIDER_ID,
                                        agent_namespace)).code == 0
    allow_borrowed_toleration(remote, home_id)  # the VirtualNode's offloadingPatch has it
    secret = f"{PROVIDER_ID}-kubeconfig"
    _virtual_node(home, agent_namespace, secret)
    # Logs and exec: the home API server dials the agent's kubelet API, which trusts the
    # cluster CA for the API server's client certificate (as kubeadm clusters' kubelets do).
    ca = home.core.read_namespaced_config_map("kube-root-ca.crt", "kube-system").data["ca.crt"]
    (tmp_path / "home-ca.crt").write_text(ca)
    agent = start_agent("--agent-ip", agent_address(home),
                        "--kubelet-client-ca", str(tmp_path / "home-ca.crt"),
                        remote_kubeconfig=minted_kubeconfig(home, agent_namespace, secret,
                                                            tmp_path),
                        remote_id=PROVIDER_ID, home_id=home_id)
    wait_for(lambda: _ready(home, agent.node_name), timeout=60,
             message="the virtual node is Ready")

    run = annexctl("test", *home_flags(home), "--remote-cluster-id", PROVIDER_ID,
                   "-n", agent_namespace)
    assert run.code == 0, run.out + run.err
    assert _steps(run.out) == [(step, "ok") for step in STEPS]
    assert f"virtual node {agent.node_name} of cluster {PROVIDER_ID} Ready" in run.out
    assert f"The peering with {PROVIDER_ID} works end to end" in run.out
    assert not CONTROL.search(run.out + run.err)
    # The probe namespace is gone at home, and its twin on the provider.
    assert not [n for n in home.core.list_namespace().items
                if n.metadata.name.startswith(NAMESPACE_PREFIX)]
    wait_for(lambda: not [n for n in remote.core.list_namespace().items
                          if n.metadata.name.startswith(NAMESPACE_PREFIX)],
             timeout=60, message="the twin namespace is gone")


def test_a_peering_that_is_not_ready_fails_its_first_step_by_name(
        annexctl: Annexctl, home: ClusterHandle, agent_namespace: str, crds: None) -> None:
    # The chart's VirtualNode with no agent serving it: no virtual node comes up.
    home.core.create_namespace({"metadata": {"name": agent_namespace}})
    _virtual_node(home, agent_namespace, f"{PROVIDER_ID}-kubeconfig")
    node = unique_id("liqo-absent")  # not the default name, which other tests' agents take
    home.dynamic.resources.get(api_version="offloading.liqo.io/v1beta1", kind="VirtualNode") \
        .patch(namespace=agent_namespace, name=PROVIDER_ID, body={"spec": {"nodeName": node}},
               content_type="application/merge-patch+json")
    run = annexctl("test", *home_flags(home), "--remote-cluster-id", PROVIDER_ID,
                   "-n", agent_namespace)
    assert run.code == 1
    assert _steps(run.out) == [("peering ready", "FAILED")]
    assert run.err.startswith(f'error: step "peering ready" failed: virtual node {node} ')
    assert "is its home agent running?" in run.err
    assert not CONTROL.search(run.out + run.err)

    other = annexctl("test", *home_flags(home), "--remote-cluster-id", "nobody")
    assert other.code == 1
    assert other.err == 'error: step "peering ready" failed: no VirtualNode for cluster ' \
                        'nobody\n'


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_is_drawn_on_a_terminal_only() -> None:
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with waiting("the probe pod", stream), waiting("its log", stream):
            pass  # a wait inside a wait changes the one line
    assert pipe.getvalue() == ""
    drawn = terminal.getvalue()
    assert "waiting for the probe pod..." in drawn
    assert drawn.endswith("\x1b[2K")  # erased at the end


def test_a_pod_that_does_not_run_is_explained_by_what_is_not_so_yet_and_annex_s_verdict() -> None:
    pending = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "x"},
        {"type": "RemoteCreationFailed", "status": "True", "reason": "Forbidden",
         "message": "host ports are not allowed"}],
        "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    assert _pod_state(pending) == (
        "phase Pending; ContainerCreating; Ready=False (ContainersNotReady: x); "
        "RemoteCreationFailed=True (Forbidden: host ports are not allowed)")


def _node(name: str, cluster_id: str, pool: str | None, pods: str, ready: str) -> dict[str, Any]:
    labels = {"liqo.io/remote-cluster-id": cluster_id,
              **({"offloading.liqo.io/pool": pool} if pool else {})}
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"pods": pods},
                       "conditions": [{"type": "Ready", "status": ready}]}}


def test_the_probe_goes_to_the_ready_pool_node_lending_the_most_pods() -> None:
    nodes = [_node("liqo-p-gpu", "p", "gpu", "10", "True"),
             _node("liqo-p-general", "p", "general", "110", "True"),
             _node("liqo-p-big", "p", "big", "500", "False"),
             _node("liqo-p-other", "q", "other", "900", "True")]  # another provider's
    assert probe_node("liqo-p", "p", nodes)["metadata"]["name"] == "liqo-p-general"  # type: ignore[index]
    single = [_node("liqo-p", "p", None, "110", "True")]
    assert probe_node("liqo-p", "p", single) == single[0]
    assert probe_node("liqo-p", "p", []) is None
