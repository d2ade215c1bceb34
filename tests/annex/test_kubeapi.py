"""annex.kubeapi: the one REST client both components use, against a live API server."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from annex.api_errors import ApiError, error_message, error_reason, is_not_found, status_of
from annex.api_paths import core_path
from annex.kube import ClientLimits, Connection, LiveConnection, RateLimiter, load_connection
from annex.kubeapi import MAX_RETRIES, STRATEGIC_MERGE_PATCH, ClusterApi
from annex.listwatch import list_and_watch
from annex.metrics import RequestCollector
from annex.request_metrics import RequestMetrics
from annex.transport_errors import CertificateRejected, ConnectFailed
from tests.helpers import metric_samples, sample, until


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


def test_every_request_is_counted_by_code_host_method_and_by_verb_and_resource(
        connection: Connection) -> None:
    metrics = RequestMetrics()
    name = f"kubeapi-{uuid.uuid4().hex[:8]}"
    collection = core_path("configmaps", "default")

    async def scenario(api: ClusterApi) -> None:
        listed = await api.get(collection)
        await api.create(collection, _configmap(name))
        await api.find(core_path("configmaps", "default", name + "-missing"))
        async for _ in api.watch(collection, listed["metadata"]["resourceVersion"]):
            break
        await api.delete(core_path("configmaps", "default", name))

    _run(connection, scenario, metrics=metrics)
    host = urlsplit(connection.server).netloc
    assert metrics.snapshot() == {
        ("200", host, "GET", "list", "", "configmaps"): 1,
        ("201", host, "POST", "create", "", "configmaps"): 1,
        ("404", host, "GET", "get", "", "configmaps"): 1,
        ("200", host, "GET", "watch", "", "configmaps"): 1,
        ("200", host, "DELETE", "delete", "", "configmaps"): 1}
    found = _scraped(metrics)
    # client-go's family, as every Kubernetes component exports it ...
    assert sample(found, "rest_client_requests_total", code="200", host=host, method="GET") == 2
    assert sample(found, "rest_client_requests_total", code="404", host=host, method="GET") == 1
    # ... and what the requests did.
    assert sample(found, "annex_rest_client_requests_by_resource_total", code="201", group="",
                  host=host, resource="configmaps", verb="create") == 1
    # How long they took, as client-go's histogram (watches are not timed).
    assert sample(found, "rest_client_request_duration_seconds_count", host=host, verb="GET") == 2
    assert sample(found, "rest_client_request_duration_seconds_bucket", host=host, verb="GET",
                  le="+Inf") == 2
    assert sample(found, "rest_client_request_duration_seconds_count", host=host, verb="POST") == 1


def _scraped(metrics: RequestMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RequestCollector(metrics))
    return metric_samples(generate_latest(registry).decode())


def test_a_duration_on_a_bucket_bound_is_counted_in_that_bucket() -> None:
    metrics = RequestMetrics()
    for seconds in (0.005, 0.0051, 60.0, 61.0):
        metrics.observe("h", "GET", seconds)
    found = _scraped(metrics)

    def bucket(bound: str) -> float | None:
        return sample(found, "rest_client_request_duration_seconds_bucket", host="h", verb="GET",
                      le=bound)

    # Prometheus buckets are "less than or equal to" their bound, cumulative.
    assert [bucket(b) for b in ("0.005", "0.025", "30.0", "60.0", "+Inf")] == [1, 2, 2, 3, 4]


def test_a_request_without_an_answer_is_counted_as_an_error() -> None:
    metrics = RequestMetrics()
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = Connection(server=f"http://127.0.0.1:{port}")

    async def scenario(api: ClusterApi) -> None:
        with pytest.raises(ConnectFailed):
            await api.get(core_path("pods"))
        with pytest.raises(ConnectFailed):
            async for _ in api.watch(core_path("pods"), "0"):
                pass

    _run(unreachable, scenario, metrics=metrics)
    assert metrics.snapshot() == {
        ("<error>", f"127.0.0.1:{port}", "GET", "list", "", "pods"): 1,
        ("<error>", f"127.0.0.1:{port}", "GET", "watch", "", "pods"): 1}


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


def test_a_query_adds_to_the_one_a_path_carries(connection: Connection) -> None:
    label = f"kubeapi-{uuid.uuid4().hex[:8]}"
    collection = core_path("configmaps", "default")
    names = [f"{label}-{index}" for index in range(3)]

    async def scenario(api: ClusterApi) -> tuple[list[str], str, list[str]]:
        for name in names[:2]:
            await api.create(collection, {**_configmap(name),
                                          "metadata": {"name": name, "labels": {"l": label}}})
        try:
            page = await api.request("GET", f"{collection}?labelSelector=l%3D{label}",
                                     query={"limit": 1})
            await api.create(collection, {**_configmap(names[2]),
                                          "metadata": {"name": names[2], "labels": {"l": label}}})
            seen: list[str] = []
            async for event in api.watch(f"{collection}?labelSelector=l%3D{label}",
                                         page["metadata"]["resourceVersion"],
                                         query={"fieldSelector": f"metadata.name={names[2]}"}):
                seen.append(event["object"]["metadata"]["name"])
                break
        finally:
            for name in names:
                await api.delete_if_exists(core_path("configmaps", "default", name))
        return ([item["metadata"]["name"] for item in page["items"]],
                page["metadata"].get("continue", ""), seen)

    items, more, seen = _run(connection, scenario)
    assert len(items) == 1 and items[0].startswith(label) and more  # selected, and one a page
    assert seen == [names[2]]


@pytest.mark.kubesim_only(reason="connects to 127.0.0.1 checking the certificate's name "
                                 "localhost: kubesim listens on loopback")
def test_the_tls_server_name_is_the_name_the_certificate_is_checked_against(
        connection: Connection) -> None:
    assert connection.server.startswith("https://127.0.0.1:")

    async def scenario(api: ClusterApi) -> None:
        await api.healthy(timeout=10)

    _run(dataclasses.replace(connection, tls_server_name="localhost"), scenario)
    with pytest.raises(CertificateRejected):
        _run(dataclasses.replace(connection, tls_server_name="elsewhere.invalid"), scenario)


@pytest.fixture
def two_readers(remote: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """A namespace whose configmaps two ServiceAccounts may read, watch and create, and a
    token for each: (namespace, {account: token})."""
    from kubernetes import client

    namespace = f"kubeapi-{uuid.uuid4().hex[:8]}"
    remote.core.create_namespace({"metadata": {"name": namespace}})
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "readers"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"],
         "verbs": ["get", "list", "watch", "create"]}]})
    tokens = {}
    for account in ("first", "second"):
        remote.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
        tokens[account] = remote.core.create_namespaced_service_account_token(
            account, namespace, {"spec": {}}).status.token
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "readers"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "readers"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}
                     for account in tokens]})
    yield namespace, tokens
    remote.core.delete_namespace(namespace)


class CountingApi(ClusterApi):
    """Counts the lists and the watch requests it serves."""

    lists = 0
    watches = 0

    async def request(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        if method == "GET" and "limit" in (options.get("query") or {}):
            self.lists += 1
        return await super().request(method, path, body, **options)

    async def watch(self, *args: Any, **options: Any) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        async for event in super().watch(*args, **options):
            yield event


def test_replaced_credentials_serve_new_requests_and_watches_resume_with_them(
        remote: Any, connection: Connection, two_readers: tuple[str, dict[str, str]]) -> None:
    namespace, tokens = two_readers
    collection = core_path("configmaps", namespace)

    async def scenario() -> tuple[list[tuple[str, str]], int, int]:
        live = LiveConnection(dataclasses.replace(connection, token=tokens["first"]))
        api, admin = CountingApi(live, throttle_reads=False), ClusterApi(connection)
        seen: list[tuple[str, str]] = []
        listed = asyncio.Event()
        follower = asyncio.create_task(list_and_watch(
            api, collection, lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
            on_listed=listed.set))
        try:
            await asyncio.wait_for(listed.wait(), 20)
            await admin.create(collection, _configmap("before"))
            await until(lambda: ("ADDED", "before") in seen, "the first watch's event", 20)
            lists, watches = api.lists, api.watches

            live.replace(dataclasses.replace(connection, token=tokens["second"]))
            # The first account is gone: only the second's token works from now on.
            await admin.delete(core_path("serviceaccounts", namespace, "first"))
            await until(lambda: api.watches > watches, "the watch re-established", 20)
            await admin.create(collection, _configmap("after"))
            await until(lambda: ("ADDED", "after") in seen, "the new watch's event", 20)
            await api.create(collection, _configmap("written-with-the-new-token"))
            return seen, api.lists - lists, api.watches - watches
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)
            await api.close()
            await admin.close()

    seen, relists, rewatches = asyncio.run(scenario())
    assert relists == 0  # continued from the version it had reached: nothing listed again
    assert rewatches >= 1
    assert [name for _, name in seen if name in ("before", "after")] == ["before", "after"]


@pytest.mark.parametrize(("answers", "outcome", "sent"), [
    # The API server's Priority and Fairness: 429 with Retry-After, then served.
    ([(429, "0"), (429, "0"), (201, None)], 201, 3),
    ([(503, "0"), (201, None)], 201, 2),
    # No Retry-After, or not a status it is honoured on: the caller decides.
    ([(429, None), (201, None)], 429, 1),
    ([(409, "0"), (201, None)], 409, 1),
    # Asked too often: the last answer stands.
    ([(429, "0")] * (MAX_RETRIES + 2), 429, MAX_RETRIES + 1),
])
def test_an_answer_with_retry_after_is_tried_again_after_that_long_as_client_go_does(
        answers: list[tuple[int, str | None]], outcome: int, sent: int) -> None:
    received: list[bytes] = []

    async def handler(request: web.Request) -> web.Response:
        received.append(await request.read())
        status, retry_after = answers[min(len(received), len(answers)) - 1]
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return web.json_response({"kind": "Status", "code": status}, status=status,
                                 headers=headers)

    async def main() -> int:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        api = ClusterApi(Connection(server=f"http://127.0.0.1:{port}"))
        try:
            await api.create(core_path("configmaps", "default"), _configmap("c"))
            return 201
        except ApiError as error:
            return error.status
        finally:
            await api.close()
            await runner.cleanup()

    assert asyncio.run(main()) == outcome
    assert len(received) == sent
    assert len(set(received)) == 1  # the same body every time


def test_clients_are_unthrottled_unless_configured_as_controller_runtime_does() -> None:
    # SIG API Machinery's advice (controller-runtime since v0.21): the API server's Priority
    # and Fairness guards it; a client-side cap is a flag for whoever wants one.
    assert ClientLimits().qps == 0
