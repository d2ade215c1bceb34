"""annex.kubeapi: the one REST client both components use, against a live API server."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from annex.kube import ClientLimits, Connection, RateLimiter, load_connection
from annex.kubeapi import (
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ClusterApi,
    core_path,
    custom_path,
    error_message,
    error_reason,
    group_path,
    is_not_found,
    status_of,
)
from shared.api.shadowpod import SHADOWPOD


def _run(connection: Connection, scenario: Callable[[ClusterApi], Awaitable[Any]],
         **options: Any) -> Any:
    async def main() -> Any:
        api = ClusterApi(connection, **options)
        try:
            return await scenario(api)
        finally:
            await api.close()
    return asyncio.run(main())


@pytest.fixture
def connection(remote: Any) -> Connection:
    return load_connection(str(remote.kubeconfig))


def _configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": data}


def test_paths_name_collections_objects_and_subresources() -> None:
    assert core_path("pods") == "/api/v1/pods"
    assert core_path("pods", "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert core_path("nodes", name="a/b") == "/api/v1/nodes/a%2Fb"
    assert group_path("coordination.k8s.io", "v1", "leases", "kube-node-lease", "n") == (
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n")
    assert custom_path(SHADOWPOD, "twin") == (
        f"/apis/{SHADOWPOD.group}/{SHADOWPOD.version}/namespaces/twin/{SHADOWPOD.plural}")


def test_an_object_goes_through_create_get_patch_replace_and_delete(
        connection: Connection) -> None:
    name = f"kubeapi-{uuid.uuid4().hex[:8]}"
    path = core_path("configmaps", "default", name)

    async def scenario(api: ClusterApi) -> list[Any]:
        created = await api.create(core_path("configmaps", "default"), _configmap(name, a="1"))
        patched = await api.patch(path, {"data": {"b": "2"}})
        strategic = await api.patch(path, {"data": {"c": "3"}}, STRATEGIC_MERGE_PATCH)
        replaced = await api.replace(path, {**strategic, "data": {"d": "4"}})
        fetched = await api.get(path)
        listed = await api.list(core_path("configmaps", "default"))
        await api.delete(path)
        return [created, patched, strategic, replaced, fetched, listed, await api.find(path),
                await api.delete_if_exists(path)]

    created, patched, strategic, replaced, fetched, listed, found, deleted = _run(
        connection, scenario)
    assert created["data"] == {"a": "1"}
    assert patched["data"] == {"a": "1", "b": "2"}
    assert strategic["data"] == {"a": "1", "b": "2", "c": "3"}
    assert replaced["data"] == fetched["data"] == {"d": "4"}
    assert name in [item["metadata"]["name"] for item in listed]
    assert (found, deleted) == (None, False)


def test_a_refusal_is_an_api_error_with_the_apiservers_status(connection: Connection) -> None:
    name = f"kubeapi-{uuid.uuid4().hex[:8]}"

    async def scenario(api: ClusterApi) -> list[BaseException]:
        errors: list[BaseException] = []
        for call in (lambda: api.get(core_path("configmaps", "default", name)),
                     lambda: api.create(core_path("configmaps", "default"),
                                        _configmap("kube-root-ca.crt"))):
            try:
                await call()
            except ApiError as error:
                errors.append(error)
        return errors

    missing, taken = _run(connection, scenario)
    assert is_not_found(missing) and status_of(missing) == 404
    assert error_reason(missing) == "NotFound"
    assert error_message(missing) == f'configmaps "{name}" not found'
    assert status_of(taken) == 409 and error_reason(taken) == "AlreadyExists"
    assert not is_not_found(taken)


def test_errors_without_an_answer_have_no_status() -> None:
    error = aiohttp.ClientConnectionError("refused")
    assert status_of(error) is None and not is_not_found(error)
    assert error_reason(error) == "ClientConnectionError"
    assert error_message(error) == "refused"


class CountingLimiter(RateLimiter):
    def __init__(self) -> None:
        super().__init__(ClientLimits())
        self.acquired = 0

    async def acquire(self) -> None:
        self.acquired += 1


@pytest.mark.parametrize(("throttle_reads", "expected"), [(True, 3), (False, 1)])
def test_writes_always_wait_for_the_rate_limiter_reads_when_the_component_says(
        connection: Connection, throttle_reads: bool, expected: int) -> None:
    limiter = CountingLimiter()
    name = f"kubeapi-{uuid.uuid4().hex[:8]}"

    async def scenario(api: ClusterApi) -> None:
        await api.get(core_path("namespaces", name="default"))
        await api.find(core_path("configmaps", "default", name))
        await api.delete_if_exists(core_path("configmaps", "default", name))

    _run(connection, scenario, throttle_reads=throttle_reads, limiter=limiter)
    assert limiter.acquired == expected


def test_a_client_serves_only_the_loop_that_first_used_it(connection: Connection) -> None:
    api = ClusterApi(connection)

    async def use() -> None:
        await api.healthy(timeout=10)

    async def use_and_close() -> None:
        await use()
        with pytest.raises(RuntimeError, match="one client per loop"):
            await asyncio.get_running_loop().run_in_executor(None, asyncio.run, use())
        await api.close()

    asyncio.run(use_and_close())
    asyncio.run(use_and_close())  # closed, it opens a new session on the next loop


def test_a_watch_yields_events_from_a_resource_version(connection: Connection) -> None:
    name = f"kubeapi-{uuid.uuid4().hex[:8]}"
    collection = core_path("configmaps", "default")

    async def scenario(api: ClusterApi) -> list[tuple[str, str]]:
        listed = await api.get(collection)
        await api.create(collection, _configmap(name))
        await api.delete(core_path("configmaps", "default", name))
        seen: list[tuple[str, str]] = []
        async for event in api.watch(collection, listed["metadata"]["resourceVersion"]):
            if event["object"]["metadata"].get("name") == name:
                seen.append((event["type"], name))
            if len(seen) == 2:
                break
        return seen

    assert _run(connection, scenario) == [("ADDED", name), ("DELETED", name)]


@pytest.mark.kubesim_only  # kubesim's certificate names 127.0.0.1 and localhost
def test_the_tls_server_name_is_the_name_the_certificate_is_checked_against(
        connection: Connection) -> None:
    assert connection.server.startswith("https://127.0.0.1:")

    async def scenario(api: ClusterApi) -> None:
        await api.healthy(timeout=10)

    _run(dataclasses.replace(connection, tls_server_name="localhost"), scenario)
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        _run(dataclasses.replace(connection, tls_server_name="elsewhere.invalid"), scenario)
