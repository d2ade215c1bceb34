"""shared.forge.json_copy: a copy equals its value and shares no map or list with it, whatever
JSON cannot carry included."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given

from shared.forge.json_copy import copied
from tests.shared.forge.objects import JSON_VALUES


@given(JSON_VALUES)
def test_a_copy_equals_its_json_value_and_shares_no_map_or_list_with_it(value: Any) -> None:
    copy_ = copied(value)
    assert copy_ == value and type(copy_) is type(value)

    def containers(each: Any) -> list[int]:
        inner = each.values() if isinstance(each, dict) else each if isinstance(each, list) else ()
        own = [id(each)] if isinstance(each, (dict, list)) else []
        return own + [found for item in inner for found in containers(item)]

    assert not set(containers(copy_)) & set(containers(value))


def test_what_json_cannot_carry_is_copied_too() -> None:
    """Keys that are not strings, integers over 64 bits: copied as they are, as deeply."""
    value = {1: [{"big": 2**70}], "when": [datetime(2024, 1, 2, tzinfo=UTC)]}
    copy_ = copied(value)
    assert copy_ == value and copy_[1][0] is not value[1][0]
    assert copy_["when"][0] is value["when"][0]  # a scalar: shared, as every scalar
