"""annex.kube: a kubeconfig gives clients of one identity (annex's and kopf's), its bearer
token is found under either key, and the client-side rate limiter lets a burst through, then
paces to its QPS."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from annex.kube import (
    ClientLimits,
    RateLimiter,
    bearer_token,
    kopf_login,
    load_connection,
)
from annex.kubeapi import ClusterApi


def test_a_kubeconfig_gives_clients_of_one_identity_annex_s_and_kopf_s(remote: Any) -> None:
    connection = load_connection(str(remote.kubeconfig), limits=ClientLimits(qps=5, burst=7))
    assert connection.server.startswith("https://")
    assert connection.token and connection.ca_path

    async def through_cluster_api() -> list[str]:
        api = ClusterApi(connection)
        try:
            return [n["metadata"]["name"] for n in await api.list("/api/v1/namespaces")]
        finally:
            await api.close()
    assert "default" in asyncio.run(through_cluster_api())

    login = kopf_login(connection)
    assert (login.server, login.token, login.scheme) == (connection.server, connection.token,
                                                         "Bearer")

    async def through_kopf_login() -> int:
        async with aiohttp.ClientSession(headers=login.as_http_headers()) as session:
            async with session.get(f"{login.server}/api/v1/namespaces/default",
                                   ssl=login.as_ssl_context()) as response:
                return response.status
    assert asyncio.run(through_kopf_login()) == 200


@pytest.mark.parametrize(("key", "value"), [("BearerToken", "abc"),
                                            ("authorization", "Bearer abc")])
def test_the_bearer_token_is_found_under_either_key(key: str, value: str) -> None:
    configuration = client.Configuration()
    configuration.api_key = {key: value}
    assert bearer_token(configuration) == "abc"


def test_the_rate_limiter_lets_a_burst_through_then_paces_to_qps() -> None:
    now = [0.0]
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    async def acquire(times: int) -> None:
        for _ in range(times):
            await limiter.acquire()

    limiter = RateLimiter(ClientLimits(qps=20, burst=5), clock=lambda: now[0], sleep=fake_sleep)
    asyncio.run(acquire(5))
    assert waits == []  # the burst passes at once
    asyncio.run(acquire(3))
    assert waits == pytest.approx([0.05, 0.05, 0.05])  # then one token per 1/qps
    now[0] += 10  # idle time refills the bucket up to the burst, no further
    waits.clear()
    asyncio.run(acquire(6))
    assert waits == pytest.approx([0.05])
