"""What a CustomResourceDefinition means to the server: the kinds it serves and the status the
naming and establishing controllers give it."""

from __future__ import annotations

from typing import Any

from kubesim.kinds import ResourceKind

Obj = dict[str, Any]


def served_resource(crd: Obj) -> tuple[str, str]:
    """(group, plural): the storage all the CRD's versions share."""
    spec = crd.get("spec") or {}
    return spec.get("group", ""), (spec.get("names") or {}).get("plural", "")


def served_kinds(crd: Obj) -> list[ResourceKind]:
    """One ResourceKind per served version; none once the CRD is being deleted."""
    if crd["metadata"].get("deletionTimestamp"):
        return []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural = served_resource(crd)
    return [
        ResourceKind(
            group=group, version=version["name"], plural=plural, kind=names.get("kind", ""),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            subresources=tuple((version.get("subresources") or {}).keys()),
            categories=tuple(names.get("categories") or ()),
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            scale=(version.get("subresources") or {}).get("scale"),
            custom=True,
            unconditional_update=False,  # customResourceStrategy.AllowUnconditionalUpdate
        )
        for version in spec.get("versions") or []
        if version.get("served", True)
    ]


def established_status(crd: Obj, moment: str) -> Obj:
    """The status once names are accepted (no conflicts checked) and the CRD is established."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    return {
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": moment},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": moment},
        ],
        "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
    }
