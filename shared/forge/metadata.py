"""What every reflected object's metadata is: its name and twin namespace, its labels and
annotations minus the skip lists, the ownership labels.

The local (home) object is the source of truth. Each per-kind forge builds
the complete desired remote object from it, starting with `remote_metadata`; the reflectors then
compare that with what the remote cluster holds (`shared.forge.compare`).

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
from typing import Any

from pydantic import BaseModel, ConfigDict

from shared.api.offloading_patch import OffloadingPatch
from shared.ownership import ownership_labels

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
ALWAYS_SKIPPED_ANNOTATIONS: frozenset[str] = frozenset({LAST_APPLIED_ANNOTATION})


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

    Call it again whenever the VirtualNode changes: the lists apply live.
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


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


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
