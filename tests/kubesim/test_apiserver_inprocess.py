"""The in-process ApiServer contract controllers build on: alone it records deletions (GC
finalizers, Terminating namespaces) and the garbage collector and namespace controller act on
them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from kubesim.apiserver import ApiServer, User, copy_json
from kubesim.controllers.base import Controller, watch_forever
from kubesim.controllers.garbagecollector import GarbageCollector
from kubesim.controllers.namespace import NamespaceController
from kubesim.errors import StatusError


@pytest.fixture
def api() -> ApiServer:
    return ApiServer()


def kind(api: ApiServer, plural: str, group: str = "", version: str = "v1"):
    found = api.kinds.get(group, version, plural)
    assert found is not None
    return found


async def eventually(condition: Callable[[], Awaitable[bool]], timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def gone(api: ApiServer, plural: str, namespace: str, name: str) -> bool:
    try:
        await api.get(kind(api, plural), namespace, name)
    except StatusError as error:
        return error.code == 404
    return False


@asynccontextmanager
async def running(controller: Controller) -> AsyncIterator[None]:
    task = asyncio.ensure_future(controller.main())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_alone_the_api_server_leaves_a_deleted_namespace_terminating(
        api: ApiServer) -> None:
    """Emptying and finalizing is the namespace controller's work, not the API server's."""
    namespaces, configmaps = kind(api, "namespaces"), kind(api, "configmaps")
    await api.create(namespaces, "", {"metadata": {"name": "n"}})
    await api.create(configmaps, "n", {"metadata": {"name": "c"}})
    terminating = await api.delete(namespaces, "", "n")
    assert terminating["status"]["phase"] == "Terminating"
    await api.drain()
    assert await api.get(configmaps, "n", "c")
    assert (await api.get(namespaces, "", "n"))["spec"]["finalizers"] == ["kubernetes"]


async def test_the_namespace_controller_empties_then_finalizes_a_deleted_namespace(
        api: ApiServer) -> None:
    namespaces, configmaps = kind(api, "namespaces"), kind(api, "configmaps")
    await api.create(namespaces, "", {"metadata": {"name": "n"}})
    await api.create(configmaps, "n", {"metadata": {"name": "held",
                                                   "finalizers": ["example.com/x"]}})
    await api.delete(namespaces, "", "n")
    async with running(NamespaceController(api)):
        async def held_alone() -> bool:
            namespace = await api.get(namespaces, "", "n")
            return bool((await api.get(configmaps, "n", "held"))["metadata"].get(
                "deletionTimestamp")) and len(namespace["status"].get("conditions") or []) == 5

        await eventually(held_alone)
        conditions = {c["type"]: c for c in (await api.get(namespaces, "", "n"))["status"][
            "conditions"]}
        assert [(c["status"], c["reason"], c["message"]) for c in conditions.values()] == [
            ("False", "ResourcesDiscovered", "All resources successfully discovered"),
            ("False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
            ("False", "ContentDeleted",
             "All content successfully deleted, may be waiting on finalization"),
            ("True", "SomeResourcesRemain",
             "Some resources are remaining: configmaps. has 1 resource instances"),
            ("True", "SomeFinalizerRemain",
             "Some finalizers are remaining: example.com/x in 1 resource instances"),
        ]
        assert list(conditions) == [
            "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
            "NamespaceDeletionContentFailure", "NamespaceContentRemaining",
            "NamespaceFinalizersRemaining"]
        await api.patch(configmaps, "n", "held", {"metadata": {"finalizers": None}},
                        "application/merge-patch+json")
        await eventually(lambda: gone(api, "namespaces", "", "n"))


async def test_the_namespace_controller_deletes_content_in_the_background(
        api: ApiServer) -> None:
    """Its deletecollection says propagationPolicy Background, terminating objects included:
    an owner waiting for its dependents stops waiting (here no collector would ever end it)."""
    namespaces, configmaps = kind(api, "namespaces"), kind(api, "configmaps")
    await api.create(namespaces, "", {"metadata": {"name": "n"}})
    owner = await api.create(configmaps, "n", {"metadata": {"name": "owner"}})
    await dependent_of(api, owner, "dep")
    waiting = await api.delete(configmaps, "n", "owner",
                               options={"propagationPolicy": "Foreground"})
    assert waiting["metadata"]["finalizers"] == ["foregroundDeletion"]
    await api.delete(namespaces, "", "n")
    async with running(NamespaceController(api)):
        await eventually(lambda: gone(api, "namespaces", "", "n"))


async def dependent_of(api: ApiServer, owner: dict[str, Any], name: str) -> dict[str, Any]:
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
                 "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
    return await api.create(kind(api, "configmaps"), "n", {"metadata": {
        "name": name, "ownerReferences": [reference]}})


async def test_without_a_collector_no_deletion_waits_for_one(api: ApiServer) -> None:
    """--enable-garbage-collector off: no GC finalizer is set (none would be removed), and
    dependents stay."""
    api.garbage_collection = False
    namespaces, configmaps = kind(api, "namespaces"), kind(api, "configmaps")
    await api.create(namespaces, "", {"metadata": {"name": "n"}})
    for policy in ("Foreground", "Orphan", "Background"):
        owner = await api.create(configmaps, "n", {"metadata": {"name": "owner"}})
        await dependent_of(api, owner, "dep")
        await api.delete(configmaps, "n", "owner", options={"propagationPolicy": policy})
        assert await gone(api, "configmaps", "n", "owner"), policy
        assert (await api.get(configmaps, "n", "dep"))["metadata"]["ownerReferences"]
        await api.delete(configmaps, "n", "dep")


async def test_the_api_server_records_the_propagation_policy_the_collector_acts_on(
        api: ApiServer) -> None:
    namespaces, configmaps = kind(api, "namespaces"), kind(api, "configmaps")
    await api.create(namespaces, "", {"metadata": {"name": "n"}})
    owner = await api.create(configmaps, "n", {"metadata": {"name": "owner"}})
    await dependent_of(api, owner, "dep")
    orphaning = await api.delete(configmaps, "n", "owner", options={"orphanDependents": True})
    assert orphaning["metadata"]["finalizers"] == ["orphan"]
    # a later delete's policy replaces the earlier one
    foreground = await api.delete(configmaps, "n", "owner",
                                  options={"propagationPolicy": "Foreground"})
    assert foreground["metadata"]["finalizers"] == ["foregroundDeletion"]
    async with running(GarbageCollector(api)):
        await eventually(lambda: gone(api, "configmaps", "n", "dep"))
        await eventually(lambda: gone(api, "configmaps", "n", "owner"))
    # namespace storage reads orphanDependents false as Foreground
    deleted = await api.delete(namespaces, "", "n", options={"orphanDependents": False})
    assert deleted["metadata"]["finalizers"] == ["foregroundDeletion"]


async def test_in_process_watches_yield_event_dicts(api: ApiServer) -> None:
    namespaces = kind(api, "namespaces")
    events = api.watch(namespaces, "", timeout_seconds=5)
    await api.create(namespaces, "", {"metadata": {"name": "a"}})
    first = await asyncio.wait_for(anext(events), 5)
    assert first["type"] == "ADDED" and first["object"]["metadata"]["name"] == "a"
    await events.aclose()  # type: ignore[attr-defined]


async def test_the_authorizer_sees_every_request(api: ApiServer) -> None:
    seen = []

    class Deny:
        def authorize(self, attributes):
            seen.append((attributes.verb, attributes.resource, attributes.namespace))
            return False, "no"

    api.authorizer = Deny()
    with pytest.raises(StatusError) as raised:
        await api.list(kind(api, "pods"), "n", user=User("bob"))
    assert raised.value.code == 403
    assert raised.value.message == (
        'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the '
        'namespace "n": no')
    assert seen == [("list", "pods", "n")]


async def test_annex_crds_are_accepted_and_served(api: ApiServer) -> None:
    from pathlib import Path

    import yaml

    crds = kind(api, "customresourcedefinitions", "apiextensions.k8s.io")
    files = sorted((Path(__file__).resolve().parents[2] / "crds").glob("*.yaml"))
    assert files
    for path in files:
        crd = yaml.safe_load(path.read_text())
        await api.create(crds, "", crd)
        served = api.kinds.get(crd["spec"]["group"], crd["spec"]["versions"][0]["name"],
                               crd["spec"]["names"]["plural"])
        assert served is not None, path.name
        current = await api.get(crds, "", crd["metadata"]["name"])
        conditions = {c["type"]: c["status"] for c in current["status"]["conditions"]}
        assert conditions["Established"] == "True", path.name


async def test_mutating_admission_sees_defaulted_objects_before_the_strategy(
        api: ApiServer) -> None:
    seen: list[dict] = []

    class Recorder:
        async def mutate(self, request):
            seen.append(copy_json(request.object))
            request.object["metadata"].setdefault("labels", {})["mutated"] = "yes"
            request.object["status"] = {"phase": "Running"}  # PrepareForCreate resets it
            return request.object

        async def validate(self, request):
            return None

    await api.create(kind(api, "namespaces"), "", {"metadata": {"name": "n"}})
    api.admission = Recorder()
    pod = await api.create(kind(api, "pods"), "n", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "i"}]}})
    assert seen[0]["spec"]["restartPolicy"] == "Always"  # defaulted at decode
    assert "uid" not in seen[0]["metadata"] and "generation" not in seen[0]["metadata"]
    assert pod["metadata"]["labels"] == {"mutated": "yes"}
    assert pod["status"]["phase"] == "Pending"


class _SlowFirstMutation:
    """Admission that holds the first UPDATE until told to go on, so another write lands while
    it runs (as a slow mutating webhook lets happen on a real server)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.held = False

    async def mutate(self, request):  # type: ignore[no-untyped-def]
        if request.operation == "UPDATE" and not self.held:
            self.held = True
            self.entered.set()
            await self.release.wait()
        return request.object

    async def validate(self, request) -> None:  # type: ignore[no-untyped-def]
        return None


async def _race_a_write_through_slow_admission(api: ApiServer, write):  # type: ignore[no-untyped-def]
    configmaps = kind(api, "configmaps")
    await api.create(kind(api, "namespaces"), "", {"metadata": {"name": "n"}})
    created = await api.create(configmaps, "n", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    admission = _SlowFirstMutation()
    api.admission = admission
    slow = asyncio.ensure_future(write(configmaps, created))
    await admission.entered.wait()
    await api.patch(configmaps, "n", "c", {"data": {"b": "2"}}, "application/merge-patch+json")
    admission.release.set()
    return slow


async def test_a_patch_without_a_resource_version_is_retried_on_the_fresh_object(
        api: ApiServer) -> None:
    """GuaranteedUpdate re-applies such a patch to the object written meanwhile: no Conflict,
    and neither write is lost."""
    slow = await _race_a_write_through_slow_admission(
        api, lambda configmaps, _: api.patch(configmaps, "n", "c", {"data": {"c": "3"}},
                                             "application/merge-patch+json"))
    result = await slow
    assert result["data"] == {"a": "1", "b": "2", "c": "3"}


async def test_a_patch_pinning_the_resource_version_conflicts_with_a_concurrent_write(
        api: ApiServer) -> None:
    slow = await _race_a_write_through_slow_admission(
        api, lambda configmaps, created: api.patch(
            configmaps, "n", "c",
            {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
             "data": {"c": "3"}}, "application/merge-patch+json"))
    with pytest.raises(StatusError) as raised:
        await slow
    assert raised.value.code == 409


async def test_an_unconditional_update_is_retried_and_a_pinned_one_conflicts(
        api: ApiServer) -> None:
    def unconditional(configmaps, created):  # type: ignore[no-untyped-def]
        body = copy_json(created)
        del body["metadata"]["resourceVersion"]
        body["data"] = {"a": "updated"}
        return api.update(configmaps, "n", "c", body)

    slow = await _race_a_write_through_slow_admission(api, unconditional)
    assert (await slow)["data"] == {"a": "updated"}

    pinned_api = ApiServer()
    slow = await _race_a_write_through_slow_admission(
        pinned_api, lambda configmaps, created: pinned_api.update(
            configmaps, "n", "c", {**copy_json(created), "data": {"a": "pinned"}}))
    with pytest.raises(StatusError) as raised:
        await slow
    assert raised.value.code == 409


async def test_a_watch_gets_bookmarks_only_once_something_changed_after_its_start(
        api: ApiServer) -> None:
    """cacheWatcher.process sends nothing at or below the version the watch started from, so
    a watch of a store nothing writes gets no bookmark, and one after a write does."""
    configmaps = kind(api, "configmaps")
    await api.create(kind(api, "namespaces"), "", {"metadata": {"name": "quiet"}})
    api.bookmark_interval = 0.05

    async def bookmarks(seconds: float) -> list[str]:
        stream = api.open_watch(configmaps, "quiet", allow_bookmarks=True,
                                timeout_seconds=seconds)
        return [stored.obj["metadata"]["resourceVersion"] async for event, stored in stream
                if event == "BOOKMARK"]

    assert await bookmarks(2.3) == []
    start = api.store.resource_version
    after_write, _ = await asyncio.gather(bookmarks(2.3), api.create(
        configmaps, "quiet", {"metadata": {"name": "a"}}))
    assert after_write and all(int(version) > start for version in after_write)


async def test_a_watch_behind_catches_up_without_the_loop_turning_for_each_event(
        api: ApiServer) -> None:
    """What is queued for a watch goes out at once: kube-apiserver's watchers are a buffer
    behind at most. Waiting for each queued event (a task and its turns through a loop busy
    with everything else) put a loaded kubesim's watchers tens of thousands of events behind,
    and past the watch history."""
    configmaps = kind(api, "configmaps")
    await api.create(kind(api, "namespaces"), "", {"metadata": {"name": "busy"}})
    events = aiter(api.open_watch(configmaps, "busy", timeout_seconds=30))
    for i in range(200):  # nobody reads meanwhile: all 200 are queued
        await api.create(configmaps, "busy", {"metadata": {"name": f"c{i}"}})
    loop, turns, ticking = asyncio.get_running_loop(), 0, True

    def tick() -> None:
        nonlocal turns
        if ticking:
            turns += 1
            loop.call_soon(tick)

    loop.call_soon(tick)
    names = [(await anext(events))[1].obj["metadata"]["name"] for _ in range(200)]
    ticking = False
    assert names == [f"c{i}" for i in range(200)]
    assert turns < 5


async def test_a_watch_listed_again_reports_what_went_meanwhile_as_deleted(
        api: ApiServer) -> None:
    """As client-go's informers (Replace): a controller whose watch failed and listed again
    from scratch must not keep an object deleted meanwhile in its caches."""
    namespaces, configmaps = kind(api, "namespaces"), kind(api, "configmaps")
    await api.create(namespaces, "", {"metadata": {"name": "n"}})
    for name in ("kept", "gone", "trigger"):
        await api.create(configmaps, "n", {"metadata": {"name": name}})
    seen: list[tuple[str, str]] = []
    deletions: list[asyncio.Future[Any]] = []  # held: the loop keeps only weak references

    def on_event(event_type: str, stored: Any) -> None:
        name = stored.obj["metadata"]["name"]
        seen.append((event_type, name))
        if event_type == "MODIFIED" and name == "trigger" and not deletions:
            # A handler's bug: the watch lists again after a pause, "gone" deleted meanwhile.
            deletions.append(asyncio.ensure_future(api.delete(configmaps, "n", "gone")))
            raise RuntimeError("handler failed")

    synced = asyncio.Event()
    task = asyncio.ensure_future(watch_forever(api, configmaps, on_event, synced=synced))
    try:
        await asyncio.wait_for(synced.wait(), 10)
        await api.patch(configmaps, "n", "trigger", {"data": {"a": "b"}},
                        "application/merge-patch+json")

        async def reported() -> bool:
            return ("DELETED", "gone") in seen

        await eventually(reported)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    relisted = seen[seen.index(("MODIFIED", "trigger")) + 1:]
    assert sorted(relisted) == [("ADDED", "kept"), ("ADDED", "trigger"), ("DELETED", "gone")]
    assert relisted[-1] == ("DELETED", "gone")  # once the listing is delivered
