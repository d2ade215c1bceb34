"""Event, remote → home: remote Events about reflected objects, attached to the home object.

Only Events about the kinds the agent reflects are brought home (
pods, services, endpointslices, ingresses, configmaps, secrets, PVCs). Unlike Liqo, whose event
reflector attaches a ShadowPod's Events to the home pod, Events about ShadowPods stay remote: the
ShadowPod is the agent's own remote bookkeeping, not an object the user has at home, and what
happens to the pod is told by the remote pod's own Events; a pod the remote API server refuses
has no Events of its own, and comes home through the ShadowPod's status instead (its
`PodCreated` condition: `shared.forge.pod_status.remote_pod_refused_condition`). An Event that is
itself a reflected copy (it carries the origin label) is never reflected again: two agents
peered both ways can never pass Events back and forth. Home Events are never sent out. Which
home object an Event belongs to (and whether the remote object is really our copy of it) is the
reflector's to find out: it holds the mirrors and the kinds' name rules.

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
- it carries the digest of what it says (`COPY_DIGEST_ANNOTATION`: of its compared form, the
  annotation left out), as `kubectl apply` keeps what it applied: a restarted agent lists its
  copies' metadata only (there are as many as remote Events, four a pod) and still knows which
  need rewriting, and the answer to a write is not digested again. A copy without it (made by
  an older agent) is judged by its content: the agent lists the copies whole when it finds any,
  so an upgrade rewrites nothing (and such copies go within the hour Events live, or get the
  digest with their next change).
  What someone else changes in a copy, the digest left as it was, is written over by the remote
  Event's next change rather than at once: Events are records, written by their recorders.
"""

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from shared.forge.compare import compared_form
from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, without_keys
from shared.ownership import ownership_labels
from shared.wellknown import COPY_DIGEST_ANNOTATION, ORIGIN_CLUSTER_LABEL

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

# (apiVersion, kind) of the remote involved objects whose Events come home: the home object is
# of the same kind.
REFLECTED_INVOLVED_KINDS: frozenset[tuple[str, str]] = frozenset({
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "PersistentVolumeClaim"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("networking.k8s.io/v1", "Ingress"),
})


def involved_kind(remote_event: Mapping[str, Any]) -> tuple[str, str]:
    """(apiVersion, kind) of the object `remote_event` is about."""
    involved = remote_event.get("involvedObject") or {}
    return (str(involved.get("apiVersion") or ""), str(involved.get("kind") or ""))


def is_reflectable_event(remote_event: Mapping[str, Any]) -> bool:
    """True when the remote Event is about a kind whose Events are brought home and is not
    itself a reflected copy."""
    labels = (remote_event.get("metadata") or {}).get("labels") or {}
    return ORIGIN_CLUSTER_LABEL not in labels and involved_kind(remote_event) in (
        REFLECTED_INVOLVED_KINDS)


_USED_METADATA = ("namespace", "name", "labels", "annotations")
_USED_INVOLVED = ("apiVersion", "kind", "namespace", "name", "uid", "fieldPath")


def remote_event_kept(remote_event: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent keeps of a remote Event: what `home_event`, `is_reflectable_event` and
    the index of what Events are about read (its bookkeeping metadata is never read)."""
    metadata = remote_event.get("metadata") or {}
    involved = remote_event.get("involvedObject") or {}
    kept = {field: remote_event[field] for field in (*_KEPT_FIELDS, "source")
            if remote_event.get(field) is not None}
    return {"metadata": {key: metadata[key] for key in _USED_METADATA if key in metadata},
            "involvedObject": {key: involved[key] for key in _USED_INVOLVED if key in involved},
            **kept}


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


@functools.lru_cache(maxsize=16)
def _cluster_suffix(remote_cluster_id: str) -> str:
    return "." + hashlib.sha256(remote_cluster_id.encode()).hexdigest()[:_DIGEST_LENGTH]


def home_event_name(remote_event_name: str, remote_cluster_id: str) -> str:
    """The home Event's name: `<remote name>.<digest of the remote cluster id>`, the remote
    name shortened (with a digest of it) when the result would exceed 253 characters."""
    suffix = _cluster_suffix(remote_cluster_id)
    name = remote_event_name + suffix
    if len(name) <= _MAX_NAME_LENGTH:
        return name
    name_digest = hashlib.sha256(remote_event_name.encode()).hexdigest()[:_DIGEST_LENGTH]
    keep = _MAX_NAME_LENGTH - len(suffix) - len(name_digest) - 1
    return f"{remote_event_name[:keep].rstrip('.-')}-{name_digest}{suffix}"


def remote_event_name(home_event_name: str, remote_cluster_id: str) -> str | None:
    """The remote name `home_event_name` stands for, unless it was shortened (not told apart
    here: the name of a shortened copy gives the shortened name); None for a name no Event of
    `remote_cluster_id` gets."""
    suffix = _cluster_suffix(remote_cluster_id)
    if not home_event_name.endswith(suffix):
        return None
    return home_event_name[:-len(suffix)]


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
    metadata["annotations"] = {**metadata.get("annotations", {}),
                               COPY_DIGEST_ANNOTATION: _content_digest(event)}
    return event


def copy_digest(home_event: Mapping[str, Any]) -> str:
    """The digest of what the copy says: its `COPY_DIGEST_ANNOTATION`, else computed from what
    it holds (a copy made before copies carried one: read it whole)."""
    return _annotated_digest(home_event) or _content_digest(home_event)


def has_copy_digest(home_event: Mapping[str, Any]) -> bool:
    """Whether the copy carries its digest (its metadata alone tells what it says)."""
    return bool(_annotated_digest(home_event))


def _annotated_digest(home_event: Mapping[str, Any]) -> str:
    annotations = (home_event.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(COPY_DIGEST_ANNOTATION) or "")


def _content_digest(home_event: Mapping[str, Any]) -> str:
    """The digest of the copy's compared form, `COPY_DIGEST_ANNOTATION` left out."""
    form = compared_form(home_event)
    annotations = form.get("annotations")
    if annotations and COPY_DIGEST_ANNOTATION in annotations:
        others = {key: value for key, value in annotations.items()
                  if key != COPY_DIGEST_ANNOTATION}
        if others:
            form["annotations"] = others
        else:
            del form["annotations"]  # as a copy that never had any
    # orjson: one digest per copy forged or read, several times quicker.
    encoded = orjson.dumps(form, option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.sha256(encoded).hexdigest()


def home_copy_summary(home_event: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent keeps of each home copy instead of the copy (there are as many as remote
    Events, and it keeps only its own): its identity, and its `copy_digest` (the copy may be
    its metadata only)."""
    metadata = home_event.get("metadata") or {}
    return {"metadata": {key: metadata[key] for key in _SUMMARY_METADATA if key in metadata},
            "digest": copy_digest(home_event)}


_SUMMARY_METADATA = ("namespace", "name", "uid", "resourceVersion")


def event_needs_update(current_home_event: Mapping[str, Any], desired: Mapping[str, Any]
                       ) -> bool:
    """True when the home copy (the copy, or its `home_copy_summary`) must be rewritten into
    `desired`: the remote Event changed (its count, lastTimestamp, message...) or the home copy
    drifted. An Event has no server-defaulted or immutable fields we leave empty, so the
    compared forms' digests decide (`needs_update`'s rule)."""
    digest = (current_home_event["digest"] if "digest" in current_home_event
              else copy_digest(current_home_event))
    return bool(digest != copy_digest(desired))
