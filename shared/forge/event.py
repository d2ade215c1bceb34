"""Event, remote → home: remote Events about reflected objects, attached to the home object.

Only Events about the kinds the agent reflects are brought home (seed 004: pods, services,
endpointslices, ingresses, configmaps, secrets, PVCs); an Event about a ShadowPod is about its pod
(same name, as Liqo). Home Events are never sent out.

The home copy (as Liqo's event reflector):
- `involvedObject` names the home object: its apiVersion, kind, namespace, name and uid; the
  remote fieldPath (e.g. `spec.containers{app}`) is kept, it means the same thing at home. The
  home object's resourceVersion is left out on purpose: it changes with every status update, and
  the copy would then need rewriting although the Event did not change.
- reason, message, type, count, first/lastTimestamp, eventTime, series, action, related and the
  reporting controller/instance are kept; `source.component` gets a " (remote)" suffix (as Liqo)
  so `kubectl describe` shows where it happened; `source.host` (the remote node) is kept.
- it carries the ownership labels of the peering, so the reflector only ever updates or deletes
  Events it created.
- its name is the remote Event's name plus a short digest of the remote cluster id: deterministic
  (updates find it) and distinct per remote cluster, so agents for two remotes never fight over
  one home Event.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.forge.common import ReflectionConfig, copied, needs_update, without_keys
from shared.forge.configmap import local_configmap_name
from shared.ownership import ownership_labels

REMOTE_SOURCE_SUFFIX = " (remote)"
_MAX_NAME_LENGTH = 253  # a DNS subdomain
_DIGEST_LENGTH = 8
_KEPT_FIELDS = (
    "reason",
    "message",
    "type",
    "count",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
    "series",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
)

# (apiVersion, kind) of the remote involved objects whose Events come home, and the kind of the
# home object they belong to.
_HOME_KIND_OF: dict[tuple[str, str], str] = {
    ("v1", "Pod"): "Pod",
    ("v1", "Service"): "Service",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "PersistentVolumeClaim"): "PersistentVolumeClaim",
    ("discovery.k8s.io/v1", "EndpointSlice"): "EndpointSlice",
    ("networking.k8s.io/v1", "Ingress"): "Ingress",
    ("offloading.liqo.io/v1beta1", "ShadowPod"): "Pod",
}
_HOME_API_VERSION = {
    home_kind: api_version
    for (api_version, kind), home_kind in _HOME_KIND_OF.items()
    if kind == home_kind
}


@dataclass(frozen=True)
class HomeObjectKey:
    """Which home object a remote Event is about: what the reflector looks up at home."""

    api_version: str
    kind: str
    name: str


def _involved_kind(remote_involved: Mapping[str, Any]) -> tuple[str, str]:
    return (str(remote_involved.get("apiVersion") or ""), str(remote_involved.get("kind") or ""))


def is_reflectable_event(remote_event: Mapping[str, Any]) -> bool:
    """True when the remote Event is about a kind whose Events are brought home."""
    return _involved_kind(remote_event.get("involvedObject") or {}) in _HOME_KIND_OF


def home_object_for(remote_involved: Mapping[str, Any]) -> HomeObjectKey | None:
    """The home object a remote `involvedObject` stands for (None: not a reflected kind).

    Names are the same on both sides except the renamed root-CA ConfigMap; a ShadowPod's Events
    belong to the home pod of the same name."""
    home_kind = _HOME_KIND_OF.get(_involved_kind(remote_involved))
    if home_kind is None:
        return None
    name = str(remote_involved.get("name") or "")
    if home_kind == "ConfigMap":
        name = local_configmap_name(name)
    return HomeObjectKey(api_version=_HOME_API_VERSION[home_kind], kind=home_kind, name=name)


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An ObjectReference to `obj` (apiVersion, kind, namespace, name, uid)."""
    metadata = obj.get("metadata") or {}
    return _reference_fields(
        {**metadata, "apiVersion": obj.get("apiVersion"), "kind": obj.get("kind")}
    )


def _reference_fields(reference: Mapping[str, Any]) -> dict[str, Any]:
    # resourceVersion and fieldPath are left out: see the module docstring.
    fields = ("apiVersion", "kind", "namespace", "name", "uid")
    return {key: reference[key] for key in fields if reference.get(key) is not None}


def home_event_name(remote_event_name: str, remote_cluster_id: str) -> str:
    """The home Event's name: `<remote name>.<digest of the remote cluster id>`, the remote
    name shortened (with a digest of it) when the result would exceed 253 characters."""
    suffix = "." + hashlib.sha256(remote_cluster_id.encode()).hexdigest()[:_DIGEST_LENGTH]
    name = remote_event_name + suffix
    if len(name) <= _MAX_NAME_LENGTH:
        return name
    name_digest = hashlib.sha256(remote_event_name.encode()).hexdigest()[:_DIGEST_LENGTH]
    keep = _MAX_NAME_LENGTH - len(suffix) - len(name_digest) - 1
    return f"{remote_event_name[:keep].rstrip('.-')}-{name_digest}{suffix}"


def home_event(
    remote_event: Mapping[str, Any],
    home_object_ref: Mapping[str, Any],
    config: ReflectionConfig,
) -> dict[str, Any]:
    """The desired home copy of `remote_event`, attached to the home object `home_object_ref`
    (an ObjectReference: see `object_reference`)."""
    remote_meta = remote_event.get("metadata") or {}
    labels = without_keys(remote_meta.get("labels"), config.labels_not_reflected)
    labels.update(ownership_labels(config.home_cluster_id, config.remote_cluster_id))
    metadata: dict[str, Any] = {
        "name": home_event_name(str(remote_meta.get("name") or ""), config.remote_cluster_id),
        "namespace": home_object_ref.get("namespace"),
        "labels": labels,
    }
    annotations = without_keys(remote_meta.get("annotations"), config.annotations_not_reflected)
    if annotations:
        metadata["annotations"] = annotations

    involved = _reference_fields(home_object_ref)
    field_path = (remote_event.get("involvedObject") or {}).get("fieldPath")
    if field_path:
        involved["fieldPath"] = field_path

    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": involved,
    }
    for field in _KEPT_FIELDS:
        if remote_event.get(field) is not None:
            event[field] = copied(remote_event[field])
    source = dict(remote_event.get("source") or {})
    if source.get("component"):
        source["component"] = str(source["component"]) + REMOTE_SOURCE_SUFFIX
    if source:
        event["source"] = source
    return event


def event_needs_update(current_home_event: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when the home copy must be rewritten: the remote Event changed (its count,
    lastTimestamp, message...) or the home copy drifted. The generic comparison serves: an Event
    has no server-defaulted fields we leave empty."""
    return needs_update(current_home_event, desired)
