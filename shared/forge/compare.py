"""Comparing a remote object with the desired one: does it need a write, which body to
write, must it be recreated.

The remote API server fills in fields we leave empty (a Service's clusterIP and nodePorts, port
protocols, the default ingress class...). Those are "remote-defaulted": absent from the desired
object, they are the remote's to choose and are neither compared nor overwritten. Every other
field of the object's content is compared exactly, so both local changes (including removed
keys) and remote drift trigger a write. Paths use `[]` for "every element of a list".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.forge.json_copy import copied
from shared.forge.service import switches_headless

# Top-level fields that are identity or bookkeeping rather than content we own.
_NOT_CONTENT = frozenset({"apiVersion", "kind", "metadata", "status"})

_REMOTE_DEFAULTED_PATHS: dict[str, tuple[str, ...]] = {
    "Service": (
        "spec.type",
        "spec.clusterIP",
        "spec.clusterIPs",
        "spec.ipFamilies",
        "spec.ipFamilyPolicy",
        "spec.sessionAffinity",
        "spec.internalTrafficPolicy",
        "spec.externalTrafficPolicy",
        "spec.allocateLoadBalancerNodePorts",
        "spec.healthCheckNodePort",
        "spec.ports[].protocol",
        "spec.ports[].targetPort",
        "spec.ports[].nodePort",
    ),
    # The DefaultIngressClass admission plugin sets the class we cleared.
    "Ingress": ("spec.ingressClassName",),
    "EndpointSlice": ("ports[].protocol",),
    # DefaultStorageClass sets the class when the offer names none; the PV controller binds.
    "PersistentVolumeClaim": ("spec.storageClassName", "spec.volumeMode", "spec.volumeName"),
}


def _parse_path(path: str) -> tuple[str, ...]:
    parts: list[str] = []
    for part in path.split("."):
        if part.endswith("[]"):
            parts.extend((part[:-2], "[]"))
        else:
            parts.append(part)
    return tuple(parts)


REMOTE_DEFAULTED: dict[str, frozenset[tuple[str, ...]]] = {
    kind: frozenset(_parse_path(path) for path in paths)
    for kind, paths in _REMOTE_DEFAULTED_PATHS.items()
}


def _absent(value: Any) -> bool:
    # Kubernetes omits empty strings, maps and lists on the wire: they mean "not set".
    if value is None:
        return True
    if type(value) in _JSON_CONTAINERS_AND_STRINGS:  # decoded JSON: one look, not three ==
        return not value
    return bool(value == "" or value == {} or value == [])


_JSON_CONTAINERS_AND_STRINGS = frozenset({str, dict, list})


def _equivalent(
    current: Any, desired: Any, defaulted: frozenset[tuple[str, ...]], path: tuple[str, ...]
) -> bool:
    if _absent(current) and _absent(desired):
        return True
    if isinstance(desired, Mapping) or isinstance(current, Mapping):
        if not (isinstance(desired, Mapping) or _absent(desired)):
            return False
        if not (isinstance(current, Mapping) or _absent(current)):
            return False
        current_map: Mapping[str, Any] = current or {}
        desired_map: Mapping[str, Any] = desired or {}
        for key in current_map.keys() | desired_map.keys():
            wanted = desired_map.get(key)
            if _absent(wanted) and path + (key,) in defaulted:
                continue
            if not _equivalent(current_map.get(key), wanted, defaulted, path + (key,)):
                return False
        return True
    if isinstance(desired, list) and isinstance(current, list):
        return len(desired) == len(current) and all(
            _equivalent(c, d, defaulted, path + ("[]",))
            for c, d in zip(current, desired, strict=True)
        )
    return bool(current == desired)


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in _NOT_CONTENT}


def compared_form(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What `needs_update` compares (labels, annotations, content), absent values dropped: two
    objects of a kind without remote-defaulted or immutable fields need no update of one into
    the other exactly when their compared forms are equal."""
    metadata = obj.get("metadata") or {}
    form = _without_absent({"labels": metadata.get("labels"),
                            "annotations": metadata.get("annotations"), **_content(obj)})
    assert isinstance(form, dict)
    return form


def _without_absent(value: Any) -> Any:
    # type() first: decoded JSON is dicts, lists and scalars, and the Mapping ABC's isinstance
    # is the slow path (this runs for every field of every compared copy: Event digests).
    kind = type(value)
    if kind is dict or (kind not in _JSON_SCALARS and kind is not list
                        and isinstance(value, Mapping)):
        kept: dict[Any, Any] = {}
        for key, item in value.items():
            item = _without_absent(item)
            if not _absent(item):
                kept[key] = item
        return kept
    if isinstance(value, list):
        return [None if _absent(item) else item for item in map(_without_absent, value)]
    return value


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def needs_update(current_remote: Mapping[str, Any], desired_remote: Mapping[str, Any]) -> bool:
    """True when the remote object differs from the desired one in anything we own: its labels,
    its annotations, or its content (every field but metadata and status), remote-defaulted
    fields we leave empty excepted. False means: write nothing. When it is True, check
    `must_recreate` first: some differences cannot be written by an update."""
    current_meta = current_remote.get("metadata") or {}
    desired_meta = desired_remote.get("metadata") or {}
    for key in ("labels", "annotations"):
        if (current_meta.get(key) or {}) != (desired_meta.get(key) or {}):
            return True
    defaulted = REMOTE_DEFAULTED.get(str(desired_remote.get("kind", "")), frozenset())
    return must_recreate(current_remote, desired_remote) or not _equivalent(
        _content(current_remote), _content(desired_remote), defaulted, ()
    )


def _with_remote_defaults(
    current: Any, desired: Any, defaulted: frozenset[tuple[str, ...]], path: tuple[str, ...]
) -> Any:
    if isinstance(desired, Mapping) and isinstance(current, Mapping):
        merged = {
            key: _with_remote_defaults(current.get(key), value, defaulted, path + (key,))
            for key, value in desired.items()
        }
        for key, value in current.items():
            if _absent(merged.get(key)) and path + (key,) in defaulted:
                merged[key] = copied(value)
        return merged
    if isinstance(desired, list) and isinstance(current, list) and len(desired) == len(current):
        return [
            _with_remote_defaults(c, d, defaulted, path + ("[]",))
            for c, d in zip(current, desired, strict=True)
        ]
    return copied(desired)


def updated_remote(
    current_remote: Mapping[str, Any], desired_remote: Mapping[str, Any]
) -> dict[str, Any]:
    """The body to PUT over `current_remote`: the desired object, keeping the remote's
    resourceVersion (optimistic concurrency), its other metadata bookkeeping, and the
    remote-defaulted values we leave to it (clusterIP and nodePorts are immutable or allocated
    there, so dropping them would be rejected or reallocate them)."""
    defaulted = REMOTE_DEFAULTED.get(str(desired_remote.get("kind", "")), frozenset())
    body: dict[str, Any] = _with_remote_defaults(
        _content(current_remote), _content(desired_remote), defaulted, ()
    )
    metadata = copied(dict(current_remote.get("metadata") or {}))
    desired_meta = desired_remote.get("metadata") or {}
    for key in ("labels", "annotations"):
        metadata.pop(key, None)
        if desired_meta.get(key):
            metadata[key] = copied(desired_meta[key])
    metadata.pop("managedFields", None)
    head = {key: desired_remote[key] for key in ("apiVersion", "kind") if key in desired_remote}
    return {**head, "metadata": metadata, **body}


def must_recreate(current_remote: Mapping[str, Any], desired_remote: Mapping[str, Any]) -> bool:
    """True when the API server would reject updating `current_remote` into the desired object,
    so the copy must be deleted and created again: the copy is `immutable` (ConfigMap, Secret)
    and its content differs, a Secret's type changed, or a Service switched between headless and
    not (its clusterIP is immutable)."""
    kind = desired_remote.get("kind")
    if current_remote.get("immutable"):
        defaulted = REMOTE_DEFAULTED.get(str(kind or ""), frozenset())
        if not _equivalent(_content(current_remote), _content(desired_remote), defaulted, ()):
            return True
    if kind == "Secret":
        return (current_remote.get("type") or "Opaque") != (desired_remote.get("type") or "Opaque")
    if kind == "Service":
        return switches_headless(current_remote, desired_remote)
    return False
