"""shared.forge.compare: an unchanged copy needs no write and drift is overwritten (over every
reflection forge's generated objects, as the remote API server stores them), and the compared
form drops what the wire omits and keeps zeros and false."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.forge.compare import compared_form, needs_update, updated_remote
from tests.shared.forge.objects import EXAMPLES, JSON_VALUES, forged


def as_stored_remotely(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as the remote API server returns it after a create: bookkeeping added, and the
    defaults it fills in (allocations, protocols, the default ingress class) set."""
    stored = copy.deepcopy(obj)
    stored["metadata"].update(uid="remote-uid", resourceVersion="9")
    spec: dict[str, Any] = stored.get("spec") or {}
    if obj["kind"] == "Service":
        if spec.get("clusterIP") != "None":
            spec.update(clusterIP="10.100.0.1", clusterIPs=["10.100.0.1"])
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("ipFamilies", ["IPv4"])
        for port in spec["ports"]:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port["port"])
            if spec["type"] != "ClusterIP":
                port.setdefault("nodePort", 31000)
        stored["status"] = {"loadBalancer": {}}
    if obj["kind"] == "Ingress":
        spec.setdefault("ingressClassName", "remote-default")
    if obj["kind"] == "EndpointSlice":
        for port in stored.get("ports", []):
            port.setdefault("protocol", "TCP")
    return stored


@EXAMPLES
@given(forged())
def test_unchanged_objects_need_no_write_and_drift_is_overwritten(case: Any) -> None:
    local, config, remote, forge = case
    stored = as_stored_remotely(remote)
    assert not needs_update(stored, forge(local, config))
    stored["metadata"]["labels"]["drift"] = "yes"
    assert needs_update(stored, remote)
    body = updated_remote(stored, remote)
    assert body["metadata"]["resourceVersion"] == "9"
    assert not needs_update(body, remote)


def _reference_form(value: Any) -> Any:
    """The rule as stated: empty strings, maps and lists and nulls are not set, in maps
    dropped, in lists kept as null (their positions mean something)."""
    def absent(item: Any) -> bool:
        return item is None or item == "" or item == {} or item == []
    if isinstance(value, Mapping):
        kept = {key: _reference_form(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if not absent(item)}
    if isinstance(value, list):
        return [None if absent(item) else item for item in map(_reference_form, value)]
    return value


@given(content=st.dictionaries(st.text(max_size=3), JSON_VALUES, max_size=4))
def test_the_compared_form_drops_what_the_wire_omits_and_keeps_zeros_and_false(
        content: dict[str, Any]) -> None:
    obj = {"metadata": {"labels": {"a": "", "b": "x"}}, "data": content}
    form = compared_form(obj)
    assert form == {"labels": {"b": "x"}, **_reference_form({"data": content})}
    # Any Mapping, not only a decoded dict, is compared the same way.
    assert compared_form(MappingProxyType({**obj, "data": MappingProxyType(content)})) == form
