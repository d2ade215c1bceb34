"""The Event reflector's copies at home as it knows them (`home_agent.reflection.event_copies`):
each as its summary, all a write over it needs."""

from __future__ import annotations

import pytest

from home_agent.reflection.event_copies import Copies


@pytest.mark.parametrize("metadata", [
    {"uid": "copy-uid", "resourceVersion": "12"},
    {"uid": "copy-uid", "resourceVersion": "opaque version"},
    {},  # not told (a made-up summary)
])
def test_the_copies_are_kept_as_their_summaries(metadata: dict[str, str]) -> None:
    copies = Copies()
    summary = {"metadata": {"namespace": "app", "name": "web.1", **metadata},
               "digest": "0f" * 32}
    copies.set(("app", "web.1"), summary)
    copies.set(("app", "web.2"), {**summary, "metadata": {
        **summary["metadata"], "name": "web.2"}})
    assert copies.get(("app", "web.1")) == summary
    assert (copies.size(), sorted(copies.keys())) == (2, [("app", "web.1"), ("app", "web.2")])
    copies.set(("app", "web.1"), None)
    copies.set(("app", "web.2"), None)
    assert (copies.get(("app", "web.1")), copies.size(), copies.keys()) == (None, 0, [])
