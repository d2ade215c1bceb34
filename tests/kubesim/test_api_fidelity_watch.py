"""Watch details controllers notice, as the real watch cache serves them: the resourceVersion a
DELETED event carries, deletion start as MODIFIED, no replay of the starting version, the shape
of BOOKMARK and 410 ERROR events, a clean end at timeoutSeconds, and the python client's watch
helper on namespaced and cluster-wide watches."""

from __future__ import annotations

import re

import pytest

from tests.helpers import wait_for
from tests.kubesim.rest import MERGE, call, long_compacted_version, stream
from tests.kubesim.test_api_watch import a_bookmark, cms, summary, watching

TOO_OLD = re.compile(r"^too old resource version: \d+ \(\d+\)$")


def current_version(cluster, namespace: str) -> str:
    return call(cluster, "GET", cms(namespace))[1]["metadata"]["resourceVersion"]


def test_deletion_start_is_modified_and_deleted_carries_the_deletions_version(home,
                                                                              namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "f", "finalizers": ["x.io/keep"]},
                                        "data": {"k": "v"}})
    with watching(home, cms(namespace), resourceVersion=current_version(home, namespace)) \
            as events:
        call(home, "DELETE", cms(namespace, "f"))
        call(home, "PATCH", cms(namespace, "f"), {"metadata": {"finalizers": None}},
             content_type=MERGE)
        wait_for(lambda: ("DELETED", "f") in summary(events), 10, f"events: {events}")
    started, deleted = [e for e in events if e["type"] != "BOOKMARK"]
    assert started["type"] == "MODIFIED"
    assert started["object"]["metadata"]["deletionTimestamp"]
    assert deleted["object"]["data"] == {"k": "v"}  # the last state ...
    # ... at the deletion's own resourceVersion, later than the last write's
    assert int(deleted["object"]["metadata"]["resourceVersion"]) > int(
        started["object"]["metadata"]["resourceVersion"])
    assert int(current_version(home, namespace)) >= int(
        deleted["object"]["metadata"]["resourceVersion"])


def test_a_watch_from_a_version_does_not_replay_the_write_at_that_version(home,
                                                                          namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})
    changed = call(home, "PATCH", cms(namespace, "a"), {"data": {"n": "1"}},
                   content_type=MERGE)[1]
    call(home, "PATCH", cms(namespace, "a"), {"data": {"n": "2"}}, content_type=MERGE)
    events = list(stream(home, cms(namespace), {
        "resourceVersion": changed["metadata"]["resourceVersion"], "timeoutSeconds": "1"}))
    assert [(e["type"], e["object"]["data"]) for e in events if e["type"] != "BOOKMARK"] == [
        ("MODIFIED", {"n": "2"})]


def test_a_watch_from_a_version_not_reached_yet_sends_only_later_events(home,
                                                                       namespace) -> None:
    ahead = int(current_version(home, namespace)) + 2
    names = ["a", "b", "c", "d"]
    with watching(home, cms(namespace), resourceVersion=str(ahead)) as events:
        for name in names:
            call(home, "POST", cms(namespace), {"metadata": {"name": name}})
        wait_for(lambda: ("ADDED", "d") in summary(events), 10, f"events: {events}")
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events
                if e["type"] != "BOOKMARK"]
    assert versions and all(v > ahead for v in versions), (ahead, summary(events))


def test_a_bookmark_carries_only_its_type_and_resource_version(home, namespace) -> None:
    bookmark = a_bookmark(home, namespace)["object"]
    assert (bookmark["apiVersion"], bookmark["kind"]) == ("v1", "ConfigMap")
    # a typed empty object: Go encodes the zero creationTimestamp as null; nothing else is set
    assert set(bookmark) <= {"apiVersion", "kind", "metadata"}
    assert {k: v for k, v in bookmark["metadata"].items() if v is not None} == {
        "resourceVersion": bookmark["metadata"]["resourceVersion"]}  # no initial-events-end


def test_a_watch_shorter_than_two_seconds_gets_no_bookmark(home, namespace) -> None:
    """The pre-timeout bookmark is due 2 s before the end: for shorter watches it is already
    past, and the watch cache then sends none at all (cacheWatcher.nextBookmarkTime)."""
    events = list(stream(home, cms(namespace), {
        "allowWatchBookmarks": "true", "timeoutSeconds": "1",
        "resourceVersion": current_version(home, namespace)}))
    assert [e for e in events if e["type"] == "BOOKMARK"] == []


def test_an_expired_version_is_an_error_event_with_the_real_status(home, namespace) -> None:
    version = call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})[1][
        "metadata"]["resourceVersion"]
    call(home, "POST", cms(namespace), {"metadata": {"name": "b"}})
    if home.sim is not None:
        home.run(home.sim.api.store.compact)
    else:
        version = long_compacted_version(home)
    events = list(stream(home, cms(namespace), {"resourceVersion": version,
                                                "timeoutSeconds": "5"}))
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert TOO_OLD.match(status.pop("message")), status
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Failure", "reason": "Expired", "code": 410}


def test_a_watch_ends_cleanly_at_its_timeout(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})
    # stream() returns only once the server ends the chunked response without an error
    events = list(stream(home, cms(namespace), {"timeoutSeconds": "1",
                                                "allowWatchBookmarks": "true"}))
    assert ("ADDED", "a") in summary(events)
    assert all(e["type"] != "ERROR" for e in events)


def test_the_python_client_watches_namespaced_and_cluster_wide(home, namespace) -> None:
    from kubernetes import watch

    call(home, "POST", cms(namespace), {"metadata": {"name": "w", "labels": {namespace: "y"}}})
    namespaced = watch.Watch().stream(home.core.list_namespaced_config_map, namespace,
                                      label_selector=f"{namespace}=y", timeout_seconds=1,
                                      allow_watch_bookmarks=True)
    cluster_wide = watch.Watch().stream(home.core.list_config_map_for_all_namespaces,
                                        label_selector=f"{namespace}=y", timeout_seconds=1,
                                        allow_watch_bookmarks=True)
    for events in (namespaced, cluster_wide):
        seen = [(e["type"], e["object"].metadata.namespace, e["object"].metadata.name)
                for e in events if e["type"] != "BOOKMARK"]
        assert seen == [("ADDED", namespace, "w")]


@pytest.mark.since("1.32", "WatchList (sendInitialEvents) is on by default")
def test_send_initial_events_ends_the_backlog_with_an_annotated_bookmark(home,
                                                                         namespace) -> None:
    for name in ("a", "b"):
        call(home, "POST", cms(namespace), {"metadata": {"name": name}})
    query = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
             "allowWatchBookmarks": "true", "timeoutSeconds": "3"}
    events = list(stream(home, cms(namespace), query))
    if events and events[0]["type"] == "ERROR":  # a real server without the WatchList gate
        pytest.skip(events[0]["object"].get("message", "WatchList disabled"))
    initial = [e for e in events if e["object"]["metadata"].get("name") != "kube-root-ca.crt"]
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in initial[:3]] == [
        ("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None)]
    assert initial[2]["object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"}


@pytest.mark.since("1.32", "WatchList (sendInitialEvents) is on by default")
def test_send_initial_events_needs_resource_version_match_not_older_than(home,
                                                                         namespace) -> None:
    status, body = call(home, "GET", cms(namespace), query={
        "watch": "true", "sendInitialEvents": "true", "allowWatchBookmarks": "true"})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith(
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
