"""home_agent.credentials' pure part: which tokens are renewed and when, the TokenRequest that
renews one, the kubeconfig a renewed token goes into, and which Secret is followed."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from annex.events import EventRecorder
from home_agent.config import AgentConfig, parse_config
from home_agent.credentials import (
    RemoteCredentials,
    followed_secret,
    secret_data,
    secret_kubeconfig,
    service_account_token,
    with_token,
)
from shared.api.virtual_node import VirtualNode
from tests.helpers import until


def _jwt(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'RS256'})}.{part(claims)}.signature"


CLAIMS = {"sub": "system:serviceaccount:annex-tenant-home:consumer", "iat": 1000,
          "exp": 1000 + 86400, "aud": ["https://kubernetes.default.svc"]}
KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "remote",
    "clusters": [{"name": "remote", "cluster": {"server": "https://remote:6443"}}],
    "users": [{"name": "other", "user": {"token": "not-ours"}},
              {"name": "home-consumer", "user": {"token": "old"}}],
    "contexts": [{"name": "remote", "context": {"cluster": "remote", "user": "home-consumer",
                                                "namespace": "annex-tenant-home"}}],
}


def test_a_service_account_token_is_renewed_at_the_chosen_fraction_of_its_life() -> None:
    token = service_account_token(_jwt(CLAIMS))
    assert token is not None
    assert (token.namespace, token.service_account) == ("annex-tenant-home", "consumer")
    assert token.renewal_time(0.5) == 1000 + 43200
    assert token.request() == {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 86400}}


@pytest.mark.parametrize("token", [
    None, "", "a-static-token", "a.b.c",
    _jwt({**CLAIMS, "sub": "alice"}),  # a user, not a service account
    _jwt({key: value for key, value in CLAIMS.items() if key != "exp"}),  # never expires
])
def test_anything_else_is_used_as_it_is(token: str | None) -> None:
    assert service_account_token(token) is None


def test_a_renewed_token_replaces_only_the_current_users_token() -> None:
    renewed = with_token(KUBECONFIG, "new")
    assert renewed["users"] == [{"name": "other", "user": {"token": "not-ours"}},
                                {"name": "home-consumer", "user": {"token": "new"}}]
    assert {k: v for k, v in renewed.items() if k != "users"} == {
        k: v for k, v in KUBECONFIG.items() if k != "users"}
    assert KUBECONFIG["users"][1]["user"]["token"] == "old"  # a copy
    assert secret_kubeconfig({"data": secret_data(renewed)}) == renewed
    with pytest.raises(ValueError, match="no current context"):
        with_token({**KUBECONFIG, "current-context": "elsewhere"}, "new")


@pytest.mark.parametrize(("data", "complaint"), [
    ({}, "no 'kubeconfig' key"),
    ({"kubeconfig": "%%%"}, "is not a kubeconfig"),
    ({"kubeconfig": base64.b64encode(yaml.safe_dump(["a", "list"]).encode()).decode()},
     "is not a kubeconfig"),
])
def test_a_secret_without_a_kubeconfig_says_what_is_wrong(data: dict[str, str],
                                                          complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        secret_kubeconfig({"data": data})


def test_the_virtual_nodes_secret_wins_over_the_flag() -> None:
    config = parse_config(["--remote-kubeconfig", "k", "--cluster-id", "h",
                           "--remote-cluster-id", "r",
                           "--remote-kubeconfig-secret", "annex-system/from-flag"])
    named = VirtualNode.model_validate({
        "metadata": {"name": "r", "namespace": "agents"},
        "spec": {"clusterId": "r", "kubeconfigSecretRef": {"name": "from-node"}}})
    unnamed = VirtualNode.model_validate({"metadata": {"name": "r", "namespace": "agents"},
                                          "spec": {"clusterId": "r"}})
    assert followed_secret(config, named) == ("agents", "from-node")
    assert followed_secret(config, unnamed) == ("annex-system", "from-flag")
    assert followed_secret(config, None) == ("annex-system", "from-flag")
    without_flag = parse_config(["--remote-kubeconfig", "k", "--cluster-id", "h",
                                 "--remote-cluster-id", "r"])
    assert followed_secret(without_flag, None) is None


class SecretHome:
    """The home API server holding the followed Secret: listed, then watched (nothing more
    comes); Events recorded as (event, reason:name)."""

    def __init__(self, secret: dict[str, Any]) -> None:
        self.secret = secret
        self.calls: list[tuple[str, str]] = []
        self.watching = False

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        return {"kind": "SecretList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                "items": [dict(self.secret)]}

    async def watch(self, *_: Any) -> AsyncIterator[dict[str, Any]]:
        self.watching = True
        await asyncio.Event().wait()
        yield {}

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        self.calls.append(("event", body["reason"] + ":" + body["involvedObject"]["name"]))
        return body


@pytest.mark.parametrize(("leading", "events"), [
    (True, [("event", "InvalidKubeconfig:remote-kubeconfig")]),
    (False, []),  # a standby writes nothing: the leader follows the same Secret and reports it
])
def test_an_unusable_kubeconfig_is_reported_on_its_secret_by_the_leader_only(
        leading: bool, events: list[tuple[str, str]]) -> None:
    ref = ("annex-system", "remote-kubeconfig")
    home: Any = SecretHome({
        "metadata": {"namespace": ref[0], "name": ref[1], "uid": "u1"},
        "data": {"kubeconfig": base64.b64encode(b"not: [a kubeconfig").decode()}})
    remote: Any = SimpleNamespace(live=None)  # an unusable kubeconfig never reaches it
    config = AgentConfig("home", "remote", "unused", remote_kubeconfig_secret=ref)
    credentials = RemoteCredentials(config, home, remote, EventRecorder(home, "test", "home"),
                                    lambda: None)
    credentials.leading = lambda: leading

    async def follow() -> None:
        credentials.virtual_node_changed()  # VirtualNodes listed: the Secret is chosen
        following = asyncio.create_task(credentials.run())
        try:
            # Listed, and what it started on the way (an Event's post) has ended: left are this
            # test, the following and its watch of the Secret.
            await until(lambda: home.watching and len(asyncio.all_tasks()) == 3,
                        "the Secret listed and handled")
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)

    asyncio.run(follow())
    assert home.calls == events
