"""The msgpack codec: every model and plain dict round-trips; bad input fails with CodecError."""

import datetime
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.api.namespace_map import NamespaceMap
from shared.api.quota import Quota
from shared.api.registry import RESOURCE_MODELS
from shared.api.resource import CustomResource
from shared.api.shadowpod import ShadowPod
from shared.codec import CODEC_VERSION, CodecError, decode, decode_as, encode
from tests.shared.api_strategies import json_like, resources

# --- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", RESOURCE_MODELS, ids=lambda m: m.definition.kind)
def test_every_model_round_trips(model: type[CustomResource]) -> None:
    # generating whole resources is what costs: 400 per model still reach every field type
    @settings(max_examples=400, deadline=None)
    @given(resources(model))
    def round_trips(resource: CustomResource) -> None:
        decoded = decode(encode(resource))
        assert type(decoded) is model
        assert decoded == resource  # datetimes: the same instant, now in UTC

    round_trips()


@settings(max_examples=2000, deadline=None)
@given(st.dictionaries(st.text(max_size=8), json_like, max_size=4))
def test_plain_dicts_round_trip(obj: dict[str, Any]) -> None:
    assert decode(encode(obj)) == obj


def test_datetimes_come_back_aware_and_in_utc_at_the_same_instant() -> None:
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    written = datetime.datetime(2024, 3, 1, 12, 30, 15, 123456, tzinfo=plus_two)
    read = decode(encode({"status": {"startTime": written}}))
    assert isinstance(read, dict)
    start = read["status"]["startTime"]
    assert start == written
    assert start.utcoffset() == datetime.timedelta(0)
    assert start.microsecond == 123456


def test_the_envelope_names_version_and_kind() -> None:
    shadowpod = ShadowPod.model_validate({"metadata": {"name": "web"}, "spec": {"pod": {}}})
    envelope = msgpack.unpackb(encode(shadowpod), timestamp=3)
    assert envelope["v"] == CODEC_VERSION == 1
    assert envelope["kind"] == "ShadowPod"
    assert envelope["data"]["metadata"]["name"] == "web"
    assert msgpack.unpackb(encode({"a": 1}))["kind"] == "dict"


def test_decode_as_insists_on_the_kind() -> None:
    quota = Quota.model_validate({"spec": {"consumerClusterId": "home"}})
    assert decode_as(encode(quota), Quota) == quota
    with pytest.raises(CodecError, match="expected a NamespaceMap record, found Quota"):
        decode_as(encode(quota), NamespaceMap)
    with pytest.raises(CodecError, match="found dict"):
        decode_as(encode({"spec": {}}), Quota)


# --- refusals ----------------------------------------------------------------------------------


def test_a_naive_datetime_is_refused_naming_the_field() -> None:
    pod = {"status": {"containerStatuses": [{"startedAt": datetime.datetime(2024, 1, 1)}]}}
    with pytest.raises(CodecError, match=r"naive datetime at data\.status\.containerStatuses\[0\]"):
        encode(pod)


def test_a_naive_datetime_inside_a_model_is_refused_naming_the_field() -> None:
    shadowpod = ShadowPod.model_validate(
        {"spec": {"pod": {"deadline": datetime.datetime(2024, 1, 1)}}}
    )
    with pytest.raises(CodecError, match=r"naive datetime at data\.spec\.pod\.deadline"):
        encode(shadowpod)


def test_a_datetime_with_no_utc_equivalent_is_refused() -> None:
    one_hour_ahead = datetime.timezone(datetime.timedelta(hours=1))
    with pytest.raises(CodecError, match=r"datetime at data\.t .*out of range in UTC"):
        encode({"t": datetime.datetime(1, 1, 1, tzinfo=one_hour_ahead)})
    earliest = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)
    assert decode(encode({"t": earliest})) == {"t": earliest}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"when": datetime.date(2024, 1, 1)}, r"cannot encode a date at data\.when"),
        ({"ids": {1, 2}}, r"cannot encode a set at data\.ids"),
        ({1: "one"}, "non-string key 1 at data"),
        ([1, 2], "cannot encode a list"),
    ],
)
def test_what_msgpack_would_drop_or_misread_is_refused(record: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        encode(record)


def test_an_unknown_envelope_version_is_refused() -> None:
    payload = msgpack.packb({"v": 2, "kind": "dict", "data": {}})
    with pytest.raises(CodecError, match="unsupported codec version 2"):
        decode(payload)
    with pytest.raises(CodecError, match="unsupported codec version None"):
        decode(msgpack.packb({"kind": "dict", "data": {}}))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (msgpack.packb({"v": 1, "kind": "Pod", "data": {}}), "unknown record kind 'Pod'"),
        (msgpack.packb({"v": 1, "kind": "dict", "data": [1]}), "data is a list"),
        (msgpack.packb([1, 2]), "not a record envelope"),
        (b"\xc1", "not a msgpack record"),
        (
            msgpack.packb({"v": 1, "kind": "dict", "data": {"t": msgpack.Timestamp(2**40)}}),
            "not a msgpack record",
        ),
        (encode({"a": 1})[:-1], "not a msgpack record"),
        (encode({"a": 1}) + b"\x00", "not a msgpack record"),
        (
            msgpack.packb({"v": 1, "kind": "Quota", "data": {"spec": {}}}),
            "invalid Quota record",
        ),
    ],
)
def test_bytes_that_are_not_a_readable_record_are_refused(payload: bytes, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        decode(payload)
