"""annex.listwatch: what the sink of a list+watch sees across pages, watch events and a relist
after the watch's resourceVersion expired."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from annex import listwatch
from annex.api_errors import ApiError, WatchExpired


def configmap(name: str, version: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}",
                         "resourceVersion": version, "labels": labels,
                         "annotations": {"big": "x" * 1000}},
            "data": {"k": "v"}}


class FakeServer:
    """Lists `objects` a page at a time; the first watch delivers `first_watch`, then expires;
    later watches wait forever."""

    def __init__(self, objects: list[dict[str, Any]], first_watch: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.first_watch = first_watch
        self.watches = 0
        self.relisted = asyncio.Event()

    async def request(self, method: str, path: str, body: Any = None, *,
                      query: dict[str, str] | None = None, accept: str = "") -> dict[str, Any]:
        query = query or {}
        start = int(query.get("continue") or 0)
        end = start + int(query["limit"])
        token = str(end) if end < len(self.objects) else ""
        if self.watches and not token:
            self.relisted.set()
        return {"kind": "ConfigMapList", "apiVersion": "v1", "items": [
            dict(obj) for obj in self.objects[start:end]],
            "metadata": {"resourceVersion": "10", "continue": token}}

    async def watch(self, path: str, resource_version: str, timeout_seconds: int = 300,
                    query: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        if self.watches == 1:
            for event in self.first_watch:
                yield event
            raise WatchExpired(resource_version)
        await asyncio.Event().wait()
        yield {}


@pytest.mark.parametrize(("identity", "deleted_metadata"), [
    (listwatch.IDENTITY, {"namespace": "ns", "name": "b", "uid": "uid-b",
                          "resourceVersion": "2", "labels": {"app": "web"}}),
    (("namespace", "name"), {"namespace": "ns", "name": "b"}),  # what the agent keeps
], ids=["default identity", "key only"])
def test_pages_watch_events_and_a_relist_reach_the_sink(
        monkeypatch: pytest.MonkeyPatch, identity: tuple[str, ...],
        deleted_metadata: dict[str, Any]) -> None:
    monkeypatch.setattr(listwatch, "LIST_PAGE", 1)  # every object its own page
    server = FakeServer([configmap("a", "1"), configmap("b", "2", app="web")],
                        [{"type": "ADDED", "object": configmap("c", "11")},
                         {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}])
    seen: list[tuple[str, str, dict[str, Any]]] = []
    listed: list[int] = []

    def on_listed() -> None:
        listed.append(len(seen))
        # b is deleted while no watch runs (then the watch expires); c stays.
        server.objects = [configmap("a", "1"), configmap("c", "11")]

    async def scenario() -> None:
        task = asyncio.create_task(listwatch.list_and_watch(
            server, "/api/v1/configmaps",  # type: ignore[arg-type]
            lambda event_type, obj: seen.append((event_type, obj["metadata"]["name"],
                                                 obj["metadata"])),
            on_listed=on_listed, identity=identity))
        await server.relisted.wait()
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert [(event_type, name) for event_type, name, _ in seen] == [
        ("ADDED", "a"), ("ADDED", "b"),  # the first list, a page each
        ("ADDED", "c"),  # the watch (its bookmark passed nobody)
        ("ADDED", "a"), ("ADDED", "c"),  # the relist after 410
        ("DELETED", "b")]  # what it no longer showed
    assert listed == [2]  # once, when the first list was in the sink
    # enough to find it (and by default to route it); never every annotation
    assert seen[-1][2] == deleted_metadata
    assert seen[0][2]["annotations"]  # listed objects arrive whole, with kind and apiVersion


def test_a_continue_token_expired_while_paging_falls_back_to_one_unpaged_list(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go's pager (FullListIfExpired): on a busy cluster the pages' snapshot can be
    compacted away faster than a list pages through it, and paging again would not finish."""
    monkeypatch.setattr(listwatch, "LIST_PAGE", 1)
    server = FakeServer([configmap("a", "1"), configmap("b", "2"), configmap("c", "3")], [])
    queries: list[dict[str, str]] = []
    paged = server.request

    async def expiring(method: str, path: str, body: Any = None, *,
                       query: dict[str, str] | None = None, accept: str = "") -> dict[str, Any]:
        queries.append(dict(query or {}))
        if (query or {}).get("continue"):
            raise ApiError(410, {"reason": "Expired", "message": "continue parameter is too old"})
        if "limit" not in (query or {}):  # the whole list: b is gone meanwhile
            return {"kind": "ConfigMapList", "apiVersion": "v1",
                    "items": [configmap("a", "1"), configmap("c", "3")],
                    "metadata": {"resourceVersion": "20"}}
        return await paged(method, path, body, query=query)

    server.request = expiring  # type: ignore[method-assign]
    seen: list[str] = []
    version = asyncio.run(listwatch.list_objects(
        server, "/api/v1/configmaps", {"labelSelector": "app=web"},  # type: ignore[arg-type]
        lambda obj: seen.append(obj["metadata"]["name"]), lambda: seen.append("(again)")))
    assert [query.get("continue") for query in queries] == [None, "1", None]
    assert queries[-1] == {"labelSelector": "app=web"}  # the same selection, whole
    # what the pages gave before is told to be given again (b went meanwhile)
    assert seen == ["a", "(again)", "a", "c"]
    assert version == "20"


def test_any_other_list_failure_is_not_papered_over() -> None:
    server = FakeServer([configmap("a", "1")], [])

    async def forbidden(method: str, path: str, body: Any = None, *,
                        query: dict[str, str] | None = None, accept: str = "") -> dict[str, Any]:
        raise ApiError(403, {"reason": "Forbidden"})

    server.request = forbidden  # type: ignore[method-assign]
    with pytest.raises(ApiError):
        asyncio.run(listwatch.list_objects(
            server, "/api/v1/configmaps", {}, lambda _: None, lambda: None))  # type: ignore[arg-type]
