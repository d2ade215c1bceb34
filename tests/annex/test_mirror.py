"""The mirror: an object comes back as it was stored (less its managedFields), as a copy of its
own, and the mirror counts what it holds without making every key."""

from __future__ import annotations

from typing import Any

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
