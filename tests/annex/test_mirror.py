"""The mirror: an object comes back as it was stored (less its managedFields), as a copy of its
own, and the mirror counts what it holds without making every key; a relist forgets what it did
not show. Objects are compressed once they have settled (newer changes pushed them out of the
hot set), similar objects to a fraction of their size."""

from __future__ import annotations

from typing import Any

import msgpack
import orjson
import pytest
import zstandard

from annex import mirror as mirror_module
from annex.mirror import Mirror


def _pod(name: str, namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}",
                         "labels": {"app": "web", "tier": "ü"},
                         "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"port": 80}]}],
                     "priority": -1, "enableServiceLinks": False, "overhead": None},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "ratio": 0.5}}


def test_an_object_comes_back_as_stored_without_its_managed_fields() -> None:
    mirror = Mirror()
    for name in ("a", "b"):  # the first is the compression dictionary of the others
        mirror.apply("ADDED", _pod(name))
    expected = _pod("b")
    del expected["metadata"]["managedFields"]
    assert mirror.get(("ns", "b")) == expected


def test_readers_get_copies_of_their_own() -> None:
    mirror = Mirror()
    mirror.apply("ADDED", _pod("a"))
    first = mirror.get(("ns", "a"))
    assert first is not None
    first["metadata"]["labels"]["app"] = "changed"
    assert mirror.get(("ns", "a"))["metadata"]["labels"]["app"] == "web"  # type: ignore[index]


def test_size_counts_what_the_mirror_holds_across_namespaces() -> None:
    mirror = Mirror()
    for name, namespace in (("a", "x"), ("b", "x"), ("a", "y")):
        mirror.apply("ADDED", _pod(name, namespace))
    mirror.apply("MODIFIED", _pod("a", "x"))
    assert mirror.size() == 3 == len(mirror.keys())
    mirror.apply("DELETED", _pod("a", "y"))
    assert mirror.size() == 2


_ZstdCompressor = zstandard.ZstdCompressor


class _CountingCompressor:
    """zstd's compressor, recording what it compresses and into what, and running `during`
    (once) in the middle of the next compression."""

    compressed: list[bytes] = []
    into: list[bytes] = []
    during: list[Any] = []

    def __init__(self, **kwargs: Any) -> None:
        self._compressor = _ZstdCompressor(**kwargs)

    def compress(self, data: bytes) -> bytes:
        _CountingCompressor.compressed.append(data)
        while _CountingCompressor.during:
            _CountingCompressor.during.pop()()
        _CountingCompressor.into.append(self._compressor.compress(data))
        return _CountingCompressor.into[-1]


@pytest.fixture
def compressions(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What the mirrors compress; their hot sets hold three pods."""
    largest = _pod("a")
    largest["status"]["phase"] = "Succeeded"
    del largest["metadata"]["managedFields"]  # as the mirror keeps it
    monkeypatch.setattr(mirror_module, "HOT_BYTES", 3 * len(orjson.dumps(largest)))
    monkeypatch.setattr(zstandard, "ZstdCompressor", _CountingCompressor)
    _CountingCompressor.compressed, _CountingCompressor.into = [], []
    _CountingCompressor.during = []
    return _CountingCompressor.compressed


def test_an_object_changing_is_compressed_once_it_has_settled(
        compressions: list[bytes]) -> None:
    mirror = Mirror()
    for phase in ("Pending", "Running", "Running", "Succeeded"):
        pod = _pod("a")
        pod["status"]["phase"] = phase
        mirror.apply("MODIFIED", pod)
        assert mirror.get(("ns", "a"))["status"]["phase"] == phase  # type: ignore[index]
    assert compressions == []
    for name in ("b", "c", "d"):  # newer changes push it out
        mirror.apply("ADDED", _pod(name))
    assert [orjson.loads(data)["metadata"]["name"] for data in compressions] == ["a"]
    assert mirror.get(("ns", "a"))["status"]["phase"] == "Succeeded"  # type: ignore[index]
    assert mirror.size() == 4
    assert sorted(pod["metadata"]["name"] for pod in mirror.values()) == list("abcd")


def test_a_change_made_while_its_older_state_is_compressed_is_kept(
        compressions: list[bytes]) -> None:
    mirror = Mirror()
    for name in ("a", "b", "c"):
        mirror.apply("ADDED", _pod(name))
    newer = _pod("a")
    newer["status"]["phase"] = "Failed"
    _CountingCompressor.during.append(lambda: mirror.apply("MODIFIED", newer))
    mirror.apply("ADDED", _pod("d"))  # pushes the first "a" out, "a" changes meanwhile
    assert orjson.loads(compressions[0])["status"]["phase"] == "Running"
    assert mirror.get(("ns", "a"))["status"]["phase"] == "Failed"  # type: ignore[index]


def test_objects_deleted_or_not_relisted_leave_the_hot_set(compressions: list[bytes]) -> None:
    mirror = Mirror()
    for name in ("a", "b"):
        mirror.apply("ADDED", _pod(name))
    mirror.apply("DELETED", _pod("a"))
    mirror.start_relist()
    mirror.apply("ADDED", _pod("c"))
    assert [key for key, _ in mirror.end_relist().items()] == [("ns", "b")]
    for name in ("d", "e"):  # "c" stays hot: the deleted ones no longer count
        mirror.apply("ADDED", _pod(name))
    assert compressions == []
    mirror.apply("ADDED", _pod("f"))
    assert [orjson.loads(data)["metadata"]["name"] for data in compressions] == ["c"]
    assert sorted(key[1] for key in mirror.keys()) == ["c", "d", "e", "f"]


def test_a_mirror_gives_back_exactly_what_it_took_and_keeps_similar_objects_small(
        compressions: list[bytes]) -> None:
    mirror = Mirror()

    def pod(index: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": "shop", "name": f"web-{index}", "uid": f"uid-{index}",
                             "labels": {"app": "web", "pod-template-hash": "7d9c"},
                             "managedFields": [{"manager": "kubectl"}]},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.25",
                                         "ports": [{"containerPort": 80 + index % 3}]}],
                         "nodeName": "liqo-remote", "tolerations": [{"operator": "Exists"}]},
                "status": {"phase": "Running", "podIP": f"10.0.{index // 250}.{index % 250}",
                           "conditions": [{"type": t, "status": "True"} for t in (
                               "Initialized", "Ready", "ContainersReady", "PodScheduled")]}}

    for index in range(100):
        mirror.apply("ADDED", pod(index))
    mirror.apply("ADDED", {"metadata": {"namespace": "", "name": "odd"}, "x": [1, 2.5, None]})
    for index in (0, 57, 99):
        expected = pod(index)
        del expected["metadata"]["managedFields"]  # never kept
        assert mirror.get(("shop", f"web-{index}")) == expected
    assert mirror.get(("", "odd")) == {"metadata": {"namespace": "", "name": "odd"},
                                       "x": [1, 2.5, None]}
    # all but the hot set's pods were compressed, each into a small part of its size
    settled = {orjson.loads(data)["metadata"]["name"]: len(into) for data, into in zip(
        compressions, _CountingCompressor.into, strict=True)}
    pods = [index for index in range(100) if f"web-{index}" in settled]
    assert len(pods) >= 90
    assert (sum(settled[f"web-{index}"] for index in pods)
            < sum(len(msgpack.packb(pod(index))) for index in pods) / 4)


def test_a_relist_forgets_what_was_deleted_while_nobody_watched() -> None:
    mirror = Mirror()
    for name in ("kept", "gone"):
        mirror.apply(None, {"metadata": {"namespace": "ns", "name": name}})
    mirror.start_relist()
    mirror.apply("INDEXED", {"metadata": {"namespace": "ns", "name": "kept"}})
    assert mirror.finish_relist() == [("ns", "gone")]
    assert mirror.keys() == [("ns", "kept")]
