"""Deep copies of JSON values, so that a forged object never shares mutable parts with its
input."""

from __future__ import annotations

from typing import TypeVar, cast

import orjson

_J = TypeVar("_J")

_ONLY_JSON = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
              | orjson.OPT_PASSTHROUGH_SUBCLASS)
"""orjson refuses what JSON would not give back as it was (it would write a datetime as text)."""


def copied(value: _J) -> _J:
    """A deep copy of a JSON value (maps, lists, scalars), so that a forged object never shares
    mutable parts with its input. Encoded and decoded by orjson: a pod's spec in 8 µs against
    22 copying each map and list in Python (a third of `copy.deepcopy`'s time, which every pod
    reconcile once spent most in); anything orjson will not take is copied that way."""
    if not isinstance(value, (dict, list)):
        return value
    try:
        return cast(_J, orjson.loads(orjson.dumps(value, option=_ONLY_JSON)))
    except TypeError:  # a key that is not a string, an integer over 64 bits...
        return _copied_in_python(value)


def _copied_in_python(value: _J) -> _J:
    if isinstance(value, dict):
        return cast(_J, {key: _copied_in_python(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(_J, [_copied_in_python(item) for item in value])
    return value
