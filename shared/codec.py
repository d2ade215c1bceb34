"""msgpack encoding of the records the home agent may cache (DESIGN.md section 8).

Every record travels in a versioned envelope, `{"v": 1, "kind": <kind>, "data": <fields>}`:
`kind` names one of annex's custom resource kinds (decoded back into its model) or is `"dict"`
for a plain Kubernetes object. Datetimes are msgpack Timestamps (ext type -1), so they must be
timezone-aware: a naive one has no defined instant, and is refused with the path of the field.
A cache written by another annex version is refused, not misread: callers drop and rebuild it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final, TypeVar

import msgpack
from pydantic import ValidationError

from shared.api.registry import MODELS_BY_KIND
from shared.api.resource import CustomResource

CODEC_VERSION: Final = 1
PLAIN_DICT_KIND: Final = "dict"

_LEAF_TYPES = (str, bytes, int, float, bool, type(None))

Record = CustomResource | Mapping[str, Any]
ResourceT = TypeVar("ResourceT", bound=CustomResource)


class CodecError(ValueError):
    """A record that cannot be encoded, or bytes that are not a record this version can read."""


def encode(record: Record) -> bytes:
    """The msgpack bytes of `record` (one of annex's resources, or a plain dict)."""
    if isinstance(record, CustomResource):
        kind = record.definition.kind
        # Every field, None included: extra fields set to null must come back too.
        data: Any = record.model_dump(by_alias=True, mode="python")
    elif isinstance(record, Mapping):
        kind, data = PLAIN_DICT_KIND, record
    else:
        raise CodecError(f"cannot encode a {type(record).__name__}: not an annex resource or dict")
    _check_encodable(data, "data")
    try:
        packed: bytes = msgpack.packb(
            {"v": CODEC_VERSION, "kind": kind, "data": data}, datetime=True
        )
    except (TypeError, ValueError, OverflowError) as error:
        raise CodecError(f"cannot encode {kind}: {error}") from error
    return packed


def decode(payload: bytes) -> CustomResource | dict[str, Any]:
    """The record `encode` turned into `payload`: the model for a resource, else a dict."""
    envelope = _unpack(payload)
    version = envelope.get("v")
    if version != CODEC_VERSION:
        raise CodecError(
            f"unsupported codec version {version!r} (this annex reads {CODEC_VERSION})"
        )
    kind, data = envelope.get("kind"), envelope.get("data")
    if not isinstance(data, dict):
        raise CodecError(f"malformed record: data is a {type(data).__name__}, not a map")
    if kind == PLAIN_DICT_KIND:
        return data
    model = MODELS_BY_KIND.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise CodecError(f"unknown record kind {kind!r}")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise CodecError(f"invalid {kind} record: {error}") from error


def decode_as(payload: bytes, model: type[ResourceT]) -> ResourceT:
    """`decode`, insisting that the record is a `model`."""
    record = decode(payload)
    if not isinstance(record, model):
        found = record.kind if isinstance(record, CustomResource) else PLAIN_DICT_KIND
        raise CodecError(f"expected a {model.definition.kind} record, found {found}")
    return record


def _unpack(payload: bytes) -> dict[str, Any]:
    try:
        # timestamp=3: Timestamps come back as aware datetimes in UTC.
        envelope = msgpack.unpackb(payload, timestamp=3)
    except (ValueError, TypeError, OverflowError) as error:  # ExtraData, ... are ValueErrors
        raise CodecError(f"not a msgpack record: {error}") from error
    if not isinstance(envelope, dict):
        raise CodecError(f"not a record envelope: a {type(envelope).__name__}")
    return envelope


def _check_encodable(value: Any, path: str) -> None:
    """Refuses, naming the field, what msgpack would drop or misread: naive datetimes, objects."""
    if isinstance(value, _LEAF_TYPES):
        return
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise CodecError(f"naive datetime at {path} ({value.isoformat()}): give it a timezone")
        try:
            value.astimezone(datetime.UTC)  # what decoding yields: it must exist
        except OverflowError as error:
            raise CodecError(f"datetime at {path} ({value.isoformat()}): {error} in UTC") from error
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CodecError(f"non-string key {key!r} at {path}")
            _check_encodable(item, f"{path}.{key}")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_encodable(item, f"{path}[{index}]")
        return
    raise CodecError(f"cannot encode a {type(value).__name__} at {path}")
