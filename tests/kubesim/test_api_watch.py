"""Watches: from a resourceVersion, initial state, 410 for compacted versions, bookmarks,
timeouts, the legacy /watch paths, and selections that objects enter and leave."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.helpers import wait_for
from tests.kubesim.rest import MERGE, call, long_compacted_version, stream

ROOT_CA = "kube-root-ca.crt"


def cms(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def summary(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events
            if e["type"] != "BOOKMARK" and e["object"]["metadata"].get("name") != ROOT_CA]


@contextmanager
def watching(cluster, path: str, **query: str) -> Iterator[list[dict]]:
    """Collect a watch's events on a thread while the test writes."""
    events: list[dict] = []
    query.setdefault("timeoutSeconds", "10")
    thread = threading.Thread(target=lambda: events.extend(stream(cluster, path, query)),
                              daemon=True)
    thread.start()
    yield events


def test_a_watch_from_a_resource_version_sees_only_later_events(home, namespace) -> None:
    first = call(home, "POST", cms(namespace), {"metadata": {"name": "before"}})[1]
    call(home, "POST", cms(namespace), {"metadata": {"name": "after"}})
    events = list(stream(home, cms(namespace), {
        "resourceVersion": first["metadata"]["resourceVersion"], "timeoutSeconds": "1"}))
    assert summary(events) == [("ADDED", "after")]
    assert events[0]["object"]["kind"] == "ConfigMap"  # watch objects carry their type


@pytest.mark.parametrize("version", ["0", None])
def test_a_watch_from_0_or_none_starts_with_the_current_state(home, namespace,
                                                              version: str | None) -> None:
    for name in ("a", "b"):
        call(home, "POST", cms(namespace), {"metadata": {"name": name}})
    query = {"timeoutSeconds": "1"} | ({"resourceVersion": version} if version else {})
    assert sorted(summary(list(stream(home, cms(namespace), query)))) == [
        ("ADDED", "a"), ("ADDED", "b")]


def test_a_compacted_resource_version_is_an_expired_error_event(home, namespace) -> None:
    old = call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})[1]
    version = old["metadata"]["resourceVersion"]
    call(home, "POST", cms(namespace), {"metadata": {"name": "b"}})  # history moves past it
    if home.sim is not None:
        home.run(home.sim.api.store.compact)
    else:
        version = long_compacted_version(home)
    events = list(stream(home, cms(namespace), {"resourceVersion": version,
                                                "timeoutSeconds": "5"}))
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith("too old resource version: ")


def collection_version(cluster, namespace: str) -> str:
    """The namespace's ConfigMaps' list version: a watch from it sees every later write."""
    return call(cluster, "GET", cms(namespace))[1]["metadata"]["resourceVersion"]


def changed_since(cluster, namespace: str) -> str:
    """A version of the namespace's ConfigMaps with one write after it. kube-apiserver sends a
    watch bookmarks only once its watch cache has seen an event of that resource newer than
    the version the watch started from: a watch of a resource nothing writes gets none."""
    start = collection_version(cluster, namespace)
    call(cluster, "POST", cms(namespace), {"metadata": {"generateName": "w-"}})
    return start


def a_bookmark(cluster, namespace: str) -> dict:
    """The first bookmark of a 3 s watch of the namespace's ConfigMaps with bookmarks allowed.
    kube-apiserver promises none (its watch cache sends the one due 2 s before the timeout on a
    ticker of about a second, which a loaded server can miss), so watches are repeated until
    one has it."""
    def bookmark_watched() -> dict | None:
        events = list(stream(cluster, cms(namespace), {
            "allowWatchBookmarks": "true", "timeoutSeconds": "3",
            "resourceVersion": changed_since(cluster, namespace)}))
        return next((e for e in events if e["type"] == "BOOKMARK"), None)

    return wait_for(bookmark_watched, 30, "no watch got a bookmark")


def test_bookmarks_come_when_allowed_at_least_before_the_timeout(home, namespace) -> None:
    bookmark = a_bookmark(home, namespace)
    assert bookmark["object"]["kind"] == "ConfigMap"
    assert bookmark["object"]["metadata"]["resourceVersion"].isdigit()


def test_no_bookmarks_unless_asked(home, namespace) -> None:
    events = list(stream(home, cms(namespace), {"timeoutSeconds": "3"}))
    assert not [e for e in events if e["type"] == "BOOKMARK"]


@pytest.mark.kubesim_only(reason="sets the bookmark period to 0.3 s (api.bookmark_interval): "
                                 "kube-apiserver's is a minute, not configurable")
def test_bookmarks_repeat_periodically(home, namespace) -> None:
    home.sim.api.bookmark_interval = 0.3
    try:
        events = list(stream(home, cms(namespace), {
            "allowWatchBookmarks": "true", "timeoutSeconds": "3",
            "resourceVersion": changed_since(home, namespace)}))
    finally:
        home.sim.api.bookmark_interval = 60.0
    assert len([e for e in events if e["type"] == "BOOKMARK"]) >= 3


def test_the_legacy_watch_path_streams_the_same_events(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})
    path = f"/api/v1/watch/namespaces/{namespace}/configmaps"
    events = list(stream(home, path, {"timeoutSeconds": "1"}))
    assert ("ADDED", "a") in summary(events)


def test_live_events_follow_writes(home, namespace) -> None:
    # From the version before the writes: the watch's thread may connect after some of them,
    # and a watch from no version starts with the current state (one ADDED for them all).
    since = collection_version(home, namespace)
    with watching(home, cms(namespace), timeoutSeconds="10", resourceVersion=since) as events:
        wait_for(lambda: call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})[0] == 201)
        call(home, "PATCH", cms(namespace, "a"), {"data": {"k": "v"}}, content_type=MERGE)
        call(home, "DELETE", cms(namespace, "a"))
        wait_for(lambda: ("DELETED", "a") in summary(events), 10, f"events: {events}")
    assert [t for t, n in summary(events) if n == "a"] == ["ADDED", "MODIFIED", "DELETED"]


def test_objects_entering_and_leaving_a_selection_are_added_and_deleted(home,
                                                                        namespace) -> None:
    current = collection_version(home, namespace)
    with watching(home, cms(namespace), labelSelector="app=x", resourceVersion=current) \
            as events:
        call(home, "POST", cms(namespace), {"metadata": {"name": "c"}})
        call(home, "PATCH", cms(namespace, "c"), {"metadata": {"labels": {"app": "x"}}},
             content_type=MERGE)
        call(home, "PATCH", cms(namespace, "c"), {"data": {"k": "v"}}, content_type=MERGE)
        call(home, "PATCH", cms(namespace, "c"), {"metadata": {"labels": {"app": "y"}}},
             content_type=MERGE)
        call(home, "DELETE", cms(namespace, "c"))
        wait_for(lambda: ("DELETED", "c") in summary(events), 10, f"events: {events}")
    assert summary(events) == [("ADDED", "c"), ("MODIFIED", "c"), ("DELETED", "c")]
    leaving = events[-1]["object"]
    assert leaving["metadata"]["labels"] == {"app": "x"}  # the last state still selected


def test_the_python_client_watch_helper_resumes_and_filters(home, namespace) -> None:
    from kubernetes import watch

    call(home, "POST", cms(namespace), {"metadata": {"name": "w", "labels": {"app": "z"}}})
    seen = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        home.core.list_namespaced_config_map, namespace, label_selector="app=z",
        timeout_seconds=1)]
    assert seen == [("ADDED", "w")]
