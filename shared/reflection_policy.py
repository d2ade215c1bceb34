"""Which home objects are reflected: the per-kind policy and the two annotations.

- DenyList (the default): everything, except objects annotated `liqo.io/skip-reflection`.
- AllowList: nothing, except objects annotated `liqo.io/allow-reflection`.

An annotation counts when it is present with any value except "false" (any case), as in Liqo's
reflectors: `liqo.io/skip-reflection: ""` skips, `liqo.io/skip-reflection: "false"` does not.
When an object carries both, skip wins under either policy (Liqo refuses such an object with
an error; not reflecting is the safe reading of a contradiction).

EndpointSlices inherit the decision of their Service (under the Service reflector's policy)
unless the slice is annotated itself. Whether a remote object is ours is
`shared.ownership.is_owned`.
"""

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from shared.wellknown import (
    ALLOW_REFLECTION_ANNOTATION,
    SERVICE_NAME_LABEL,
    SKIP_REFLECTION_ANNOTATION,
)


class ReflectionType(StrEnum):
    DENY_LIST = "DenyList"
    ALLOW_LIST = "AllowList"


def annotation_is_set(obj: Mapping[str, Any], key: str) -> bool:
    """True when `obj` carries annotation `key` with a value other than "false"."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return key in annotations and str(annotations[key]).lower() != "false"


def explicit_decision(obj: Mapping[str, Any]) -> bool | None:
    """What the object's own annotations say regardless of the policy: False when it asks to be
    skipped, True when it asks to be reflected, None when it says nothing."""
    if annotation_is_set(obj, SKIP_REFLECTION_ANNOTATION):
        return False
    if annotation_is_set(obj, ALLOW_REFLECTION_ANNOTATION):
        return True
    return None


def should_reflect(obj: Mapping[str, Any], policy: ReflectionType) -> bool:
    """True when `obj` is reflected under `policy` (a ReflectionType or its string value)."""
    if annotation_is_set(obj, SKIP_REFLECTION_ANNOTATION):
        return False
    if ReflectionType(policy) is ReflectionType.ALLOW_LIST:
        return annotation_is_set(obj, ALLOW_REFLECTION_ANNOTATION)
    return True


def should_reflect_endpointslice(
    endpointslice: Mapping[str, Any],
    service: Mapping[str, Any] | None,
    service_policy: ReflectionType,
) -> bool:
    """True when the EndpointSlice is reflected: its own annotation decides if it has one,
    otherwise its Service's decision under `service_policy`. Without a Service (none labelled,
    or not known yet) the slice is judged by itself under the same policy, as Liqo does."""
    decision = explicit_decision(endpointslice)
    if decision is not None:
        return decision
    return should_reflect(service if service is not None else endpointslice, service_policy)


def endpointslice_service_name(endpointslice: Mapping[str, Any]) -> str | None:
    """The name of the Service the slice belongs to (its `kubernetes.io/service-name` label)."""
    labels = (endpointslice.get("metadata") or {}).get("labels") or {}
    name = labels.get(SERVICE_NAME_LABEL)
    return None if name is None else str(name)
