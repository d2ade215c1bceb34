"""ObjectMeta validation (apimachinery/pkg/api/validation/objectmeta.go), as field causes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubesim import names
from kubesim.errors import FieldCause, GoLiteral

Obj = dict[str, Any]
FIELD_ORDER = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")


def metadata_errors(meta: Obj, name_errors: Callable[[str], list[str]]) -> list[FieldCause]:
    """ValidateObjectMetaAccessor's checks: name, labels, annotations, owners, finalizers."""
    name = str(meta.get("name", ""))
    causes: list[FieldCause] = []
    if not name:
        causes.append(FieldCause("metadata.name", "Required value",
                                 "name or generateName is required"))
    else:
        causes += [FieldCause("metadata.name", "Invalid value", e, name) for e in name_errors(name)]
    for key, value in (meta.get("labels") or {}).items():
        causes += [FieldCause("metadata.labels", "Invalid value", e, key)
                   for e in names.label_key_errors(key)]
        causes += [FieldCause("metadata.labels", "Invalid value", e, value)
                   for e in names.label_value_errors(str(value))]
    causes += [FieldCause("metadata.annotations", error_type, detail, value)
               for error_type, value, detail in names.annotation_field_errors(
                   meta.get("annotations") or {})]
    causes += owner_reference_errors(meta.get("ownerReferences") or [])
    causes += finalizer_errors(meta.get("finalizers") or [])
    return causes


def owner_reference_errors(references: list[Obj]) -> list[FieldCause]:
    path = "metadata.ownerReferences"
    causes: list[FieldCause] = []
    first_controller = ""
    for reference in references:
        api_version = str(reference.get("apiVersion", ""))
        if not api_version.rpartition("/")[2]:
            causes.append(FieldCause(f"{path}.apiVersion", "Invalid value",
                                     "version must not be empty", api_version))
        for field in ("kind", "name", "uid"):
            if not reference.get(field):
                causes.append(FieldCause(f"{path}.{field}", "Invalid value",
                                         f"{field} must not be empty",
                                         str(reference.get(field, ""))))
        if reference.get("controller"):
            current = f"{reference.get('kind', '')}/{reference.get('name', '')}"
            if first_controller:
                causes.append(FieldCause(
                    path, "Invalid value",
                    f'Only one reference can have Controller set to true. Found "true" in '
                    f"references for {first_controller} and {current}",
                    GoLiteral(_json_references(references))))
            else:
                first_controller = current
    return causes


def _json_references(references: list[Obj]) -> str:
    """Field errors print structured values as JSON, fields in Go struct order."""
    ordered = [{k: r[k] for k in FIELD_ORDER if k in r} for r in references]
    return json.dumps(ordered, separators=(",", ":"))


def finalizer_errors(finalizers: list[str]) -> list[FieldCause]:
    causes = [FieldCause("metadata.finalizers", "Invalid value", e, f)
              for f in finalizers for e in names.label_key_errors(str(f))]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        causes.append(FieldCause("metadata.finalizers", "Invalid value",
                                 "finalizer orphan and foregroundDeletion cannot be both set",
                                 GoLiteral(json.dumps(finalizers, separators=(",", ":")))))
    return causes


def no_new_finalizers_errors(new: Obj, old: Obj) -> list[FieldCause]:
    """ValidateNoNewFinalizers, once deletion started."""
    if not old["metadata"].get("deletionTimestamp"):
        return []
    before = set(old["metadata"].get("finalizers") or ())
    added = sorted({f for f in new["metadata"].get("finalizers") or () if f not in before})
    if not added:
        return []
    quoted = ", ".join(json.dumps(f) for f in added)
    return [FieldCause("metadata.finalizers", "Forbidden",
                       f"no new finalizers can be added if the object is being deleted, found "
                       f"new finalizers []string{{{quoted}}}")]
