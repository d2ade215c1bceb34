"""The agent's Events on home objects: each distinct warning once per object, forgotten with it."""

from __future__ import annotations

import asyncio
from typing import Any

from home_agent.events import EventRecorder


class Home:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        self.posted.append((body["involvedObject"]["uid"], body["reason"], body["message"]))
        return body


def _pod(uid: str = "uid-1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "team", "name": "web", "uid": uid}}


def _record(recorder: EventRecorder, pod: dict[str, Any], reason: str, message: str) -> None:
    asyncio.run(recorder.record(pod, reason, message))


def _recorder() -> tuple[EventRecorder, Home]:
    home = Home()
    return EventRecorder(home, "home-cluster"), home  # type: ignore[arg-type]


def test_a_warning_is_posted_once_and_again_when_its_message_changes() -> None:
    recorder, home = _recorder()
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    _record(recorder, _pod(), "FailedReflection", "another problem")
    _record(recorder, _pod(), "OtherReason", "unknown preset")
    assert home.posted == [("uid-1", "FailedReflection", "unknown preset"),
                           ("uid-1", "FailedReflection", "another problem"),
                           ("uid-1", "OtherReason", "unknown preset")]


def test_a_new_object_of_the_same_name_is_warned_afresh() -> None:
    recorder, home = _recorder()
    _record(recorder, _pod("uid-1"), "FailedReflection", "unknown preset")
    _record(recorder, _pod("uid-2"), "FailedReflection", "unknown preset")
    assert [uid for uid, _, _ in home.posted] == ["uid-1", "uid-2"]


def test_a_deletion_known_only_by_its_key_forgets_what_was_reported() -> None:
    # A relist reports a deletion it missed with the object's namespace and name only.
    recorder, home = _recorder()
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    recorder.forget("team", "web")
    _record(recorder, _pod(), "FailedReflection", "unknown preset")
    assert len(home.posted) == 2
