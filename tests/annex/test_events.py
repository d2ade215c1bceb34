"""The Events both components post (annex.events), against a recording fake API server:
deduplicated and aggregated as client-go's EventRecorder does, in bounded memory."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

from annex.api_errors import ApiError
from annex.events import (
    AGGREGATE_PREFIX,
    SPAM_BURST,
    SPAM_INTERVAL,
    EventCorrelator,
    EventRecorder,
)
from annex.kube import load_connection
from annex.kubeapi import ClusterApi
from tests.conftest import ClusterHandle


class Api:
    """Stores Events as an API server does (a merge patch updates the named one; 404 when it is
    gone) and records each write."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.versions = itertools.count(1)

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        name = body["metadata"]["name"]
        self.writes.append(("create", name))
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self.versions))
        self.events[name] = stored
        return copy.deepcopy(stored)

    async def patch(self, path: str, patch: dict[str, Any]) -> Any:
        name = path.rsplit("/", 1)[1]
        self.writes.append(("patch", name))
        if name not in self.events:
            raise ApiError(404, {"reason": "NotFound"})
        self.events[name].update(patch)
        return copy.deepcopy(self.events[name])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _pod(name: str = "web", uid: str = "uid-1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "team", "name": name, "uid": uid}}


def _recorder(cache_size: int = 64) -> tuple[EventRecorder, Api, Clock]:
    api, clock = Api(), Clock()
    recorder = EventRecorder(api, "annex-test", "home-cluster",  # type: ignore[arg-type]
                             correlator=EventCorrelator(cache_size, clock))
    return recorder, api, clock


def _record(recorder: EventRecorder, obj: dict[str, Any], reason: str, message: str) -> None:
    asyncio.run(recorder.record(obj, reason, message))


def test_an_event_names_its_object_component_and_instance() -> None:
    recorder, api, _ = _recorder()
    _record(recorder, {**_pod(), "metadata": {**_pod()["metadata"], "resourceVersion": "7"}},
            "FailedReflection", "unknown preset")
    (event,) = api.events.values()
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "team",
                                       "name": "web", "uid": "uid-1", "resourceVersion": "7"}
    assert event["metadata"]["namespace"] == "team"
    assert event["metadata"]["name"].startswith("web.")
    assert (event["source"], event["reportingComponent"], event["reportingInstance"]) == (
        {"component": "annex-test"}, "annex-test", "home-cluster")
    assert (event["type"], event["reason"], event["message"], event["count"]) == (
        "Warning", "FailedReflection", "unknown preset", 1)


def test_a_repeat_counts_on_the_event_posted_before() -> None:
    recorder, api, _ = _recorder()
    for _ in range(3):
        _record(recorder, _pod(), "FailedReflection", "unknown preset")
    (name,) = api.events
    assert api.writes == [("create", name), ("patch", name), ("patch", name)]
    event = api.events[name]
    assert event["count"] == 3
    assert event["firstTimestamp"] <= event["lastTimestamp"]


def test_a_new_message_reason_or_object_is_an_event_of_its_own() -> None:
    recorder, api, _ = _recorder()
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    _record(recorder, _pod(), "FailedReflection", "another problem")
    _record(recorder, _pod(), "OtherReason", "unknown preset")
    _record(recorder, _pod(uid="uid-2"), "FailedReflection", "unknown preset")  # same name
    _record(recorder, _pod(), "FailedReflection", "unknown preset")  # the first, again
    assert [write for write, _ in api.writes] == ["create"] * 4 + ["patch"]
    assert sorted((e["involvedObject"]["uid"], e["reason"], e["message"], e["count"])
                  for e in api.events.values()) == [
        ("uid-1", "FailedReflection", "another problem", 1),
        ("uid-1", "FailedReflection", "unknown preset", 2),
        ("uid-1", "OtherReason", "unknown preset", 1),
        ("uid-2", "FailedReflection", "unknown preset", 1)]


def test_an_event_deleted_meanwhile_is_posted_again_with_its_count() -> None:
    recorder, api, _ = _recorder()
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    (name,) = api.events
    del api.events[name]  # the API server's TTL
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    assert api.writes == [("create", name), ("patch", name), ("create", name)]
    assert api.events[name]["count"] == 2


def test_the_tenth_distinct_message_of_a_reason_is_combined_and_later_ones_update_it() -> None:
    recorder, api, clock = _recorder()
    for index in range(12):
        _record(recorder, _pod(), "FailedReflection", f"problem {index}")
        clock.now += 1
    messages = sorted(e["message"] for e in api.events.values())
    assert messages == sorted([f"problem {index}" for index in range(9)]
                              + [f"{AGGREGATE_PREFIX}problem 11"])
    combined = next(e for e in api.events.values() if e["message"].startswith(AGGREGATE_PREFIX))
    assert combined["count"] == 3  # the 10th, 11th and 12th


def test_distinct_messages_are_counted_afresh_after_ten_quiet_minutes() -> None:
    recorder, api, clock = _recorder()
    for index in range(9):
        _record(recorder, _pod(), "FailedReflection", f"problem {index}")
    clock.now += 601
    _record(recorder, _pod(), "FailedReflection", "problem 9")
    assert not any(e["message"].startswith(AGGREGATE_PREFIX) for e in api.events.values())


def test_an_object_gets_a_burst_of_events_then_one_per_interval() -> None:
    recorder, api, clock = _recorder()
    for index in range(SPAM_BURST + 5):
        _record(recorder, _pod(), f"Reason{index}", "problem")
    assert len(api.writes) == SPAM_BURST
    _record(recorder, _pod(name="db", uid="uid-db"), "Reason0", "problem")  # another object
    assert len(api.writes) == SPAM_BURST + 1
    clock.now += SPAM_INTERVAL
    _record(recorder, _pod(), "Reason99", "problem")
    _record(recorder, _pod(), "Reason98", "problem")
    assert len(api.writes) == SPAM_BURST + 2  # one earned back


def test_memory_is_bounded_by_the_cache_size_whatever_the_number_of_objects() -> None:
    recorder, api, _ = _recorder(cache_size=16)
    for index in range(500):
        _record(recorder, _pod(name=f"pod-{index}", uid=f"uid-{index}"), "Failed", "problem")
        assert recorder.correlator.entries() <= 3 * 16
    assert len(api.events) == 500
    # What the cache dropped is posted afresh; what it kept is counted.
    _record(recorder, _pod(name="pod-0", uid="uid-0"), "Failed", "problem")
    _record(recorder, _pod(name="pod-499", uid="uid-499"), "Failed", "problem")
    assert [write for write, _ in api.writes[-2:]] == ["create", "patch"]


def test_a_failed_post_is_a_log_line_not_the_caller_s_failure(caplog: Any) -> None:
    recorder, api, _ = _recorder()

    async def refuse(path: str, body: dict[str, Any]) -> Any:
        raise ApiError(403, {"message": "forbidden"})

    api.create = refuse  # type: ignore[method-assign]
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    assert "could not record event FailedReflection on team/web: forbidden" in caplog.text


def test_a_repeat_is_counted_by_the_api_server(home: ClusterHandle, namespace: str) -> None:
    """The merge patch of a repeat is one the API server takes (count, lastTimestamp)."""
    config_map = home.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}})
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"namespace": namespace, "name": "settings",
                        "uid": config_map.metadata.uid}}

    async def twice() -> None:
        api = ClusterApi(load_connection(str(home.kubeconfig)))
        try:
            recorder = EventRecorder(api, "annex-test")
            for _ in range(2):
                await recorder.record(obj, "Checked", "looked at twice", "Normal")
        finally:
            await api.close()

    asyncio.run(twice())
    (event,) = [e for e in home.core.list_namespaced_event(namespace).items
                if e.involved_object.uid == config_map.metadata.uid]
    assert (event.reason, event.count, event.type) == ("Checked", 2, "Normal")
    assert event.first_timestamp <= event.last_timestamp
