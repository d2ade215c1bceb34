"""The informer registry: one mirror per resource and side, applied before any route; keyers
feed queues in declaration order; relists route their stale objects as DELETED events. The
echoes of our own writes: recognised once, by the version the answer carried."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from annex.informers import Change, Echoes, Informers


class Recorded:
    def __init__(self) -> None:
        self.keys: list[Any] = []

    def add(self, key: Any, priority: int = 0) -> None:
        self.keys.append(key)


def _obj(name: str, namespace: str = "ns", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": spec}


def test_the_mirror_takes_the_event_before_any_route_and_keyers_feed_their_queue() -> None:
    informers = Informers()
    mirror = informers.watch("home", ("", "v1", "pods"), by="pods")
    queue = Recorded()
    seen: list[dict[str, Any] | None] = []

    def keyer(change: Change) -> Iterable[Hashable]:
        seen.append(mirror.get(change.key))
        return [("pod", *change.key)]

    informers.keys("home", "pods", keyer, queue)
    informers.dispatch("home", "pods", "ADDED", _obj("web"))
    informers.dispatch("home", "pods", "DELETED", _obj("web"))
    assert queue.keys == [("pod", "ns", "web")] * 2
    assert seen == [_obj("web"), None]
    assert informers.mirror("home", "pods") is mirror  # one mirror per resource and side
    assert informers.mirror("remote", "pods") is not mirror


def test_routes_run_in_declaration_order_and_a_comparing_route_sees_the_previous_state() -> None:
    informers = Informers()
    informers.watch("remote", ("annex.io", "v1", "maps"), by="tenant")
    order: list[str] = []
    befores: list[Any] = []
    informers.on("remote", "maps", lambda change: order.append("first"))
    informers.on("remote", "maps", lambda change: (order.append("second"),
                                                   befores.append(change.before)),
                 compares=True)
    informers.dispatch("remote", "maps", "ADDED", _obj("m", size=1))
    informers.dispatch("remote", "maps", "MODIFIED", _obj("m", size=2))
    assert order == ["first", "second"] * 2
    assert befores == [None, _obj("m", size=1)]


def test_what_the_mirror_keeps_is_declared_and_none_keeps_nothing() -> None:
    informers = Informers()
    mirror = informers.watch("remote", ("", "v1", "secrets"), by="twins",
                             keep=lambda obj: obj if obj["spec"].get("ours") else None)
    queue = Recorded()
    informers.keys("remote", "secrets", lambda change: [change.key], queue)
    informers.dispatch("remote", "secrets", "ADDED", _obj("a", ours=True))
    informers.dispatch("remote", "secrets", "ADDED", _obj("b"))
    assert mirror.keys() == [("ns", "a")]
    assert queue.keys == [("ns", "a"), ("ns", "b")]  # routes see every event


def test_events_of_undeclared_resources_are_ignored() -> None:
    informers = Informers()
    informers.mirror("home", "services")  # read by someone, not watched
    informers.dispatch("home", "services", "ADDED", _obj("s"))
    informers.dispatch("home", "nodes", "ADDED", _obj("n"))
    assert informers.mirror("home", "services").keys() == []
    assert informers.watched("home", "") == {}


def test_each_watch_lists_what_is_declared_for_it_with_its_selector() -> None:
    informers = Informers()
    pods, maps, copies = ("", "v1", "pods"), ("annex.io", "v1", "maps"), ("", "v1", "events")
    informers.watch("home", pods, by="node")
    informers.watch("home", copies, by="cluster", label_selector="origin=home")
    informers.watch("home", maps, by="cluster")
    informers.watch("remote", copies, by="twins")
    assert informers.watched("home", "cluster") == {copies: "origin=home", maps: ""}
    assert list(informers.watched("home", "cluster")) == [copies, maps]  # declaration order
    assert informers.watched("home", "node") == {pods: ""}
    assert informers.watched("remote", "twins") == {copies: ""}


def test_a_relist_routes_what_it_no_longer_shows_as_deleted_with_its_last_state() -> None:
    informers = Informers()
    informers.watch("remote", ("annex.io", "v1", "shadowpods"), by="twins")
    informers.watch("remote", ("annex.io", "v1", "maps"), by="tenant")
    changes: list[Change] = []
    informers.on("remote", "shadowpods", changes.append)
    informers.dispatch("remote", "shadowpods", "ADDED", _obj("kept"))
    informers.dispatch("remote", "shadowpods", "ADDED", _obj("gone", phase="Running"))
    informers.dispatch("remote", "maps", "ADDED", _obj("m"))
    changes.clear()
    informers.start_relist("remote", ["shadowpods"])
    informers.dispatch("remote", "shadowpods", "ADDED", _obj("kept"))
    informers.finish_relist("remote", ["shadowpods"])
    assert [(c.event_type, c.key) for c in changes] == [("ADDED", ("ns", "kept")),
                                                       ("DELETED", ("ns", "gone"))]
    assert changes[-1].obj == _obj("gone", phase="Running")
    assert informers.mirror("remote", "shadowpods").keys() == [("ns", "kept")]
    assert informers.mirror("remote", "maps").keys() == [("ns", "m")]  # not relisted


def _at(version: str, event_type: str = "MODIFIED") -> Change:
    obj = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": version}}
    return Change(event_type, obj, ("ns", "a"))


def test_the_first_event_showing_the_answered_version_is_the_echo_and_only_once() -> None:
    echoes = Echoes()
    with echoes.writing("a"):
        echoes.answered("a", _at("7").obj)
    assert echoes.echo("a", _at("7"))
    assert not echoes.echo("a", _at("7", "ADDED"))  # a relist after the echo looks again

    with echoes.writing("a"):
        echoes.answered("a", _at("8").obj)
    assert not echoes.echo("a", _at("9"))  # someone else's change after ours
    assert not echoes.echo("a", _at("8"))  # forgotten with that event


def test_an_event_while_the_write_is_in_flight_is_looked_at_and_its_reconcile_may_settle() -> (
        None):
    echoes = Echoes()
    with echoes.writing("a"):
        assert not echoes.echo("a", _at("7"))  # the echo overtook the answer
        echoes.answered("a", _at("7").obj)
    assert echoes.settled("a", _at("7").obj)  # the reconcile it queued finds our write
    assert not echoes.settled("a", _at("7").obj)  # once


def test_no_answer_a_deletion_or_forgetting_means_no_echo() -> None:
    echoes = Echoes()
    with echoes.writing("a"):
        echoes.answered("a", None)  # e.g. the write failed or answered a Status
    assert not echoes.echo("a", _at("7"))
    with echoes.writing("a"):
        echoes.answered("a", _at("7").obj)
    assert not echoes.echo("a", _at("7", "DELETED"))
    for forget in (lambda: echoes.forget("a"), echoes.forget):
        with echoes.writing("a"):
            echoes.answered("a", _at("8").obj)
        forget()
        assert not echoes.settled("a", _at("8").obj)


def _version_of(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else obj["metadata"].get("resourceVersion")


def test_our_writes_answers_are_read_ahead_of_their_echoes_and_never_over_a_newer_state() -> (
        None):
    informers = Informers()
    informers.watch("home", ("", "v1", "pods"), by="w")
    at = {version: _at(version).obj for version in "1234"}
    informers.dispatch("home", "pods", "ADDED", at["1"])
    informers.answered("home", "pods", "1", at["2"])
    informers.answered("home", "pods", "2", at["3"])  # over our answer, before any echo
    assert _version_of(informers.latest("home", "pods", ("ns", "a"))) == "3"
    informers.dispatch("home", "pods", "MODIFIED", at["2"])  # the first write's echo
    assert _version_of(informers.latest("home", "pods", ("ns", "a"))) == "3"
    informers.dispatch("home", "pods", "MODIFIED", at["4"])  # someone else's, after ours
    assert _version_of(informers.latest("home", "pods", ("ns", "a"))) == "4"
    informers.answered("home", "pods", "4", _at("5").obj)
    informers.dispatch("home", "pods", "MODIFIED", _at("5").obj)  # its echo
    informers.dispatch("home", "pods", "MODIFIED", at["4"])
    assert _version_of(informers.latest("home", "pods", ("ns", "a"))) == "4"  # the mirror's:
    # the answer was let go with its echo (thousands of answers are not kept for ever)

    informers.answered("home", "pods", "4", _at("5").obj)
    informers.dispatch("home", "pods", "DELETED", at["4"])
    assert informers.latest("home", "pods", ("ns", "a")) is None  # a deletion seen wins
    informers.answered("home", "pods", None, _at("6").obj)  # a creation
    assert _version_of(informers.latest("home", "pods", ("ns", "a"))) == "6"


def test_an_answer_whose_echo_came_first_is_not_kept() -> None:
    """Busy, the watch may bring a write's echo before the write's answer. The mirror then
    holds the answer already: kept, it would only wait for the key's next event or look."""
    informers = Informers()
    informers.watch("home", ("", "v1", "pods"), by="w")
    informers.dispatch("home", "pods", "ADDED", _at("4").obj)
    informers.dispatch("home", "pods", "MODIFIED", _at("5").obj)  # the echo, ahead
    informers.answered("home", "pods", "4", _at("5").obj)  # then the answer
    # A probe: the mirror back at the version the write replaced would make `latest` read a
    # kept answer ahead of it.
    informers.dispatch("home", "pods", "MODIFIED", _at("4").obj)
    assert _version_of(informers.latest("home", "pods", ("ns", "a"))) == "4"
