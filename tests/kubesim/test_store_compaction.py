"""kubesim's two horizons, as kube-apiserver has them: a watch resumes only from what the
watch history (the API server's watch cache, bounded by count) still holds, while a list's
continue token lives until etcd's periodic compaction (every 5 minutes, to the revision the
previous one saw) however many writes come meanwhile."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim import store as store_module
from kubesim.errors import StatusError
from kubesim.store import COMPACTION_INTERVAL, Store

CONFIGMAPS = ("", "configmaps")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _write(store: Store, count: int) -> None:
    for index in range(count):
        obj: dict[str, Any] = {"metadata": {"namespace": "ns", "name": f"cm-{index}"}}
        store.put(CONFIGMAPS, obj)


def test_a_busy_store_expires_old_watch_versions_but_not_list_snapshots(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(store_module.time, "monotonic", clock)
    store = Store(history=10)
    _write(store, 5)
    snapshot = store.resource_version  # a list's first page, whose token names it
    _write(store, 50)  # far past the watch history
    with pytest.raises(StatusError):
        store.check_not_compacted(snapshot)  # a watch from there: 410
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
        store.check_not_compacted(1)
