"""annex.kube: a kubeconfig gives clients of one identity (annex's and kopf's), its bearer
token is found under either key, and the client-side rate limiter lets a burst through, then
paces to its QPS."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client

from annex.kube import (
    ClientLimits,
    RateLimiter,
    bearer_token,
    load_connection,
)
from annex.kubeapi import ClusterApi


def test_a_kubeconfig_gives_a_client_of_its_identity(remote: Any) -> None:
    connection = load_connection(str(remote.kubeconfig), limits=ClientLimits(qps=5, burst=7))
    assert connection.server.startswith("https://") and connection.ca_path
    # kubesim's admin kubeconfig holds a token, kubeadm's (envtest's) a client certificate
    assert connection.token or (connection.certificate_path and connection.private_key_path)

    async def through_cluster_api() -> list[str]:
        api = ClusterApi(connection)
        try:
            return [n["metadata"]["name"] for n in await api.list("/api/v1/namespaces")]
        finally:
            await api.close()
    assert "default" in asyncio.run(through_cluster_api())


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
