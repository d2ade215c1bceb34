"""What every reflected object shares: its metadata, the skip lists, and the "did it change" test.

The local (home) object is the source of truth (DESIGN.md section 5). Each per-kind forge builds
the complete desired remote object from it; the reflectors then compare that with what the remote
cluster holds (`needs_update`) and write only when they differ, overwriting drift.

Decisions recorded here:
- `kubectl.kubernetes.io/last-applied-configuration` is never reflected: it describes the home
  object (home namespace, home-only fields, even a Secret's data in clear) and would make a
  `kubectl apply` against the remote copy compute a wrong three-way merge.
- uid, resourceVersion, generation, managedFields, ownerReferences, finalizers,
  creationTimestamp and deletion fields are never copied: they are the home API server's
  bookkeeping. ownerReferences in particular name home UIDs, so the remote garbage collector
  would delete the copy as an orphan.
- Labels we force (the ownership pair, EndpointSlice's managed-by) win over the local object's
  own labels and over the skip lists: without them the object is not recognisably ours.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import orjson
from pydantic import BaseModel, ConfigDict

from shared.api.offloading_patch import OffloadingPatch
from shared.ownership import ownership_labels

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
ALWAYS_SKIPPED_ANNOTATIONS: frozenset[str] = frozenset({LAST_APPLIED_ANNOTATION})

# Top-level fields that are identity or bookkeeping rather than content we own.
_J = TypeVar("_J")

_NOT_CONTENT = frozenset({"apiVersion", "kind", "metadata", "status"})


class ReflectionConfig(BaseModel):
    """Who reflects to whom, and the label/annotation keys that are never reflected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    home_cluster_id: str
    remote_cluster_id: str
    labels_not_reflected: frozenset[str] = frozenset()
    annotations_not_reflected: frozenset[str] = frozenset()


def reflection_config(
    home_cluster_id: str,
    remote_cluster_id: str,
    *,
    labels_not_reflected: Iterable[str] = (),
    annotations_not_reflected: Iterable[str] = (),
    offloading_patch: OffloadingPatch | None = None,
) -> ReflectionConfig:
    """The config for one peering: the global skip lists (agent flags) merged with the
    VirtualNode's `offloadingPatch.labelsNotReflected` / `annotationsNotReflected`.

    Call it again whenever the VirtualNode changes: the lists apply live (DESIGN.md section 5).
    """
    labels = set(labels_not_reflected)
    annotations = set(annotations_not_reflected)
    if offloading_patch is not None:
        labels.update(offloading_patch.labels_not_reflected)
        annotations.update(offloading_patch.annotations_not_reflected)
    return ReflectionConfig(
        home_cluster_id=home_cluster_id,
        remote_cluster_id=remote_cluster_id,
        labels_not_reflected=frozenset(labels),
        annotations_not_reflected=frozenset(annotations),
    )


def rfc3339(moment: datetime) -> str:
    """A timestamp as Kubernetes writes them (seconds, UTC)."""
    if moment.tzinfo is None:
        raise ValueError(f"timestamps must be timezone-aware, got naive {moment.isoformat()}")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 timestamp as the API server writes them (ValueError when it is not one)."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return parsed


def without_keys(mapping: Mapping[str, str] | None, keys: Collection[str]) -> dict[str, str]:
    """A copy of `mapping` (labels or annotations) without `keys`: the one skip-list filter."""
    return {key: value for key, value in (mapping or {}).items() if key not in keys}


def remote_metadata(
    local_obj: Mapping[str, Any],
    remote_namespace: str,
    config: ReflectionConfig,
    name: str | None = None,
    *,
    forced_labels: Mapping[str, str] | None = None,
    skipped_annotations: Collection[str] = (),
) -> dict[str, Any]:
    """The remote copy's metadata: the local name (or `name`), the twin namespace, the local
    labels and annotations minus the skip lists, plus the ownership labels and `forced_labels`.

    `skipped_annotations` adds kind-specific keys to the annotation skip list (e.g. the legacy
    ingress class annotation).
    """
    local_meta = local_obj.get("metadata") or {}
    labels = without_keys(local_meta.get("labels"), config.labels_not_reflected)
    labels.update(ownership_labels(config.home_cluster_id, config.remote_cluster_id))
    labels.update(forced_labels or {})
    skipped = (
        config.annotations_not_reflected | ALWAYS_SKIPPED_ANNOTATIONS | set(skipped_annotations)
    )
    metadata: dict[str, Any] = {
        "name": name if name is not None else local_meta.get("name", ""),
        "namespace": remote_namespace,
        "labels": labels,
    }
    annotations = without_keys(local_meta.get("annotations"), skipped)
    if annotations:
        metadata["annotations"] = annotations
    return metadata


_ONLY_JSON = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
              | orjson.OPT_PASSTHROUGH_SUBCLASS)
"""orjson refuses what JSON would not give back as it was (it would write a datetime as text)."""


def copied(value: _J) -> _J:
    """A deep copy of a JSON value (maps, lists, scalars), so that a forged object never shares
    mutable parts with its input. Encoded and decoded by orjson: a pod's spec in 8 µs against
    22 copying each map and list in Python (a third of `copy.deepcopy`'s time, which every pod
    reconcile once spent most in); anything orjson will not take is copied that way."""
    if not isinstance(value, (dict, list)):
        return value
    try:
        return cast(_J, orjson.loads(orjson.dumps(value, option=_ONLY_JSON)))
    except TypeError:  # a key that is not a string, an integer over 64 bits...
        return _copied_in_python(value)


def _copied_in_python(value: _J) -> _J:
    if isinstance(value, dict):
        return cast(_J, {key: _copied_in_python(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(_J, [_copied_in_python(item) for item in value])
    return value


# --- comparing a remote object with the desired one --------------------------------------------
#
# The remote API server fills in fields we leave empty (a Service's clusterIP and nodePorts, port
# protocols, the default ingress class...). Those are "remote-defaulted": absent from the desired
# object, they are the remote's to choose and are neither compared nor overwritten. Every other
# field of the object's content is compared exactly, so both local changes (including removed
# keys) and remote drift trigger a write. Paths use `[]` for "every element of a list".

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


def _is_headless(service: Mapping[str, Any]) -> bool:
    return bool((service.get("spec") or {}).get("clusterIP") == "None")


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
        return _is_headless(current_remote) != _is_headless(desired_remote)
    return False
