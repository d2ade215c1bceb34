"""CRD schemas (a version's openAPIV3Schema): structural checks, validation, pruning, defaulting.

Ports of apiextensions-apiserver: the CRD schema checks of apis/apiextensions/validation
(ValidateCustomResourceDefinitionOpenAPISchema), apiserver/schema/validation.go
(ValidateStructural), the kube-openapi validators and their conversion to field errors
(apiserver/validation), pruning/algorithm.go and defaulting/algorithm.go.
Schemas and objects are plain decoded JSON (dicts, lists, scalars).
"""

from __future__ import annotations

import base64
import copy
import datetime
import ipaddress
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesim.names import dns1035_label_errors, go_quote

Schema = Mapping[str, Any]

# field.ErrorType display strings -> the StatusCause reason (field/errors.go).
_REASONS = {
    "Not found": "FieldValueNotFound",
    "Required value": "FieldValueRequired",
    "Duplicate value": "FieldValueDuplicate",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Internal error": "InternalError",
}
_NO_VALUE_TYPES = ("Required value", "Forbidden", "Too long", "Internal error")
_OMIT = object()


@dataclass(frozen=True)
class FieldError:
    """One field.Error. `type` is the display string ("Invalid value", "Required value", ...);
    `reason` is the StatusCause type ("FieldValueInvalid", ...; "FieldValueTypeInvalid" for
    type mismatches, which display as "Invalid value")."""

    path: str
    type: str
    value: Any = ""
    detail: str = ""
    reason: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.reason:
            object.__setattr__(self, "reason", _REASONS.get(self.type, "FieldValueInvalid"))

    def body(self) -> str:
        """field.Error.ErrorBody(): the message without the path."""
        if self.type in _NO_VALUE_TYPES or self.value is _OMIT:
            text = self.type
        else:
            text = f"{self.type}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"


def go_value(value: Any) -> str:
    """How field.Error prints a bad value: %q for strings, %v for numbers and booleans."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return _go_number(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(go_value(v) for v in value) + "}"
    if isinstance(value, dict):
        items = ", ".join(f"{go_quote(str(k))}:{go_value(v)}" for k, v in value.items())
        return "map[string]interface {}{" + items + "}"
    return str(value)


def _go_number(value: int | float) -> str:
    # Go's %v of an int64 or a float64 (shortest representation, exponent from 1e21).
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        return f"{mantissa}e{sign}{exponent.lstrip('+-').zfill(2)}"
    return text


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _key(path: str, key: str) -> str:
    return f"{path}[{key}]"


def _properties(schema: Schema) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _additional_schema(schema: Schema) -> Schema | None:
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, Mapping) else None


def _items(schema: Schema) -> Schema | None:
    items = schema.get("items")
    return items if isinstance(items, Mapping) else None


def _flag(schema: Schema | None, name: str) -> bool:
    return bool(schema) and schema.get(name) is True  # type: ignore[union-attr]


# =========================================================================================
# structural_errors
# =========================================================================================

OPENAPI_V3_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_NESTED_KEYWORDS = ("allOf", "anyOf", "oneOf")
# The parts of a schema that are not value validation (structural "generic" and extensions).
_GENERIC = ("type", "description", "title", "default", "nullable", "externalDocs")
_FORBIDDEN_NESTED_EXTENSIONS = {
    "x-kubernetes-preserve-unknown-fields": "must be false to be structural",
    "x-kubernetes-embedded-resource": "must be false to be structural",
    "x-kubernetes-int-or-string": "must be false to be structural",
    "x-kubernetes-list-map-keys": "must be empty to be structural",
    "x-kubernetes-list-type": "must be undefined to be structural",
    "x-kubernetes-map-type": "must be undefined to be structural",
    "x-kubernetes-validations": "must be empty to be structural",
}


def structural_errors(schema: Schema, path: str = "") -> list[str]:
    """Why a CRD version's openAPIV3Schema is refused, as field errors.

    Paths are relative to the schema (`properties[spec].type: Required value: ...`) unless
    `path` is given (e.g. "spec.versions[0].schema.openAPIV3Schema"). The CRD schema checks come
    first, in schema order, then the structural-schema ones sorted as the real server sorts them.
    """
    if not isinstance(schema, Mapping):
        return [str(FieldError(path or "openAPIV3Schema", "Required value", "", ""))]
    openapi = list(_openapi_schema_errors(schema, path, _SchemaContext(), is_root=True))
    structural = list(_structural_invariants(schema, "root", path))
    structural += list(_structural_completeness(schema, path))
    structural.sort(key=str)
    return [str(error) for error in openapi + structural]


@dataclass(frozen=True)
class _SchemaContext:
    inside_metadata: bool = False  # under apiVersion/kind/metadata of a resource
    top_level: str = ""  # which of them, when directly under the root: no defaults below


def _openapi_schema_errors(
    schema: Schema, path: str, context: _SchemaContext, is_root: bool = False
) -> Iterator[FieldError]:
    """ValidateCustomResourceDefinitionOpenAPISchema + specStandardValidatorV3.validate."""
    inside_metadata, top_level = context.inside_metadata, context.top_level
    if top_level and "default" in schema:
        yield FieldError(
            _child(path, "default"), "Forbidden", detail=f"must not be set in top-level {top_level}"
        )
    schema_type = schema.get("type")
    if isinstance(schema_type, str) and schema_type and schema_type not in OPENAPI_V3_TYPES:
        if schema_type == "null":
            yield FieldError(
                _child(path, "type"),
                "Forbidden",
                detail="type cannot be set to null, use nullable as an alternative",
            )
        else:
            yield _not_supported(_child(path, "type"), schema_type, OPENAPI_V3_TYPES)
    for keyword in ("id", "additionalItems", "patternProperties", "definitions", "dependencies"):
        if schema.get(keyword):
            yield FieldError(
                _child(path, keyword), "Forbidden", detail=f"{keyword} is not supported"
            )
    if "$ref" in schema:
        yield FieldError(_child(path, "$ref"), "Forbidden", detail="$ref is not supported")
    if isinstance(schema.get("items"), list):
        yield FieldError(
            _child(path, "items"),
            "Forbidden",
            detail="items must be a schema object and not an array",
        )
    if inside_metadata and _flag(schema, "x-kubernetes-embedded-resource"):
        yield FieldError(
            _child(path, "x-kubernetes-embedded-resource"),
            "Forbidden",
            detail="must not be used inside of resource meta",
        )
    if schema.get("uniqueItems") is True:
        yield FieldError(
            _child(path, "uniqueItems"),
            "Forbidden",
            detail="uniqueItems cannot be set to true since the runtime complexity becomes "
            "quadratic",
        )
    additional = schema.get("additionalProperties")
    if additional is not None and _properties(schema):
        if additional is not True:
            yield FieldError(
                _child(path, "additionalProperties"),
                "Forbidden",
                detail="additionalProperties and properties are mutual exclusive",
            )
    if isinstance(additional, Mapping):
        yield from _openapi_schema_errors(additional, _child(path, "additionalProperties"), context)
    resource = is_root or _flag(schema, "x-kubernetes-embedded-resource")
    for name, sub in sorted(_properties(schema).items()):
        if isinstance(sub, Mapping):
            meta_field = resource and name in _RESOURCE_META_FIELDS
            yield from _openapi_schema_errors(
                sub,
                _key(_child(path, "properties"), name),
                _SchemaContext(True, name if is_root else top_level) if meta_field else context,
            )
    if isinstance(schema.get("not"), Mapping):
        yield from _openapi_schema_errors(schema["not"], _child(path, "not"), context)
    for keyword in _NESTED_KEYWORDS:
        for index, sub in enumerate(schema.get(keyword) or []):
            if isinstance(sub, Mapping):
                yield from _openapi_schema_errors(sub, f"{_child(path, keyword)}[{index}]", context)
    items = _items(schema)
    if items is not None:
        yield from _openapi_schema_errors(items, _child(path, "items"), context)
    yield from _extension_errors(schema, path)


def _extension_errors(schema: Schema, path: str) -> Iterator[FieldError]:
    if schema.get("x-kubernetes-preserve-unknown-fields") is False:
        yield FieldError(
            _child(path, "x-kubernetes-preserve-unknown-fields"),
            "Invalid value",
            False,
            "must be true or undefined",
        )
    schema_type = schema.get("type") or ""
    map_type = schema.get("x-kubernetes-map-type")
    if map_type is not None:
        if schema_type != "object":
            yield _type_must_be(path, schema_type, "object if x-kubernetes-map-type is specified")
        if map_type not in ("atomic", "granular"):
            yield _not_supported(
                _child(path, "x-kubernetes-map-type"), map_type, ("atomic", "granular")
            )
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is not None:
        if schema_type != "array":
            yield _type_must_be(path, schema_type, "array if x-kubernetes-list-type is specified")
        elif list_type not in ("atomic", "set", "map"):
            yield _not_supported(
                _child(path, "x-kubernetes-list-type"), list_type, ("atomic", "set", "map")
            )
    map_keys = schema.get("x-kubernetes-list-map-keys") or []
    if map_keys and list_type != "map":
        if list_type is None:
            yield FieldError(
                _child(path, "x-kubernetes-list-type"),
                "Required value",
                detail="must be map if x-kubernetes-list-map-keys is non-empty",
            )
        else:
            yield FieldError(
                _child(path, "x-kubernetes-list-type"),
                "Invalid value",
                list_type,
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )
    if list_type == "map":
        if not map_keys:
            yield FieldError(
                _child(path, "x-kubernetes-list-map-keys"),
                "Required value",
                detail="must not be empty if x-kubernetes-list-type is map",
            )
        items = _items(schema)
        if items is None:
            yield FieldError(
                _child(path, "items"),
                "Required value",
                detail="must have a schema if x-kubernetes-list-type is map",
            )
        elif items.get("type") != "object":
            yield FieldError(
                _child(_child(path, "items"), "type"),
                "Invalid value",
                items.get("type") or "",
                "must be object if parent array's x-kubernetes-list-type is map",
            )
        else:
            for map_key in map_keys:
                if map_key not in _properties(items):
                    yield FieldError(
                        _child(path, "x-kubernetes-list-map-keys"),
                        "Invalid value",
                        list(map_keys),
                        "entries must all be names of item properties",
                    )


def _type_must_be(path: str, schema_type: str, what: str) -> FieldError:
    if not schema_type:
        return FieldError(_child(path, "type"), "Required value", detail=f"must be {what}")
    return FieldError(_child(path, "type"), "Invalid value", schema_type, f"must be {what}")


def _not_supported(path: str, value: Any, supported: tuple[str, ...]) -> FieldError:
    detail = "supported values: " + ", ".join(go_quote(v) for v in supported)
    return FieldError(path, "Unsupported value", value, detail)


def _is_int_or_string_any_of(any_of: Any) -> bool:
    return (
        isinstance(any_of, list)
        and len(any_of) == 2
        and (
            [dict(s) if isinstance(s, Mapping) else s for s in any_of]
            == [{"type": "integer"}, {"type": "string"}]
        )
    )


def _structural_invariants(schema: Schema, level: str, path: str) -> Iterator[FieldError]:
    """validateStructuralInvariants (level: root | item | field)."""
    schema_type = schema.get("type") or ""
    items = _items(schema)
    if schema_type == "array" and items is None:
        yield FieldError(_child(path, "items"), "Required value", detail="must be specified")
    if items is not None:
        yield from _structural_invariants(items, "item", _child(path, "items"))
    for name, sub in _properties(schema).items():
        if isinstance(sub, Mapping):
            yield from _structural_invariants(sub, "field", _key(_child(path, "properties"), name))
    additional = schema.get("additionalProperties")
    if additional is not None:
        if level == "root":
            yield FieldError(
                _child(path, "additionalProperties"),
                "Forbidden",
                detail="must not be used at the root",
            )
        if isinstance(additional, Mapping):
            yield from _structural_invariants(
                additional, "field", _child(path, "additionalProperties")
            )
    int_or_string = _flag(schema, "x-kubernetes-int-or-string")
    preserve = _flag(schema, "x-kubernetes-preserve-unknown-fields")
    embedded = _flag(schema, "x-kubernetes-embedded-resource")
    if int_or_string and preserve:
        yield FieldError(
            _child(path, "x-kubernetes-preserve-unknown-fields"),
            "Invalid value",
            True,
            "must be false if x-kubernetes-int-or-string is true",
        )
    if int_or_string and embedded:
        yield FieldError(
            _child(path, "x-kubernetes-embedded-resource"),
            "Invalid value",
            True,
            "must be false if x-kubernetes-int-or-string is true",
        )
    yield from _value_validation_errors(schema, level, path)
    if embedded and schema_type != "object":
        yield _type_must_be(path, schema_type, "object if x-kubernetes-embedded-resource is true")
    elif not schema_type and not int_or_string and not preserve:
        detail = {
            "root": "must not be empty at the root",
            "item": "must not be empty for specified array items",
            "field": "must not be empty for specified object fields",
        }[level]
        yield FieldError(_child(path, "type"), "Required value", detail=detail)
    if embedded and additional is not None:
        yield FieldError(
            _child(path, "additionalProperties"),
            "Forbidden",
            detail="must not be used if x-kubernetes-embedded-resource is set",
        )
    if level == "root" and schema_type and schema_type != "object":
        yield FieldError(
            _child(path, "type"), "Invalid value", schema_type, "must be object at the root"
        )
    check_metadata = level == "root" or embedded
    properties = _properties(schema)
    for name in ("kind", "apiVersion"):
        sub = properties.get(name)
        if check_metadata and isinstance(sub, Mapping) and sub.get("type") != "string":
            yield FieldError(
                _child(_key(_child(path, "properties"), name), "type"),
                "Invalid value",
                sub.get("type") or "",
                "must be string",
            )
    metadata = properties.get("metadata")
    if isinstance(metadata, Mapping):
        yield from _metadata_invariants(
            metadata, check_metadata, level, _key(_child(path, "properties"), "metadata")
        )
    if embedded and not preserve and not properties:
        yield FieldError(
            _child(path, "properties"),
            "Required value",
            detail="must not be empty if x-kubernetes-embedded-resource is true without "
            "x-kubernetes-preserve-unknown-fields",
        )


def _metadata_invariants(
    metadata: Schema, check_metadata: bool, level: str, path: str
) -> Iterator[FieldError]:
    if check_metadata and metadata.get("type") != "object":
        yield FieldError(
            _child(path, "type"), "Invalid value", metadata.get("type") or "", "must be object"
        )
    if level == "root":
        # Only `type: object` and restrictions of name and generateName are allowed.
        allowed = {"type", "default"}
        properties = _properties(metadata)
        if properties and set(properties) <= {"name", "generateName"}:
            allowed.add("properties")
        if set(metadata) - allowed:
            yield FieldError(
                path,
                "Forbidden",
                detail="must not specify anything other than name and generateName, but "
                "metadata is implicitly specified",
            )


def _value_validation_errors(schema: Schema, level: str, path: str) -> Iterator[FieldError]:
    """validateValueValidation: what anyOf/allOf/oneOf/not may contain."""
    skip_any_of = _is_int_or_string_any_of(schema.get("anyOf"))
    all_of = schema.get("allOf") or []
    skip_first_all_of_any_of = (
        bool(all_of)
        and isinstance(all_of[0], Mapping)
        and (_is_int_or_string_any_of(all_of[0].get("anyOf")))
    )
    if not skip_any_of:
        for index, sub in enumerate(schema.get("anyOf") or []):
            yield from _nested_errors(sub, False, level, f"{_child(path, 'anyOf')}[{index}]")
    for index, sub in enumerate(all_of):
        skip = skip_first_all_of_any_of and index == 0
        yield from _nested_errors(sub, skip, level, f"{_child(path, 'allOf')}[{index}]")
    for index, sub in enumerate(schema.get("oneOf") or []):
        yield from _nested_errors(sub, False, level, f"{_child(path, 'oneOf')}[{index}]")
    if isinstance(schema.get("not"), Mapping):
        yield from _nested_errors(schema["not"], False, level, _child(path, "not"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern:
        problem = go_regexp_error(pattern)
        if problem:
            yield FieldError(
                _child(path, "pattern"),
                "Invalid value",
                pattern,
                f"must be a valid regular expression, but isn't: {problem}",
            )


def go_regexp_error(pattern: str) -> str:
    """Why Go's regexp (RE2) refuses a pattern, or "": RE2 has no lookaround, atomic groups or
    backreferences, which Python's re accepts."""
    for match in re.finditer(r"\\.|\(\?(?:<=|<!|=|!|>)", pattern):
        token = match.group()
        if token.startswith("(?"):
            return f"error parsing regexp: invalid or unsupported Perl syntax: `{token}`"
        if token[1] in "123456789":
            return f"error parsing regexp: invalid escape sequence: `{token}`"
    try:
        re.compile(pattern)
    except re.error as error:
        if "missing )" in str(error):
            return f"error parsing regexp: missing closing ): `{pattern}`"
        if "unbalanced parenthesis" in str(error):
            return f"error parsing regexp: unexpected ): `{pattern}`"
        return f"error parsing regexp: {error}"
    return ""


def _nested_errors(schema: Any, skip_any_of: bool, level: str, path: str) -> Iterator[FieldError]:
    """validateNestedValueValidation: no types, defaults, descriptions or extensions inside."""
    if not isinstance(schema, Mapping):
        return
    nested = dict(schema)
    if skip_any_of:
        nested.pop("anyOf", None)
    yield from _value_validation_errors(nested, level, path)
    items = _items(schema)
    if items is not None:
        yield from _nested_errors(items, False, level, _child(path, "items"))
    for name, sub in _properties(schema).items():
        yield from _nested_errors(sub, False, "field", _key(_child(path, "properties"), name))
    if schema.get("type"):
        yield FieldError(_child(path, "type"), "Forbidden", detail="must be empty to be structural")
    if "additionalProperties" in schema:
        yield FieldError(
            _child(path, "additionalProperties"),
            "Forbidden",
            detail="must be undefined to be structural",
        )
    if "default" in schema:
        yield FieldError(
            _child(path, "default"), "Forbidden", detail="must be undefined to be structural"
        )
    for keyword in ("title", "description"):
        if schema.get(keyword):
            yield FieldError(
                _child(path, keyword), "Forbidden", detail="must be empty to be structural"
            )
    if schema.get("nullable") is True:
        yield FieldError(
            _child(path, "nullable"), "Forbidden", detail="must be false to be structural"
        )
    if "externalDocs" in schema:
        yield FieldError(
            _child(path, "externalDocs"), "Forbidden", detail="must be undefined to be structural"
        )
    for extension, detail in _FORBIDDEN_NESTED_EXTENSIONS.items():
        if schema.get(extension) not in (None, False, []):
            yield FieldError(_child(path, extension), "Forbidden", detail=detail)
    if "metadata" in _properties(schema):
        yield FieldError(
            _key(_child(path, "properties"), "metadata"),
            "Forbidden",
            detail="must not be specified in a nested context",
        )


def _structural_completeness(schema: Schema, path: str) -> Iterator[FieldError]:
    """validateStructuralCompleteness: the properties and items the root's value validations
    (allOf/anyOf/oneOf/not) mention must be specified. Like the real server, only the root's
    value validations are checked."""
    for keyword in _NESTED_KEYWORDS:
        for index, sub in enumerate(schema.get(keyword) or []):
            if isinstance(sub, Mapping):
                yield from _nested_completeness(
                    sub, schema, path, f"{_child(path, keyword)}[{index}]"
                )
    if isinstance(schema.get("not"), Mapping):
        yield from _nested_completeness(schema["not"], schema, path, _child(path, "not"))


def _nested_completeness(
    nested: Schema, structural: Schema | None, s_path: str, v_path: str
) -> Iterator[FieldError]:
    if structural is None:
        yield FieldError(s_path, "Required value", detail=f"because it is defined in {v_path}")
        return
    for keyword in _NESTED_KEYWORDS:
        for index, sub in enumerate(nested.get(keyword) or []):
            if isinstance(sub, Mapping):
                yield from _nested_completeness(
                    sub, structural, s_path, f"{_child(v_path, keyword)}[{index}]"
                )
    if isinstance(nested.get("not"), Mapping):
        yield from _nested_completeness(nested["not"], structural, s_path, _child(v_path, "not"))
    nested_items = _items(nested)
    if nested_items is not None:
        yield from _nested_completeness(
            nested_items, _items(structural), _child(s_path, "items"), _child(v_path, "items")
        )
    for name, sub in _properties(nested).items():
        if not isinstance(sub, Mapping):
            continue
        structural_sub = _properties(structural).get(name)
        s_child = _key(_child(s_path, "properties"), name)
        v_child = _key(_child(v_path, "properties"), name)
        if not isinstance(structural_sub, Mapping):
            yield FieldError(
                s_child, "Required value", detail=f"because it is defined in {v_child}"
            )
        else:
            yield from _nested_completeness(sub, structural_sub, s_child, v_child)


# =========================================================================================
# validate
# =========================================================================================


def too_long_detail(limit: int) -> str:
    """field.TooLong's detail (maxLength failures use it in current apimachinery)."""
    return f"may not be more than {limit} {'byte' if limit == 1 else 'bytes'}"


def too_many_detail(limit: int) -> str:
    """field.TooMany's detail."""
    return f"must have at most {limit} {'item' if limit == 1 else 'items'}"


def validate(obj: Mapping[str, Any], schema: Schema) -> list[FieldError]:
    """Validate a custom resource against its schema, with the real server's messages."""
    errors: list[FieldError] = []
    _validate_value(obj, schema, "", errors)
    _validate_embedded_resources(obj, schema, "", errors, root=True)
    return errors


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_matches(value: Any, allowed: list[str]) -> bool:
    actual = _json_type(value)
    if actual in allowed:
        return True
    if actual == "integer" and "number" in allowed:
        return True
    # A float with an integral value passes as an integer (swag.IsFloat64AJSONInteger).
    return actual == "number" and "integer" in allowed and float(value).is_integer()


def _schema_types(schema: Schema) -> list[str]:
    if _flag(schema, "x-kubernetes-int-or-string"):
        return ["integer", "string"]
    schema_type = schema.get("type")
    if isinstance(schema_type, str) and schema_type:
        return [schema_type]
    return []


def _in_body(path: str) -> str:
    return f"{path} in body"


def _validate_value(value: Any, schema: Schema, path: str, errors: list[FieldError]) -> None:
    if value is None and schema.get("nullable") is True:
        return
    types = _schema_types(schema)
    if types and not _type_matches(value, types):
        actual = _json_type(value)
        errors.append(
            FieldError(
                path,
                "Invalid value",
                actual,
                f"{_in_body(path)} must be of type {','.join(types)}: {go_quote(actual)}",
                reason="FieldValueTypeInvalid",
            )
        )
        return
    if value is None:
        return
    _validate_enum(value, schema, path, errors)
    if isinstance(value, str):
        _validate_string(value, schema, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(value, schema, path, errors)
    elif isinstance(value, list):
        _validate_array(value, schema, path, errors)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, errors)
    _validate_junctions(value, schema, path, errors)


def _validate_enum(value: Any, schema: Schema, path: str, errors: list[FieldError]) -> None:
    enum = schema.get("enum")
    if not isinstance(enum, list) or not enum:
        return
    if any(_json_equal(value, allowed) for allowed in enum):
        return
    supported = [a if isinstance(a, str) else _json_text(a) for a in enum]
    errors.append(_not_supported(path, value, tuple(supported)))


def _json_equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return bool(left == right)


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def _validate_string(value: str, schema: Schema, path: str, errors: list[FieldError]) -> None:
    length = len(value)
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and length > max_length:
        errors.append(FieldError(path, "Too long", value, too_long_detail(max_length)))
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and length < min_length:
        errors.append(
            FieldError(
                path,
                "Invalid value",
                value,
                f"{_in_body(path)} should be at least {min_length} chars long",
            )
        )
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True
        if not matched:
            errors.append(
                FieldError(
                    path, "Invalid value", value, f"{_in_body(path)} should match '{pattern}'"
                )
            )
    format_name = schema.get("format")
    checker = _FORMATS.get(format_name) if isinstance(format_name, str) else None
    if checker is not None and not checker(value):
        errors.append(
            FieldError(
                path,
                "Invalid value",
                value,
                f"{_in_body(path)} must be of type {format_name}: {go_quote(value)}",
                reason="FieldValueTypeInvalid",
            )
        )


def _validate_number(value: float, schema: Schema, path: str, errors: list[FieldError]) -> None:
    multiple_of = schema.get("multipleOf")
    if isinstance(multiple_of, int | float) and multiple_of:
        quotient = value / multiple_of
        if not float(quotient).is_integer():
            errors.append(
                FieldError(
                    path,
                    "Invalid value",
                    value,
                    f"{_in_body(path)} should be a multiple of {_go_number(multiple_of)}",
                )
            )
    maximum = schema.get("maximum")
    if isinstance(maximum, int | float):
        exclusive = schema.get("exclusiveMaximum") is True
        if value > maximum or (exclusive and value == maximum):
            relation = "less than" if exclusive else "less than or equal to"
            errors.append(
                FieldError(
                    path,
                    "Invalid value",
                    value,
                    f"{_in_body(path)} should be {relation} {_go_number(maximum)}",
                )
            )
    minimum = schema.get("minimum")
    if isinstance(minimum, int | float):
        exclusive = schema.get("exclusiveMinimum") is True
        if value < minimum or (exclusive and value == minimum):
            relation = "greater than" if exclusive else "greater than or equal to"
            errors.append(
                FieldError(
                    path,
                    "Invalid value",
                    value,
                    f"{_in_body(path)} should be {relation} {_go_number(minimum)}",
                )
            )


def _validate_array(value: list[Any], schema: Schema, path: str, errors: list[FieldError]) -> None:
    items = _items(schema)
    if items is not None:
        for index, item in enumerate(value):
            _validate_value(item, items, f"{path}[{index}]", errors)
    min_items = schema.get("minItems")
    if isinstance(min_items, int) and len(value) < min_items:
        errors.append(
            FieldError(
                path,
                "Invalid value",
                len(value),
                f"{_in_body(path)} should have at least {min_items} items",
            )
        )
    max_items = schema.get("maxItems")
    if isinstance(max_items, int) and len(value) > max_items:
        errors.append(FieldError(path, "Too many", len(value), too_many_detail(max_items)))
    if schema.get("uniqueItems") is True:
        seen: list[Any] = []
        for item in value:
            if any(_json_equal(item, other) for other in seen):
                detail = f"{_in_body(path)} shouldn't contain duplicates"
                errors.append(FieldError(path, "Invalid value", "", detail))
                break
            seen.append(item)


def _validate_object(
    value: dict[str, Any], schema: Schema, path: str, errors: list[FieldError]
) -> None:
    count = len(value)
    min_properties = schema.get("minProperties")
    if isinstance(min_properties, int) and count < min_properties:
        errors.append(
            FieldError(
                path,
                "Invalid value",
                count,
                f"{_in_body(path)} should have at least {min_properties} properties",
            )
        )
    max_properties = schema.get("maxProperties")
    if isinstance(max_properties, int) and count > max_properties:
        errors.append(FieldError(path, "Too many", count, too_many_detail(max_properties)))
    properties = _properties(schema)
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        if key in properties:
            continue
        if additional is False:
            errors.append(
                FieldError(
                    path, "Invalid value", key, f"{path}.{key} in body is a forbidden property"
                )
            )
        elif isinstance(additional, Mapping):
            _validate_value(item, additional, _child(path, key), errors)
    for name, sub in properties.items():
        if name in value and isinstance(sub, Mapping):
            _validate_value(value[name], sub, _child(path, name), errors)
    for name in schema.get("required") or []:
        if name not in value:
            errors.append(FieldError(_child(path, name), "Required value"))


def _validate_junctions(value: Any, schema: Schema, path: str, errors: list[FieldError]) -> None:
    """allOf / anyOf / oneOf / not (the int-or-string anyOf is covered by the type check)."""
    for sub in schema.get("allOf") or []:
        if isinstance(sub, Mapping):
            _validate_value(value, sub, path, errors)
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and any_of and not _is_int_or_string_any_of(any_of):
        if not any(_passes(value, sub, path) for sub in any_of if isinstance(sub, Mapping)):
            errors.append(
                FieldError(
                    path,
                    "Invalid value",
                    "",
                    f"{go_quote(path)} must validate at least one schema (anyOf)",
                )
            )
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of:
        passing = sum(1 for sub in one_of if isinstance(sub, Mapping) and _passes(value, sub, path))
        if passing != 1:
            errors.append(
                FieldError(
                    path,
                    "Invalid value",
                    "",
                    f"{go_quote(path)} must validate one and only one schema (oneOf)",
                )
            )
    not_schema = schema.get("not")
    if isinstance(not_schema, Mapping) and _passes(value, not_schema, path):
        errors.append(
            FieldError(
                path, "Invalid value", "", f"{go_quote(path)} must not validate the schema (not)"
            )
        )


def _passes(value: Any, schema: Schema, path: str) -> bool:
    found: list[FieldError] = []
    _validate_value(value, schema, path, found)
    return not found


def _validate_embedded_resources(
    value: Any, schema: Schema, path: str, errors: list[FieldError], root: bool = False
) -> None:
    """apiVersion and kind of x-kubernetes-embedded-resource objects (schema/objectmeta)."""
    if isinstance(value, dict):
        if _flag(schema, "x-kubernetes-embedded-resource") and not root:
            errors.extend(_embedded_resource_errors(value, path))
        properties = _properties(schema)
        additional = _additional_schema(schema)
        for key, item in value.items():
            sub = properties.get(key, additional)
            if isinstance(sub, Mapping):
                _validate_embedded_resources(item, sub, _child(path, key), errors)
    elif isinstance(value, list):
        items = _items(schema)
        if items is not None:
            for index, item in enumerate(value):
                _validate_embedded_resources(item, items, f"{path}[{index}]", errors)


def _embedded_resource_errors(value: Mapping[str, Any], path: str) -> Iterator[FieldError]:
    for name in ("apiVersion", "kind"):
        if name not in value:
            yield FieldError(_child(path, name), "Required value", detail="must not be empty")
    api_version = value.get("apiVersion")
    if "apiVersion" in value:
        if not isinstance(api_version, str):
            yield FieldError(
                _child(path, "apiVersion"), "Invalid value", api_version, "must be a string"
            )
        elif not api_version:
            yield FieldError(_child(path, "apiVersion"), "Invalid value", "", "must not be empty")
        elif api_version.count("/") > 1:
            yield FieldError(
                _child(path, "apiVersion"),
                "Invalid value",
                api_version,
                f"unexpected GroupVersion string: {api_version}",
            )
    kind = value.get("kind")
    if "kind" in value:
        if not isinstance(kind, str):
            yield FieldError(_child(path, "kind"), "Invalid value", kind, "must be a string")
        elif not kind:
            yield FieldError(_child(path, "kind"), "Invalid value", "", "must not be empty")
        elif problems := dns1035_label_errors(kind.lower()):
            yield FieldError(
                _child(path, "kind"),
                "Invalid value",
                kind,
                "may have mixed case, but should otherwise match: " + ",".join(problems),
            )


_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?\Z"
)


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def _is_date_time(text: str) -> bool:
    match = _DATE_TIME.match(text)
    if not match or not _is_date(match.group(1)):
        return False
    hour, minute, second = (int(match.group(n)) for n in (2, 3, 4))
    return hour < 24 and minute < 60 and second < 61


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return len(text) == 36


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _is_ip(version: int) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            return ipaddress.ip_address(text).version == version
        except ValueError:
            return False

    return check


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return "/" in text


# The string formats checked (loosely); any other format is accepted as kube-openapi does.
_FORMATS: Mapping[str, Callable[[str], bool]] = {
    "date-time": _is_date_time,
    "datetime": _is_date_time,
    "date": _is_date,
    "uuid": _is_uuid,
    "byte": _is_base64,
    "ipv4": _is_ip(4),
    "ipv6": _is_ip(6),
    "cidr": _is_cidr,
}


# =========================================================================================
# prune
# =========================================================================================

_RESOURCE_META_FIELDS = ("apiVersion", "kind", "metadata")
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def prune(obj: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """Drop fields the schema does not specify (pruning/algorithm.go), keeping apiVersion, kind
    and metadata at the root and in embedded resources, and everything under
    x-kubernetes-preserve-unknown-fields (while still pruning the fields it does specify)."""
    result = copy.deepcopy(dict(obj))
    _prune(result, schema, resource_root=True)
    return result


def _prune(value: Any, schema: Schema | None, resource_root: bool = False) -> None:
    if schema is not None and _flag(schema, "x-kubernetes-preserve-unknown-fields"):
        _skip_prune(value, schema)
        return
    if isinstance(value, dict):
        if schema is None:
            value.clear()
            return
        embedded = _flag(schema, "x-kubernetes-embedded-resource")
        properties = _properties(schema)
        additional = schema.get("additionalProperties")
        for key in list(value):
            if embedded and key in _RESOURCE_META_FIELDS:
                if key == "metadata":
                    _prune_object_meta(value)
                continue
            if key in properties:
                _prune(value[key], properties[key])
            elif additional is not None:
                _prune(value[key], _additional_schema(schema))
            elif not (resource_root and key in _RESOURCE_META_FIELDS):
                del value[key]
    elif isinstance(value, list):
        items = _items(schema) if schema is not None else None
        for item in value:
            _prune(item, items)


def _skip_prune(value: Any, schema: Schema | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        embedded = _flag(schema, "x-kubernetes-embedded-resource")
        properties = _properties(schema)
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if embedded and key in _RESOURCE_META_FIELDS:
                if key == "metadata":
                    _prune_object_meta(value)
                continue
            if key in properties:
                _prune(item, properties[key])
            elif additional is not None:
                _prune(item, _additional_schema(schema))
    elif isinstance(value, list):
        for item in value:
            _skip_prune(item, _items(schema))


def _prune_object_meta(resource: dict[str, Any]) -> None:
    # Embedded metadata is decoded as an ObjectMeta: unknown fields go.
    metadata = resource.get("metadata")
    if isinstance(metadata, dict):
        for key in [k for k in metadata if k not in OBJECT_META_FIELDS]:
            del metadata[key]


# =========================================================================================
# apply_defaults
# =========================================================================================


def apply_defaults(obj: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """defaulting/algorithm.go: a property's default fills it when it is absent, or null while
    not nullable; recursively, in additionalProperties values and in array items."""
    result = copy.deepcopy(dict(obj))
    _default(result, schema)
    return result


def _is_non_nullable_null(value: Any, schema: Schema | None) -> bool:
    return value is None and schema is not None and schema.get("nullable") is not True


def _default(value: Any, schema: Schema | None) -> None:
    if schema is None:
        return
    if isinstance(value, dict):
        properties = _properties(schema)
        for name, sub in properties.items():
            if not isinstance(sub, Mapping) or sub.get("default") is None:
                continue
            if name not in value or _is_non_nullable_null(value[name], sub):
                value[name] = copy.deepcopy(sub["default"])
        additional = _additional_schema(schema)
        has_additional = schema.get("additionalProperties") not in (None, False)
        for key, item in list(value.items()):
            if key in properties:
                sub = properties[key]
                _default(item, sub if isinstance(sub, Mapping) else None)
            elif has_additional:
                if _is_non_nullable_null(item, additional) and additional is not None:
                    value[key] = copy.deepcopy(additional.get("default"))
                _default(item, additional)
    elif isinstance(value, list):
        items = _items(schema)
        for index, item in enumerate(value):
            if _is_non_nullable_null(item, items) and items is not None:
                value[index] = copy.deepcopy(items.get("default"))
            _default(item, items)
