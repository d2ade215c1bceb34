"""JSON merge patch, JSON patch and strategic merge patch, applied as kube-apiserver does.

- merge patch: RFC 7386 with the null pruning of evanphx/json-patch's MergePatch;
- JSON patch: RFC 6902 via the `jsonpatch` library; errors get the status the apiserver's
  patch handler gives them (malformed patch 400, failed operation 422, >10000 operations 413);
- strategic merge patch: a port of the apply half of apimachinery's strategicpatch
  (mergeMap / mergeSlice, the `$patch`, `$retainKeys`, `$setElementOrder/` and
  `$deleteFromPrimitiveList/` directives, list order normalisation), driven by a table of the
  patchStrategy/patchMergeKey tags of the built-in kinds that controllers patch.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch


class PatchError(Exception):
    """A patch the server refuses, with the status code, reason and message it answers with."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message


def _bad_request(message: str) -> PatchError:
    return PatchError(400, "BadRequest", message)


def _unprocessable(message: str) -> PatchError:
    # errors.NewGenericServerResponse(422, ...) keeps a fixed message, not the cause.
    del message
    return PatchError(
        422, "Invalid", "the server rejected our request due to an error in our request"
    )


def _internal(message: str) -> PatchError:
    # Errors that are not API statuses become 500s with reason "" (StatusReasonUnknown).
    return PatchError(500, "", message)


# --- RFC 7386 merge patch --------------------------------------------------------------------


def apply_merge_patch(original: dict[str, Any], patch: Any) -> dict[str, Any]:
    """application/merge-patch+json. A patch that is not an object is refused (400)."""
    if not isinstance(patch, dict):
        raise _bad_request("Invalid JSON Patch")
    result = copy.deepcopy(original)
    _merge_docs(result, copy.deepcopy(patch))
    return result


def _merge_docs(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            doc.pop(key, None)
        elif doc.get(key) is None:
            doc[key] = _prune_nulls(value)
        elif isinstance(doc[key], dict) and isinstance(value, dict):
            _merge_docs(doc[key], value)
        elif isinstance(doc[key], dict):
            doc[key] = value  # a non-object replaces an object as it is
        else:
            doc[key] = _prune_nulls(value)


def _prune_nulls(value: Any) -> Any:
    """Null members of objects go (they mean "delete"); nulls inside arrays stay."""
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


# --- RFC 6902 JSON patch ---------------------------------------------------------------------

MAX_JSON_PATCH_OPERATIONS = 10000


def _go_json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return "number"


def apply_json_patch(original: dict[str, Any], operations: Any) -> dict[str, Any]:
    """application/json-patch+json. Any failing operation (a failed `test`, a missing path)
    is a 422 Invalid, as in the apiserver's jsonPatcher."""
    if not isinstance(operations, list):
        raise _bad_request(
            f"json: cannot unmarshal {_go_json_type(operations)} into Go value of type "
            "jsonpatch.Patch"
        )
    for operation in operations:
        if not isinstance(operation, dict):
            raise _bad_request(
                f"json: cannot unmarshal {_go_json_type(operation)} into Go value of type "
                "jsonpatch.Operation"
            )
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(operations)}",
        )
    try:
        result = jsonpatch.apply_patch(original, operations)
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
        ValueError,
    ) as error:
        raise _unprocessable(str(error)) from error
    if not isinstance(result, dict):
        raise _unprocessable("the patched document is not an object")
    return result


# --- strategic merge patch: the patch metadata of built-in kinds -----------------------------


@dataclass(frozen=True)
class PatchMeta:
    """patchStrategy / patchMergeKey of a field, and the metadata of its (element's) fields."""

    strategy: str = ""  # "merge" or "replace"; "" merges maps and replaces lists
    merge_key: str = ""
    fields: Mapping[str, PatchMeta] = field(default_factory=dict)

    def child(self, name: str) -> PatchMeta:
        return self.fields.get(name, _NO_META)


_NO_META = PatchMeta()


def _struct(**fields: PatchMeta) -> PatchMeta:
    return PatchMeta(fields=fields)


def _merge_list(merge_key: str = "", element: PatchMeta = _NO_META) -> PatchMeta:
    return PatchMeta("merge", merge_key, element.fields)


_PRIMITIVE_SET = _merge_list()  # patchStrategy:"merge" on a list of scalars
_CONDITIONS = _merge_list("type")

OBJECT_META = _struct(finalizers=_PRIMITIVE_SET, ownerReferences=_merge_list("uid"))
_CONTAINER = _struct(
    ports=_merge_list("containerPort"),
    env=_merge_list("name"),
    volumeMounts=_merge_list("mountPath"),
    volumeDevices=_merge_list("devicePath"),
)
POD_SPEC = _struct(
    volumes=_merge_list("name"),
    initContainers=_merge_list("name", _CONTAINER),
    containers=_merge_list("name", _CONTAINER),
    ephemeralContainers=_merge_list("name", _CONTAINER),
    imagePullSecrets=_merge_list("name"),
    hostAliases=_merge_list("ip"),
    topologySpreadConstraints=_merge_list("topologyKey"),
    schedulingGates=_merge_list("name"),
    resourceClaims=_merge_list("name"),
)
# containerStatuses & co. and tolerations carry no patch strategy: they are replaced whole.
POD_STATUS = _struct(
    conditions=_CONDITIONS,
    podIPs=_merge_list("ip"),
    hostIPs=_merge_list("ip"),
    resourceClaimStatuses=_merge_list("name"),
)
POD_TEMPLATE_SPEC = _struct(metadata=OBJECT_META, spec=POD_SPEC)
_WITH_POD_TEMPLATE = _struct(template=POD_TEMPLATE_SPEC)
_CONDITIONS_STATUS = _struct(conditions=_CONDITIONS)


def _kind(spec: PatchMeta = _NO_META, status: PatchMeta = _NO_META, **more: PatchMeta) -> PatchMeta:
    return _struct(metadata=OBJECT_META, spec=spec, status=status, **more)


KIND_PATCH_META: Mapping[str, PatchMeta] = {
    "Pod": _kind(POD_SPEC, POD_STATUS),
    "PodTemplate": _struct(metadata=OBJECT_META, template=POD_TEMPLATE_SPEC),
    "Service": _kind(_struct(ports=_merge_list("port")), _CONDITIONS_STATUS),
    # Node taints carry no patch strategy (replaced); podCIDRs merge as a set.
    "Node": _kind(
        _struct(podCIDRs=_PRIMITIVE_SET),
        _struct(conditions=_CONDITIONS, addresses=_merge_list("type")),
    ),
    "Namespace": _kind(status=_CONDITIONS_STATUS),
    "PersistentVolumeClaim": _kind(status=_CONDITIONS_STATUS),
    "ServiceAccount": _struct(metadata=OBJECT_META, secrets=_merge_list("name")),
    "Deployment": _kind(_WITH_POD_TEMPLATE, _CONDITIONS_STATUS),
    "ReplicaSet": _kind(_WITH_POD_TEMPLATE, _CONDITIONS_STATUS),
    "StatefulSet": _kind(_WITH_POD_TEMPLATE, _CONDITIONS_STATUS),
    "DaemonSet": _kind(_WITH_POD_TEMPLATE, _CONDITIONS_STATUS),
    "Job": _kind(_WITH_POD_TEMPLATE, _CONDITIONS_STATUS),
    "CronJob": _kind(_struct(jobTemplate=_struct(metadata=OBJECT_META, spec=_WITH_POD_TEMPLATE))),
}
# Any other kind: metadata as everywhere, maps merged, lists replaced.
DEFAULT_PATCH_META = _struct(metadata=OBJECT_META)


# --- strategic merge patch: the algorithm (strategicpatch/patch.go) --------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"

_ERR_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
_ERR_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_ERR_BAD_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
_ERR_NO_LIST_OF_LISTS = "lists of lists are not supported"


def apply_strategic_merge_patch(
    original: dict[str, Any], patch: dict[str, Any], kind: str
) -> dict[str, Any]:
    """application/strategic-merge-patch+json for a built-in kind ("Pod", "Service", ...)."""
    if patch is None:
        return copy.deepcopy(original)
    if not isinstance(patch, dict):
        raise _bad_request(
            f"json: cannot unmarshal {_go_json_type(patch)} into Go value of type "
            "map[string]interface {}"
        )
    meta = KIND_PATCH_META.get(kind, DEFAULT_PATCH_META)
    return _merge_map(copy.deepcopy(original), copy.deepcopy(patch), meta)


def go_format(value: Any) -> str:
    """Go's %v of a decoded JSON value (for messages that print patch fragments)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_format(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_format(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return str(value)


def _no_merge_key(element: Mapping[str, Any], merge_key: str) -> PatchError:
    return _internal(f"map: {go_format(element)} does not contain declared merge key: {merge_key}")


def _bad_patch_type(directive: Any, element: Mapping[str, Any]) -> PatchError:
    return _internal(f"unknown patch type: {go_format(directive)} in map: {go_format(element)}")


def _same_json_type(left: Any, right: Any) -> bool:
    return _json_kind(left) == _json_kind(right)


def _merge_map(original: dict[str, Any], patch: dict[str, Any], meta: PatchMeta) -> dict[str, Any]:
    if _DIRECTIVE in patch:
        return _map_directive(patch[_DIRECTIVE], patch)
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, meta)
    for key, patch_value in list(patch.items()):
        is_delete_list = False
        if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            key = _extract_key(key, _DELETE_FROM_PRIMITIVE_LIST, _ERR_BAD_PRIMITIVE_LIST)
            is_delete_list = True
        if patch_value is None:
            original.pop(key, None)
            continue
        if key not in original or not _same_json_type(original[key], patch_value):
            if not is_delete_list:
                _set_new_value(original, key, patch_value)
            continue
        field_meta = meta.child(key)
        current = original[key]
        if isinstance(current, dict):
            if field_meta.strategy == "replace":
                original[key] = patch_value
            else:
                original[key] = _merge_map(current, patch_value, field_meta)
        elif isinstance(current, list):
            original[key] = _merge_list_field(current, patch_value, field_meta, is_delete_list)
        else:
            _set_new_value(original, key, patch_value)
    return original


def _set_new_value(original: dict[str, Any], key: str, value: Any) -> None:
    """A value with nothing to merge into: nulls discarded, directives removed."""
    cleaned, keep = _remove_directives(_discard_nulls(value))
    if keep:
        original[key] = cleaned
    else:
        original.pop(key, None)


def _discard_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _discard_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_discard_nulls(v) for v in value]
    return value


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """Drop `{"$patch": ...}` maps and directive keys from a value taken from the patch.

    (The real server drops the directive keys when it decodes into the typed object.)
    """
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        cleaned = {}
        for key, item in value.items():
            if key == _RETAIN_KEYS or key.startswith(
                (_SET_ELEMENT_ORDER, _DELETE_FROM_PRIMITIVE_LIST)
            ):
                continue
            item, keep = _remove_directives(item)
            if keep:
                cleaned[key] = item
        return cleaned, True
    if isinstance(value, list):
        kept = [_remove_directives(item) for item in value]
        return [item for item, keep in kept if keep], True
    return value, True


def _map_directive(directive: Any, patch: dict[str, Any]) -> dict[str, Any]:
    if directive == "replace":
        # The patch replaces the whole map.
        replacement = {k: v for k, v in patch.items() if k != _DIRECTIVE}
        return _remove_directives(replacement)[0]  # type: ignore[no-any-return]
    if directive == "delete":
        return {}
    raise _bad_patch_type(directive, patch)


def _extract_key(key: str, prefix: str, error: str) -> str:
    parts = key.split("/", 1)
    if len(parts) <= 1 or parts[0] != prefix:
        raise _bad_request(error)
    return parts[1]


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise _bad_request(_ERR_BAD_RETAIN_KEYS)
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER)):
            continue
        if key not in retain:
            raise _bad_request(_ERR_BAD_RETAIN_KEYS)
    for key in list(original):
        if key not in retain:
            del original[key]


def _merge_ordered_lists(original: dict[str, Any], patch: dict[str, Any], meta: PatchMeta) -> None:
    """mergePatchIntoOriginal: lists named by `$setElementOrder/<field>` are merged, then
    ordered as the directive says (server-only items keep their place as best they can)."""
    for directive_key in [k for k in patch if k.startswith(_SET_ELEMENT_ORDER)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise _internal(f"expected a slice, but received a {_go_json_type(order)}")
        key = _extract_key(directive_key, _SET_ELEMENT_ORDER, _ERR_BAD_SET_ELEMENT_ORDER)
        original_list = original.get(key)
        patch_list = patch.get(key)
        found_original, found_patch = key in original, key in patch
        for value in (original_list if found_original else [], patch_list if found_patch else []):
            if not isinstance(value, list):
                raise _internal(f"expected a slice, but received a {_go_json_type(value)}")
        field_meta = meta.child(key)
        _validate_set_element_order(patch_list or [], order, field_meta.merge_key)
        if found_original and not found_patch:
            merged = original_list
        elif found_patch and not found_original:
            merged = _remove_directives(_discard_nulls(patch_list))[0]
        elif isinstance(original_list, list) and isinstance(patch_list, list):
            merged = _merge_list_field(original_list, patch_list, field_meta, False)
        else:
            continue
        assert isinstance(merged, list)
        merge_key = field_meta.merge_key
        patch_items, server_only = _partition(merged, order, merge_key)
        is_map = _element_kind(original_list or [], patch_list or []) == "map"
        original[key] = _normalize_order(
            patch_items, server_only, order, original_list or [], merge_key if is_map else ""
        )
        patch.pop(key, None)


def _validate_set_element_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    if not order or not patch_list:
        return
    if merge_key:
        items = [
            item
            for item in patch_list
            if not (isinstance(item, dict) and item.get(_DIRECTIVE) == "delete")
        ]
    else:
        items = patch_list
    patch_index = order_index = 0
    while patch_index < len(items) and order_index < len(order):
        item = items[patch_index]
        if isinstance(item, dict) and _DIRECTIVE in item:
            patch_index += 1
            continue
        if _merge_value(item, merge_key) == _merge_value(order[order_index], merge_key):
            patch_index += 1
        order_index += 1
    if patch_index < len(items) and order_index >= len(order):
        raise _internal(
            f"The order in patch list:\n{go_format(patch_list)}\n doesn't match "
            f"{_SET_ELEMENT_ORDER} list:\n{go_format(order)}\n"
        )


def _merge_value(item: Any, merge_key: str) -> Any:
    if not merge_key:
        return item
    if not isinstance(item, dict) or merge_key not in item:
        raise _no_merge_key(item if isinstance(item, dict) else {}, merge_key)
    return item[merge_key]


def _merge_list_field(
    original: list[Any], patch: list[Any], meta: PatchMeta, is_delete_list: bool
) -> list[Any]:
    if meta.strategy != "merge":
        return patch
    return _merge_slice(original, patch, meta, is_delete_list)


def _json_kind(value: Any) -> str:
    """reflect.TypeOf of a decoded JSON value: map, slice, string, float64, bool."""
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else type(value).__name__


def _element_kind(*lists: list[Any]) -> str:
    """sliceElementType: every element of the lists has one JSON type, and none is a list."""
    previous = ""
    for items in lists:
        for item in items:
            kind = _json_kind(item)
            if not previous:
                if kind == "list":
                    raise _unprocessable(_ERR_NO_LIST_OF_LISTS)
                previous = kind
            elif kind != previous:
                raise _internal(f"list element types are not identical: {go_format(list(lists))}")
    if not previous:
        raise _internal("no elements in any of the given slices")
    return previous


def _merge_slice(
    original: list[Any], patch: list[Any], meta: PatchMeta, is_delete_list: bool
) -> list[Any]:
    if not original and not patch:
        return original
    merge_key = meta.merge_key
    if _element_kind(original, patch) != "map":
        if is_delete_list:
            return [item for item in original if item not in patch]
        merged = (
            list(dict.fromkeys(original + patch))
            if _hashable(original + patch)
            else (_dedupe(original + patch))
        )
        patch_items, server_only = _partition(merged, patch, "")
        return _normalize_order(patch_items, server_only, patch, original, "")
    if not merge_key:
        raise _internal("cannot merge lists without merge key for type struct")
    original, patch = _merge_special_elements(original, patch, merge_key)
    server_order = list(original)
    merged = list(original)
    for element in patch:
        if merge_key not in element:
            raise _no_merge_key(element, merge_key)
        index = _find_by_merge_key(merged, merge_key, element[merge_key])
        if index is None:
            merged.append(_remove_directives(_discard_nulls(element))[0])
        else:
            merged[index] = _merge_map(merged[index], element, meta)
    patch_items, server_only = _partition(merged, patch, merge_key)
    return _normalize_order(patch_items, server_only, patch, server_order, merge_key)


def _hashable(items: list[Any]) -> bool:
    return all(isinstance(item, str | int | float | bool) or item is None for item in items)


def _dedupe(items: list[Any]) -> list[Any]:
    unique: list[Any] = []
    for item in items:
        if item not in unique:
            unique.append(item)
    return unique


def _merge_special_elements(
    original: list[Any], patch: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    """`{"$patch": "delete", key: v}` deletes matching items; `{"$patch": "replace"}` makes
    the rest of the patch list replace the original list."""
    remaining: list[Any] = []
    replace = False
    for element in patch:
        if _DIRECTIVE not in element:
            remaining.append(element)
            continue
        directive = element[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in element:
                raise _no_merge_key(element, merge_key)
            original = [
                item
                for item in original
                if not (
                    isinstance(item, dict)
                    and item.get(merge_key) == element[merge_key]
                    and merge_key in item
                )
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _internal("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_patch_type(directive, element)
    if replace:
        return [_remove_directives(item)[0] for item in remaining], []
    return original, remaining


def _find_by_merge_key(items: list[Any], merge_key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _internal(f"value for key {index} is not a map.")
        if merge_key in item and item[merge_key] == value:
            return index
    return None


def _index(items: list[Any], wanted: Any, merge_key: str) -> int:
    def value(item: Any) -> Any:
        if not merge_key:
            return item
        return item.get(merge_key) if isinstance(item, dict) else None

    target = value(wanted)
    for index, item in enumerate(items):
        if value(item) == target:
            return index
    return -1


def _partition(
    items: list[Any], present_in: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    in_list: list[Any] = []
    not_in_list: list[Any] = []
    for item in items:
        if merge_key:
            if not isinstance(item, dict) or merge_key not in item:
                raise _no_merge_key(item if isinstance(item, dict) else {}, merge_key)
        (in_list if _index(present_in, item, merge_key) >= 0 else not_in_list).append(item)
    return in_list, not_in_list


def _normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
) -> list[Any]:
    """normalizeElementOrder: patch items in patch order, server-only items in server order,
    then interleaved so each server-only item stays before the items it preceded."""
    patch_items = _sort_by(patch_items, patch_order, merge_key)
    server_only = _sort_by(server_only, server_order, merge_key)
    result: list[Any] = []
    left, right = 0, 0
    while left < len(server_only) or right < len(patch_items):
        if left >= len(server_only):
            result.append(patch_items[right])
            right += 1
        elif right >= len(patch_items):
            result.append(server_only[left])
            left += 1
        else:
            left_index = _index(server_order, server_only[left], merge_key)
            right_index = _index(server_order, patch_items[right], merge_key)
            if left_index >= 0 and right_index >= 0 and left_index < right_index:
                result.append(server_only[left])
                left += 1
            else:
                result.append(patch_items[right])
                right += 1
    return result


def _sort_by(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    to_delete = []
    if merge_key:
        to_delete = [i for i in items if isinstance(i, dict) and i.get(_DIRECTIVE) == "delete"]
        items = [i for i in items if not (isinstance(i, dict) and i.get(_DIRECTIVE) == "delete")]
    positions = [_index(order, item, merge_key) for item in items]
    if all(position >= 0 for position in positions):
        items = [item for _, item in sorted(zip(positions, items, strict=True), key=lambda p: p[0])]
    return items + to_delete
