"""The agent's remote credentials live: `annexctl peer` mints a token of bounded life, the agent
follows the kubeconfig Secret (its VirtualNode's kubeconfigSecretRef, else
--remote-kubeconfig-secret) without a restart, and renews its token before it expires, writing
it back into the Secret."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.annexctl.conftest import Annexctl, home_flags, minted_kubeconfig, peer_flags
from tests.annexctl.test_story import _virtual_node, agent_namespace, allow_borrowed_toleration
from tests.conftest import ClusterHandle
from tests.e2e.test_offloading import REMOTE_STRATEGY
from tests.helpers import wait_for
from tests.home_agent.agentproc import unique_id
from tests.remote_enforcer.conftest import PROVIDER_ID, Enforcer

__all__ = ["agent_namespace"]  # the fixture, shared with the story

SECRET = f"{PROVIDER_ID}-kubeconfig"


def _kubeconfig(home: ClusterHandle, namespace: str) -> dict[str, Any]:
    data = home.core.read_namespaced_secret(SECRET, namespace).data["kubeconfig"]
    return dict(yaml.safe_load(base64.b64decode(data)))


def _token(kubeconfig: dict[str, Any]) -> str:
    return str(kubeconfig["users"][0]["user"]["token"])


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def _runs_remotely(home: ClusterHandle, namespace: str, name: str) -> None:
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}], **REMOTE_STRATEGY}})
    wait_for(lambda: home.core.read_namespaced_pod(name, namespace).status.phase == "Running",
             timeout=90, interval=0.2, message=f"pod {name} runs on the provider")


def _offloaded(annexctl: Annexctl, home: ClusterHandle, namespace: str) -> None:
    run = annexctl("offload", "namespace", namespace, *home_flags(home),
                   "--pod-strategy", "Remote", "--timeout", "60")
    assert run.code == 0, run.err


def _events(home: ClusterHandle, namespace: str, reason: str) -> Callable[[], list[Any]]:
    return lambda: [e for e in home.core.list_namespaced_event(namespace).items
                    if e.involved_object.name == SECRET and e.reason == reason]


def test_the_agent_follows_its_kubeconfig_secret_without_a_restart(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, enforcer: Enforcer,
        start_agent: Any, namespace: str, agent_namespace: str, tmp_path: Path) -> None:
    home_id = unique_id("home")
    flags = peer_flags(home, remote, home_id, PROVIDER_ID, agent_namespace)
    assert annexctl("peer", *flags).code == 0
    allow_borrowed_toleration(remote, home_id)  # the virtual node's offloadingPatch has it
    _virtual_node(home, agent_namespace, SECRET)  # names the Secret: the agent follows it
    started_with = minted_kubeconfig(home, agent_namespace, SECRET, tmp_path)
    agent = start_agent(remote_kubeconfig=started_with, remote_id=PROVIDER_ID, home_id=home_id)
    _offloaded(annexctl, home, namespace)
    _runs_remotely(home, namespace, "first")

    # A kubeconfig that is not one: reported on the Secret, the credentials in use are kept.
    home.core.patch_namespaced_secret(SECRET, agent_namespace, {
        "data": {"kubeconfig": base64.b64encode(b"not: [a kubeconfig").decode()}})
    wait_for(_events(home, agent_namespace, "InvalidKubeconfig"), timeout=30,
             message="the unusable kubeconfig is reported on its Secret")
    _runs_remotely(home, namespace, "second")

    # The identity is revoked (its ServiceAccount deleted: every token of it stops working) and
    # peered again: a new token in the Secret, while the file the agent started with still
    # holds the revoked one.
    tenant = f"annex-tenant-{home_id}"
    remote.core.delete_namespaced_service_account("consumer", tenant)
    assert annexctl("peer", *flags).code == 0
    allow_borrowed_toleration(remote, home_id)
    revoked = _token(yaml.safe_load(started_with.read_text()))
    assert _token(_kubeconfig(home, agent_namespace)) != revoked
    _runs_remotely(home, namespace, "third")
    node = home.core.read_node(agent.node_name)
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    assert agent.process.popen.poll() is None  # the same process throughout
    assert "remote credentials reloaded from Secret" in agent.process.output()


def test_the_agent_renews_its_token_before_it_expires_and_writes_it_back(
        annexctl: Annexctl, home: ClusterHandle, remote: ClusterHandle, enforcer: Enforcer,
        start_agent: Any, namespace: str, agent_namespace: str, tmp_path: Path) -> None:
    home_id = unique_id("home")
    flags = peer_flags(home, remote, home_id, PROVIDER_ID, agent_namespace)
    assert annexctl("peer", *flags, "--token-expiration-seconds", "600").code == 0
    first = _kubeconfig(home, agent_namespace)
    issued = _claims(_token(first))
    # No VirtualNode names the Secret: the flag does. Renewal once 1% of the lifetime (6 s) has
    # passed.
    start_agent("--remote-kubeconfig-secret", f"{agent_namespace}/{SECRET}",
                "--remote-token-refresh-fraction", "0.01",
                remote_kubeconfig=minted_kubeconfig(home, agent_namespace, SECRET, tmp_path),
                remote_id=PROVIDER_ID, home_id=home_id)

    renewed = wait_for(lambda: (lambda k: k if _token(k) != _token(first) else None)(
        _kubeconfig(home, agent_namespace)), timeout=60, interval=0.2,
        message="the agent writes a renewed token into its Secret")
    claims = _claims(_token(renewed))
    assert claims["sub"] == issued["sub"]  # the same identity
    assert claims["exp"] > issued["exp"] and claims["exp"] - claims["iat"] == 600
    assert claims["aud"] == issued["aud"]
    renewed["users"][0]["user"]["token"] = first["users"][0]["user"]["token"]
    assert renewed == first  # only the token changed
    _offloaded(annexctl, home, namespace)
    _runs_remotely(home, namespace, "after-renewal")
