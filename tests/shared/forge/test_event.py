"""shared.forge.event: home copies of remote Events, over generated Events."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.forge.compare import needs_update
from shared.forge.event import (
    copy_digest,
    event_needs_update,
    home_copy_summary,
    home_event,
    home_event_name,
    is_reflectable_event,
    object_reference,
    remote_event_kept,
    remote_event_name,
)
from shared.ownership import is_owned
from shared.wellknown import COPY_DIGEST_ANNOTATION
from tests.shared.forge.objects import EXAMPLES, HOME, REMOTE, configs_skipping, remote_events


@EXAMPLES
@given(remote_events(), configs_skipping({}))
def test_home_events_are_ours_and_attached_to_the_home_object(event: Any, config: Any) -> None:
    home_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "home-uid"},
    }
    before = copy.deepcopy(event)
    home = home_event(event, object_reference(home_pod), config)
    assert event == before
    assert is_owned(home, HOME, REMOTE)
    assert home["metadata"]["namespace"] == "shop"
    assert home["involvedObject"]["uid"] == "home-uid"
    assert home.get("count") == event.get("count")
    assert len(home["metadata"]["name"]) <= 253
    assert home == home_event(event, object_reference(home_pod), config)  # deterministic
    assert is_reflectable_event(event) == (
        event["involvedObject"]["kind"] not in ("Deployment", "ShadowPod"))


HOME_POD = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "home-uid"}}


def _stored(desired: dict[str, Any], server_empties: dict[str, Any]) -> dict[str, Any]:
    """`desired` as the home API server stored it."""
    stored = {**copy.deepcopy(desired), **server_empties}
    stored["metadata"].update(uid="copy-uid", resourceVersion="7",
                              creationTimestamp="2026-11-21T20:00:00Z")
    return stored


def _metadata_only(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as a list of PartialObjectMetadata shows it."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": copy.deepcopy(obj["metadata"])}


SERVER_EMPTIES = st.dictionaries(st.sampled_from(["eventTime", "action", "related", "series",
                                                  "note"]), st.sampled_from([None, "", {}, []]))


@EXAMPLES
@given(remote_events(), configs_skipping({}), SERVER_EMPTIES)
def test_a_home_copys_summary_decides_updates_as_the_whole_copy_does(
        event: Any, config: Any, server_empties: dict[str, Any]) -> None:
    desired = home_event(event, object_reference(HOME_POD), config)
    stored = _stored(desired, server_empties)
    summary = home_copy_summary(stored)
    assert summary["metadata"] == {key: stored["metadata"][key] for key in (
        "namespace", "name", "uid", "resourceVersion")}
    assert set(summary) == {"metadata", "digest"}  # nothing of the Event's content
    assert not event_needs_update(summary, desired)
    assert not needs_update(stored, desired)
    changed = home_event({**event, "count": (event.get("count") or 0) + 1},
                         object_reference(HOME_POD), config)
    assert event_needs_update(summary, changed) and needs_update(stored, changed)
    edited = copy.deepcopy(stored)  # by someone else, our digest left: it tells (docstring)
    edited["metadata"]["labels"]["edited"] = "yes"
    assert not event_needs_update(home_copy_summary(edited), desired)
    del edited["metadata"]["annotations"][COPY_DIGEST_ANNOTATION]  # without it, the content
    assert event_needs_update(home_copy_summary(edited), desired)


@EXAMPLES
@given(remote_events(), configs_skipping({}), SERVER_EMPTIES)
def test_a_copys_metadata_alone_tells_whether_it_needs_rewriting(
        event: Any, config: Any, server_empties: dict[str, Any]) -> None:
    desired = home_event(event, object_reference(HOME_POD), config)
    stored = _stored(desired, server_empties)
    without = copy.deepcopy(stored)
    del without["metadata"]["annotations"][COPY_DIGEST_ANNOTATION]
    # The annotation is the digest of the rest, as the server stored it.
    assert copy_digest(_metadata_only(stored)) == copy_digest(without) == copy_digest(stored)
    summary = home_copy_summary(_metadata_only(stored))
    assert summary == home_copy_summary(stored)
    assert not event_needs_update(summary, desired)
    changed = home_event({**event, "message": f"{event.get('message')} again"},
                         object_reference(HOME_POD), config)
    assert event_needs_update(summary, changed)


@EXAMPLES
@given(remote_events(), configs_skipping({}))
def test_a_copy_made_before_copies_carried_their_digest(event: Any, config: Any) -> None:
    desired = home_event(event, object_reference(HOME_POD), config)
    older = _stored(desired, {})
    del older["metadata"]["annotations"][COPY_DIGEST_ANNOTATION]
    if not older["metadata"]["annotations"]:
        del older["metadata"]["annotations"]
    # Read whole, its content says it is up to date; listed as metadata, it is rewritten once.
    assert not event_needs_update(home_copy_summary(older), desired)
    assert event_needs_update(home_copy_summary(_metadata_only(older)), desired)


@EXAMPLES
@given(remote_events(), configs_skipping({}))
def test_what_is_kept_of_a_remote_event_forges_the_same_home_copy(event: Any,
                                                                   config: Any) -> None:
    event["metadata"].update(uid="remote-uid", resourceVersion="12",
                             creationTimestamp="2026-11-21T20:00:00Z")
    event["involvedObject"]["resourceVersion"] = "7"
    kept = remote_event_kept(event)
    home_pod = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "shop", "uid": "home-uid"}}
    reference = object_reference(home_pod)
    assert home_event(kept, reference, config) == home_event(event, reference, config)
    assert is_reflectable_event(kept) == is_reflectable_event(event)
    assert "uid" not in kept["metadata"] and "resourceVersion" not in kept["metadata"]
    assert "resourceVersion" not in kept["involvedObject"]


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=300))
def test_a_home_copys_name_tells_its_remote_event_unless_shortened(remote_name: str) -> None:
    home_name = home_event_name(remote_name, REMOTE)
    if len(remote_name) <= 253 - len(".01234567"):  # the name and the cluster's suffix fit
        assert remote_event_name(home_name, REMOTE) == remote_name
    else:  # shortened: the reflector keeps these few names itself
        assert remote_event_name(home_name, REMOTE) != remote_name
    assert remote_event_name(home_name, HOME) is None  # another remote cluster's copy
    assert remote_event_name(remote_name, REMOTE) is None
