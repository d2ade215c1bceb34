"""Properties shared by every reflection forge (shared.forge.metadata, shared.forge.compare and
the configmap, secret, service, ingress and endpointslice forges built on them), over generated
objects. The rules themselves are golden cases."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.api.offloading_patch import OffloadingPatch
from shared.forge.compare import compared_form, needs_update, updated_remote
from shared.forge.configmap import remote_configmap
from shared.forge.endpointslice import EndpointDestination, remote_endpointslice
from shared.forge.ingress import remote_ingress
from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, reflection_config, remote_metadata
from shared.forge.secret import remote_secret
from shared.forge.service import remote_service
from shared.ownership import is_owned
from shared.wellknown import ENDPOINTSLICE_MANAGED_BY_LABEL, SERVICE_NAME_LABEL
from tests.shared.forge.objects import (
    EXAMPLES,
    HOME,
    REMOTE,
    REMOTE_NS,
    configmaps,
    configs_skipping,
    endpointslices,
    ingresses,
    secrets,
    services,
)

BOOKKEEPING = (
    "uid",
    "resourceVersion",
    "generation",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "creationTimestamp",
    "deletionTimestamp",
)


# Every forge, as "home object + config → remote object".
Forge = Callable[[dict[str, Any], ReflectionConfig], dict[str, Any]]
FORGES: list[tuple[st.SearchStrategy[dict[str, Any]], Forge]] = [
    (configmaps(), lambda obj, config: remote_configmap(obj, REMOTE_NS, config)),
    (secrets(), lambda obj, config: remote_secret(obj, REMOTE_NS, config)),
    (services(), lambda obj, config: remote_service(obj, REMOTE_NS, config)),
    (ingresses(), lambda obj, config: remote_ingress(obj, REMOTE_NS, config)),
    (
        endpointslices(),
        lambda obj, config: remote_endpointslice(
            obj,
            REMOTE_NS,
            config,
            EndpointDestination(virtual_node_names=frozenset({"liqo-remote"})),
        ),
    ),
]


@st.composite
def forged(draw: st.DrawFn) -> tuple[dict[str, Any], ReflectionConfig, dict[str, Any], Forge]:
    """(home object, config, forged remote object, forge) for any kind; the input is checked
    unchanged."""
    objects, forge = draw(st.sampled_from(FORGES))
    local = draw(objects)
    config = draw(configs_skipping(local))
    before = copy.deepcopy(local)
    remote = forge(local, config)
    assert local == before, "forging mutated its input"
    return local, config, remote, forge


# Labels the forges force on every copy, whatever the skip lists say.
FORCED_LABELS = {
    "offloading.liqo.io/origin",
    "offloading.liqo.io/destination",
    ENDPOINTSLICE_MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
}


@EXAMPLES
@given(forged())
def test_forged_objects_are_ours_and_carry_nothing_the_home_cluster_keeps(case: Any) -> None:
    _, config, remote, _ = case
    assert is_owned(remote, HOME, REMOTE)
    meta = remote["metadata"]
    assert meta["namespace"] == REMOTE_NS
    assert not (set(meta.get("labels", {})) & (config.labels_not_reflected - FORCED_LABELS))
    assert not (set(meta.get("annotations", {})) & config.annotations_not_reflected)
    assert "kubectl.kubernetes.io/last-applied-configuration" not in meta.get("annotations", {})
    assert not set(meta) & set(BOOKKEEPING)
    assert "status" not in remote


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


def test_skip_lists_merge_the_global_flags_with_the_virtual_nodes_offloading_patch() -> None:
    patch = OffloadingPatch(labels_not_reflected=["b"], annotations_not_reflected=["y"])
    config = reflection_config(
        HOME,
        REMOTE,
        labels_not_reflected=["a"],
        annotations_not_reflected=["x"],
        offloading_patch=patch,
    )
    assert config.labels_not_reflected == {"a", "b"}
    assert config.annotations_not_reflected == {"x", "y"}
    meta = remote_metadata(
        {
            "metadata": {
                "name": "n",
                "labels": {"a": "1", "b": "2", "c": "3"},
                "annotations": {"x": "1", "y": "2", "z": "3"},
            }
        },
        REMOTE_NS,
        config,
    )
    assert set(meta["labels"]) == {
        "c",
        "offloading.liqo.io/origin",
        "offloading.liqo.io/destination",
    }
    assert meta["annotations"] == {"z": "3"}


def test_timestamps_are_written_and_read_as_the_api_server_does() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    import pytest

    from shared.rfc3339 import parse_rfc3339, rfc3339

    moment = datetime(2026, 11, 24, 13, 5, 7, 900000, tzinfo=timezone(timedelta(hours=2)))
    assert rfc3339(moment) == "2026-11-24T11:05:07Z"
    assert parse_rfc3339("2026-11-24T11:05:07Z") == datetime(2026, 11, 24, 11, 5, 7, tzinfo=UTC)
    with pytest.raises(ValueError, match="without a time zone"):
        parse_rfc3339("2026-11-24T11:05:07")
    with pytest.raises(ValueError, match="naive"):
        rfc3339(datetime(2026, 11, 24))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)
"""What a decoded JSON object holds (integers within 64 bits and finite floats, as JSON decoders
and the API server carry them)."""


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
