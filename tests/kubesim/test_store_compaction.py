"""kubesim's two horizons, as kube-apiserver has them: a watch resumes only from what its
resource's watch history (the API server's watch cache: at least 75 s of events, between 100
and 102,400) still holds, while a list's continue token lives until etcd's periodic compaction
(every 5 minutes, to the revision the previous one saw) however many writes come meanwhile."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import store as store_module
from kubesim.errors import StatusError
from kubesim.store import COMPACTION_INTERVAL, Store

CONFIGMAPS = ("", "configmaps")
SECRETS = ("", "secrets")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _write(store: Store, count: int, kind: tuple[str, str] = CONFIGMAPS, first: int = 0) -> None:
    for index in range(first, first + count):
        obj: dict[str, Any] = {"metadata": {"namespace": "ns", "name": f"{kind[1]}-{index}"}}
        store.put(kind, obj)


def test_a_busy_store_expires_old_watch_versions_but_not_list_snapshots(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(store_module.time, "monotonic", clock)
    store = Store(history=(10, 10))
    _write(store, 5)
    snapshot = store.resource_version  # a list's first page, whose token names it
    _write(store, 50)  # far past the watch history
    with pytest.raises(StatusError):
        store.events_since(CONFIGMAPS, snapshot)  # a watch from there: 410
    assert store.compacted_resource_version < snapshot  # the token: still good

    clock.now += COMPACTION_INTERVAL  # the first compaction: to what the store began with
    assert store.compacted_resource_version < snapshot
    clock.now += COMPACTION_INTERVAL  # the next: to the revision the previous one saw
    assert store.compacted_resource_version >= snapshot


def test_compact_forgets_both_at_once() -> None:
    store = Store()
    _write(store, 3)
    store.compact()
    assert store.compacted_resource_version == store.resource_version
    with pytest.raises(StatusError):
        store.events_since(CONFIGMAPS, 1)


def test_each_resource_keeps_its_own_history(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module.time, "monotonic", Clock())
    store = Store(history=(10, 10))
    _write(store, 1)
    quiet = store.resource_version
    _write(store, 1000, SECRETS)  # another resource's traffic ...
    assert [event.rv for event in store.events_since(CONFIGMAPS, quiet - 1)] == [quiet]
    _write(store, 3, first=1)  # ... and its own, within its bound: a watch resumes
    assert len(list(store.events_since(CONFIGMAPS, quiet))) == 3


def test_a_busy_resource_keeps_75_seconds_of_events_up_to_the_upper_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(store_module.time, "monotonic", clock)
    store = Store(history=(100, 1000))
    start = store.resource_version
    _write(store, 800)  # within 75 s: the capacity doubles as it fills
    assert len(list(store.events_since(CONFIGMAPS, start))) == 800
    _write(store, 1200, first=800)  # past the upper bound: the oldest go
    with pytest.raises(StatusError) as refused:
        store.events_since(CONFIGMAPS, start)  # raised at once, not when iterated
    assert refused.value.to_status()["reason"] == "Expired"
    assert len(list(store.events_since(CONFIGMAPS, store.resource_version - 1000))) == 1000


def test_a_history_whose_newest_quarter_is_older_than_75_seconds_halves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(store_module.time, "monotonic", clock)
    store = Store(history=(100, 1000))
    _write(store, 400)  # a burst: the capacity grows to 800 (at the next event)
    for index in range(400, 1400):  # then one a second: once full, it halves to 400, then
        clock.now += 1               # 200, whose newest quarter is 50 s old: it stays
        _write(store, 1, first=index)
    kept = store.resource_version - 200
    assert len(list(store.events_since(CONFIGMAPS, kept))) == 200
    with pytest.raises(StatusError):
        store.events_since(CONFIGMAPS, kept - 2)
