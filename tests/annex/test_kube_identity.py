"""Each component names itself to the API server as client-go components do: a User-Agent
`<component>/<version> (<os>/<arch>) annex/<commit>` on every request and its name as the
fieldManager of its writes, so that audit logs and managedFields tell them apart."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiohttp import web

from annex.api_paths import core_path
from annex.kube import load_connection, user_agent
from annex.kubeapi import ClusterApi
from annex.tokens import ServiceAccountRef, token_service_account
from tests.conftest import ClusterHandle

USER_AGENT = re.compile(r"annex-home-agent/v[^ ]+ \([a-z0-9]+/[a-z0-9_]+\) annex/[0-9a-z]+")


@pytest.fixture
def seen(remote: Any) -> Iterator[list[tuple[str, str, str, str | None]]]:
    """(method, path, User-Agent, fieldManager) of the requests the remote cluster serves."""
    requests: list[tuple[str, str, str, str | None]] = []

    async def record(request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                     ) -> web.StreamResponse:
        requests.append((request.method, request.path, request.headers.get("User-Agent", ""),
                         request.query.get("fieldManager")))
        return await handler(request)

    remote.sim.middlewares.append(record)
    yield requests
    remote.sim.middlewares.remove(record)


def test_the_user_agent_has_client_gos_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANNEX_GIT_COMMIT", "0123abc")
    assert re.fullmatch(r"annexctl/v\d+\.\d+\.\d+\S* \(\w+/\w+\) annex/0123abc",
                        user_agent("annexctl"))
    monkeypatch.delenv("ANNEX_GIT_COMMIT")
    assert user_agent("annexctl").endswith(" annex/unknown")


@pytest.mark.kubesim_only(reason="sees every request the remote API server serves through a "
                                 "kubesim middleware: kube-apiserver shows the User-Agent only in "
                                 "its audit log")
def test_requests_carry_the_components_user_agent_and_writes_its_field_manager(
        remote: Any, seen: list[tuple[str, str, str, str | None]]) -> None:
    name = f"identity-{uuid.uuid4().hex[:8]}"
    path = core_path("configmaps", "default", name)

    async def scenario() -> None:
        api = ClusterApi(load_connection(str(remote.kubeconfig)), component="annex-home-agent")
        try:
            await api.create(core_path("configmaps", "default"), {"metadata": {"name": name}})
            await api.patch(path, {"data": {"a": "1"}})
            await api.replace(path, {**await api.get(path), "data": {"b": "2"}})
            await api.delete(path)
        finally:
            await api.close()

    asyncio.run(scenario())
    mine = [(method, agent, manager) for method, where, agent, manager in seen
            if where.startswith(core_path("configmaps", "default"))]
    assert [method for method, _, _ in mine] == ["POST", "PATCH", "GET", "PUT", "DELETE"]
    assert all(USER_AGENT.fullmatch(agent) for _, agent, _ in mine), mine
    assert {method: manager for method, _, manager in mine} == {
        "POST": "annex-home-agent", "PATCH": "annex-home-agent", "PUT": "annex-home-agent",
        "GET": None, "DELETE": None}


def test_a_bound_token_names_its_service_account_and_others_name_none(
        home: ClusterHandle, namespace: str) -> None:
    """What the enforcer owns its election Lease by: the ServiceAccount its token says."""
    account = home.core.create_namespaced_service_account(namespace, {"metadata": {
        "name": "component"}})
    token = home.core.create_namespaced_service_account_token(
        "component", namespace, {"spec": {}}).status.token
    assert token_service_account(token) == ServiceAccountRef(
        namespace, "component", account.metadata.uid)
    for other in (None, "", "opaque-token", "a.b.c", "a.e30.c"):  # e30: {} with no claim
        assert token_service_account(other) is None
