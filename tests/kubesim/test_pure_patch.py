"""kubesim.patch: merge, JSON and strategic merge patches as kube-apiserver applies them."""

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)

INVALID_422 = "the server rejected our request due to an error in our request"

# --- RFC 7386 merge patch --------------------------------------------------------------------


@pytest.mark.parametrize(
    "original, patch, result",
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ({"a": "x"}, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),
        ({"a": [1, 2]}, {"a": [None, {"x": None}]}, {"a": [None, {}]}),
        (
            {"metadata": {"labels": {"a": "1", "b": "2"}}},
            {"metadata": {"labels": {"a": None}}},
            {"metadata": {"labels": {"b": "2"}}},
        ),
    ],
)
def test_merge_patch_follows_rfc_7386(
    original: dict[str, Any], patch: dict[str, Any], result: dict[str, Any]
) -> None:
    assert apply_merge_patch(original, patch) == result


def test_merge_patch_does_not_modify_its_inputs() -> None:
    original = {"a": {"b": 1}}
    patch = {"a": {"c": {"d": None}}}
    apply_merge_patch(original, patch)
    assert original == {"a": {"b": 1}} and patch == {"a": {"c": {"d": None}}}


@pytest.mark.parametrize("patch", [None, [1], "x", 3])
def test_merge_patch_must_be_an_object(patch: Any) -> None:
    with pytest.raises(PatchError) as error:
        apply_merge_patch({"a": 1}, patch)
    assert (error.value.code, error.value.reason, error.value.message) == (
        400,
        "BadRequest",
        "Invalid JSON Patch",
    )


# --- RFC 6902 JSON patch ---------------------------------------------------------------------

OBJ = {"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"list": [1, 2]}}


@pytest.mark.parametrize(
    "operations, result",
    [
        ([], OBJ),
        (
            [{"op": "add", "path": "/metadata/labels/b", "value": "2"}],
            {**OBJ, "metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}},
        ),
        (
            [{"op": "remove", "path": "/metadata/labels/a"}],
            {**OBJ, "metadata": {"name": "x", "labels": {}}},
        ),
        (
            [{"op": "replace", "path": "/spec/list/0", "value": 9}],
            {**OBJ, "spec": {"list": [9, 2]}},
        ),
        ([{"op": "add", "path": "/spec/list/-", "value": 3}], {**OBJ, "spec": {"list": [1, 2, 3]}}),
        (
            [
                {"op": "test", "path": "/metadata/name", "value": "x"},
                {"op": "copy", "from": "/metadata/name", "path": "/spec/name"},
                {"op": "move", "from": "/spec/list", "path": "/spec/items"},
            ],
            {"metadata": OBJ["metadata"], "spec": {"name": "x", "items": [1, 2]}},
        ),
    ],
)
def test_json_patch_applies_rfc_6902_operations(
    operations: list[dict[str, Any]], result: dict[str, Any]
) -> None:
    assert apply_json_patch(OBJ, operations) == result


@pytest.mark.parametrize(
    "operations",
    [
        [{"op": "test", "path": "/metadata/name", "value": "y"}],
        [{"op": "test", "path": "/metadata/missing", "value": "y"}],
        [{"op": "remove", "path": "/metadata/missing"}],
        [{"op": "replace", "path": "/spec/missing", "value": 1}],
        [{"op": "add", "path": "/no/such/parent", "value": 1}],
        [{"op": "add", "path": "/spec/list/7", "value": 1}],
        [{"op": "bogus", "path": "/spec"}],
        [{"path": "/spec"}],
        [{"op": "add", "path": "spec", "value": 1}],
    ],
)
def test_failing_json_patch_operations_are_422_invalid(operations: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchError) as error:
        apply_json_patch(OBJ, operations)
    assert (error.value.code, error.value.reason, error.value.message) == (
        422,
        "Invalid",
        INVALID_422,
    )


def test_a_failed_test_leaves_the_object_unchanged() -> None:
    original = {"a": 1}
    with pytest.raises(PatchError):
        apply_json_patch(
            original,
            [{"op": "replace", "path": "/a", "value": 2}, {"op": "test", "path": "/a", "value": 1}],
        )
    assert original == {"a": 1}


@pytest.mark.parametrize(
    "operations, message",
    [
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ("x", "json: cannot unmarshal string into Go value of type jsonpatch.Patch"),
        (["x"], "json: cannot unmarshal string into Go value of type jsonpatch.Operation"),
    ],
)
def test_malformed_json_patches_are_400_bad_request(operations: Any, message: str) -> None:
    with pytest.raises(PatchError) as error:
        apply_json_patch(OBJ, operations)
    assert (error.value.code, error.value.reason, error.value.message) == (
        400,
        "BadRequest",
        message,
    )


def test_more_than_10000_json_patch_operations_are_too_large() -> None:
    operations = [{"op": "test", "path": "/metadata/name", "value": "x"}] * 10001
    with pytest.raises(PatchError) as error:
        apply_json_patch(OBJ, operations)
    assert error.value.code == 413
    assert error.value.reason == "RequestEntityTooLarge"
    assert error.value.message == (
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
        "got 10001"
    )


# --- strategic merge patch -------------------------------------------------------------------


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "finalizers": ["a.io/x", "b.io/y"], "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "ports": [{"containerPort": 80, "name": "http"}],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "volumeMounts": [{"mountPath": "/data", "name": "data"}],
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "tolerations": [{"key": "k1", "operator": "Exists"}],
            **spec,
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True"},
            ],
            "containerStatuses": [{"name": "app", "ready": False}, {"name": "sidecar"}],
        },
    }


def smp(obj: dict[str, Any], patch: dict[str, Any], kind: str = "Pod") -> dict[str, Any]:
    return apply_strategic_merge_patch(obj, patch, kind)


def test_containers_merge_by_name_keeping_the_others() -> None:
    result = smp(pod(), {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}})
    assert result["spec"]["containers"][0] == pod()["spec"]["containers"][0]
    assert result["spec"]["containers"][1] == {"name": "sidecar", "image": "side:2"}


def test_new_items_go_before_the_server_only_items_without_set_element_order() -> None:
    # normalizeElementOrder/mergeSortedSlice: an item the server has never seen cannot be
    # ordered against server-only items, so patch items win the comparison and come first.
    result = smp(pod(), {"spec": {"containers": [{"name": "new", "image": "n:1"}]}})
    assert [c["name"] for c in result["spec"]["containers"]] == ["new", "app", "sidecar"]


def test_updated_items_keep_their_place_among_server_only_items() -> None:
    patch = {"spec": {"containers": [{"name": "sidecar", "image": "s"}, {"name": "n"}]}}
    result = smp(pod(), patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["app", "sidecar", "n"]
    patch = {"spec": {"containers": [{"name": "n"}, {"name": "sidecar", "image": "s"}]}}
    result = smp(pod(), patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["n", "app", "sidecar"]


@pytest.mark.parametrize(
    "field, patch_item, key, expected_names",
    [
        ("ports", {"containerPort": 80, "protocol": "TCP"}, "containerPort", [80]),
        ("ports", {"containerPort": 443}, "containerPort", [443, 80]),
        ("env", {"name": "B", "value": "3"}, "name", ["A", "B"]),
        ("env", {"name": "C", "value": "3"}, "name", ["C", "A", "B"]),
        ("volumeMounts", {"mountPath": "/data", "readOnly": True}, "mountPath", ["/data"]),
        ("volumeMounts", {"mountPath": "/etc", "name": "x"}, "mountPath", ["/etc", "/data"]),
    ],
)
def test_container_lists_merge_by_their_keys(
    field: str, patch_item: dict[str, Any], key: str, expected_names: list[Any]
) -> None:
    patch = {"spec": {"containers": [{"name": "app", field: [patch_item]}]}}
    merged = smp(pod(), patch)["spec"]["containers"][0][field]
    assert [item[key] for item in merged] == expected_names
    originals = {item[key]: item for item in pod()["spec"]["containers"][0][field]}
    patched = next(item for item in merged if item[key] == patch_item[key])
    assert patched == {**originals.get(patch_item[key], {}), **patch_item}


def test_env_value_update_keeps_other_fields_of_the_item() -> None:
    patch = {"spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": "9"}]}]}}
    env = smp(pod(), patch)["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "9"}, {"name": "B", "value": "2"}]


def test_volumes_merge_by_name() -> None:
    patch = {"spec": {"volumes": [{"name": "cfg", "configMap": {"name": "c"}}]}}
    assert [v["name"] for v in smp(pod(), patch)["spec"]["volumes"]] == ["cfg", "data"]


def test_tolerations_have_no_merge_key_and_are_replaced() -> None:
    patch = {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}}
    assert smp(pod(), patch)["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]


def test_container_statuses_have_no_merge_key_and_are_replaced() -> None:
    patch = {"status": {"containerStatuses": [{"name": "app", "ready": True}]}}
    assert smp(pod(), patch)["status"]["containerStatuses"] == [{"name": "app", "ready": True}]


def test_pod_conditions_merge_by_type() -> None:
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert smp(pod(), patch)["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_new_conditions_come_first() -> None:
    patch = {"status": {"conditions": [{"type": "Initialized", "status": "True"}]}}
    types = [c["type"] for c in smp(pod(), patch)["status"]["conditions"]]
    assert types == ["Initialized", "Ready", "PodScheduled"]


def test_finalizers_merge_as_a_set_and_new_ones_come_first() -> None:
    # normalizeElementOrder puts patch items before server-only ones they are not ordered with.
    patch = {"metadata": {"finalizers": ["c.io/z", "a.io/x"]}}
    assert smp(pod(), patch)["metadata"]["finalizers"] == ["c.io/z", "a.io/x", "b.io/y"]


def test_delete_from_primitive_list_removes_finalizers() -> None:
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x"]}}
    result = smp(pod(), patch)
    assert result["metadata"]["finalizers"] == ["b.io/y"]
    assert "$deleteFromPrimitiveList/finalizers" not in result["metadata"]


def test_delete_from_a_missing_primitive_list_does_nothing() -> None:
    obj = {"metadata": {"name": "x"}}
    assert smp(obj, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}) == obj


def test_owner_references_merge_by_uid() -> None:
    obj = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}
    patch = {"metadata": {"ownerReferences": [{"uid": "2", "controller": True}, {"uid": "3"}]}}
    assert smp(obj, patch, "ConfigMap")["metadata"]["ownerReferences"] == [
        {"uid": "1", "name": "a"},
        {"uid": "2", "name": "b", "controller": True},
        {"uid": "3"},
    ]


def test_null_deletes_a_key_and_nulls_in_new_values_are_dropped() -> None:
    patch = {"metadata": {"labels": {"app": None, "new": "1"}}, "spec": {"x": {"y": None, "z": 1}}}
    result = smp(pod(), patch)
    assert result["metadata"]["labels"] == {"new": "1"}
    assert result["spec"]["x"] == {"z": 1}


def test_patch_delete_directive_in_a_list_removes_the_item() -> None:
    patch = {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}
    assert [c["name"] for c in smp(pod(), patch)["spec"]["containers"]] == ["app"]


def test_patch_replace_directive_in_a_list_replaces_the_list() -> None:
    patch = {"spec": {"containers": [{"name": "only", "image": "o"}, {"$patch": "replace"}]}}
    assert smp(pod(), patch)["spec"]["containers"] == [{"name": "only", "image": "o"}]


def test_patch_replace_directive_in_a_map_replaces_the_map() -> None:
    patch = {"metadata": {"labels": {"$patch": "replace", "only": "1"}}}
    assert smp(pod(), patch)["metadata"]["labels"] == {"only": "1"}


def test_patch_delete_directive_in_a_map_empties_it() -> None:
    patch = {"metadata": {"labels": {"$patch": "delete"}}}
    assert smp(pod(), patch)["metadata"]["labels"] == {}


def test_patch_merge_directive_in_a_map_is_refused_like_the_real_server() -> None:
    with pytest.raises(PatchError) as error:
        smp(pod(), {"metadata": {"labels": {"$patch": "merge", "a": "1"}}})
    assert error.value.code == 500
    assert error.value.message == "unknown patch type: merge in map: map[$patch:merge a:1]"


def test_patch_merge_directive_in_a_list_is_refused() -> None:
    with pytest.raises(PatchError) as error:
        smp(pod(), {"spec": {"containers": [{"$patch": "merge"}]}})
    assert error.value.message == "merging lists cannot yet be specified in the patch"


def test_list_items_need_their_merge_key() -> None:
    with pytest.raises(PatchError) as error:
        smp(pod(), {"spec": {"containers": [{"image": "x"}]}})
    assert error.value.code == 500
    assert error.value.message == "map: map[image:x] does not contain declared merge key: name"


def test_set_element_order_reorders_a_merged_list() -> None:
    patch = {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}}
    result = smp(pod(), patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["sidecar", "app"]
    assert "$setElementOrder/containers" not in result["spec"]


def test_set_element_order_with_changes_puts_items_where_the_directive_says() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "new"}, {"name": "app"}, {"name": "sidecar"}],
            "containers": [{"name": "new", "image": "n"}],
        }
    }
    names = [c["name"] for c in smp(pod(), patch)["spec"]["containers"]]
    assert names == ["new", "app", "sidecar"]


def test_set_element_order_of_a_primitive_list() -> None:
    patch = {"metadata": {"$setElementOrder/finalizers": ["b.io/y", "a.io/x"]}}
    assert smp(pod(), patch)["metadata"]["finalizers"] == ["b.io/y", "a.io/x"]


def test_retain_keys_clears_the_keys_not_listed() -> None:
    obj = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert smp(obj, patch, "Deployment") == {"spec": {"strategy": {"type": "Recreate"}}}


def test_retain_keys_must_list_every_key_of_the_patch() -> None:
    obj = {"spec": {"strategy": {"type": "RollingUpdate"}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "other": 1}}}
    with pytest.raises(PatchError) as error:
        smp(obj, patch, "Deployment")
    assert (error.value.code, error.value.message) == (400, "invalid patch format of retainKeys")


def test_bad_directive_prefix_is_a_bad_request() -> None:
    with pytest.raises(PatchError) as error:
        smp(pod(), {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}})
    assert (error.value.code, error.value.message) == (
        400,
        "invalid patch format of primitive list",
    )


def test_lists_of_lists_are_refused() -> None:
    with pytest.raises(PatchError) as error:
        smp({"metadata": {"finalizers": [["a"]]}}, {"metadata": {"finalizers": [["b"]]}})
    assert (error.value.code, error.value.reason) == (422, "Invalid")


def test_service_ports_merge_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    patch = {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}
    assert smp(svc, patch, "Service")["spec"]["ports"] == [
        {"port": 80, "targetPort": 9090},
        {"port": 443},
    ]


def test_node_conditions_and_addresses_merge_by_type_and_taints_are_replaced() -> None:
    node = {
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        },
    }
    patch = {
        "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "Unknown"}],
            "addresses": [{"type": "Hostname", "address": "n1"}],
        },
    }
    result = smp(node, patch, "Node")
    assert result["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]
    assert result["status"]["conditions"] == [{"type": "Ready", "status": "Unknown"}]
    assert [a["type"] for a in result["status"]["addresses"]] == ["Hostname", "InternalIP"]


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"])
def test_workload_templates_merge_like_pods(kind: str) -> None:
    workload = {
        "spec": {"template": {"metadata": {"labels": {"a": "1"}}, "spec": pod()["spec"]}},
        "status": {"conditions": [{"type": "Available", "status": "True"}]},
    }
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}},
        "status": {"conditions": [{"type": "Progressing", "status": "True"}]},
    }
    result = smp(workload, patch, kind)
    containers = result["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [
        ("app", "app:2"),
        ("sidecar", "side:1"),
    ]
    assert [c["type"] for c in result["status"]["conditions"]] == ["Progressing", "Available"]


def test_unknown_kinds_merge_maps_and_replace_lists() -> None:
    obj = {"metadata": {"finalizers": ["a"]}, "data": {"a": "1"}, "items": [{"name": "x"}]}
    patch = {"metadata": {"finalizers": ["b"]}, "data": {"b": "2"}, "items": [{"name": "y"}]}
    assert smp(obj, patch, "Whatever") == {
        "metadata": {"finalizers": ["b", "a"]},
        "data": {"a": "1", "b": "2"},
        "items": [{"name": "y"}],
    }


def test_a_value_of_another_type_replaces_the_original() -> None:
    assert smp({"spec": {"x": [1]}}, {"spec": {"x": {"a": None, "b": 1}}}, "Pod") == {
        "spec": {"x": {"b": 1}}
    }


def test_strategic_merge_patch_does_not_modify_its_inputs() -> None:
    original, patch = pod(), {"spec": {"containers": [{"name": "app", "$patch": "delete"}]}}
    smp(original, patch)
    assert original == pod()
    assert patch == {"spec": {"containers": [{"name": "app", "$patch": "delete"}]}}


# --- properties ------------------------------------------------------------------------------

_scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text("abc", max_size=3))
_keys = st.text("abcde", min_size=1, max_size=3)
_json = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(_keys, children, max_size=3)
    ),
    max_leaves=10,
)
_objects = st.dictionaries(_keys, _json, max_size=4)


@given(_objects)
def test_merge_patch_of_an_empty_object_is_the_identity(obj: dict[str, Any]) -> None:
    assert apply_merge_patch(obj, {}) == obj
    assert apply_strategic_merge_patch(obj, {}, "ConfigMap") == obj


def two_way_diff(original: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The patch a client computes for maps: changed keys, nulls for removed ones."""
    patch: dict[str, Any] = {key: None for key in original if key not in target}
    for key, value in target.items():
        if key not in original:
            patch[key] = value
        elif isinstance(value, dict) and isinstance(original[key], dict):
            nested = two_way_diff(original[key], value)
            if nested:
                patch[key] = nested
        elif value != original[key] or type(value) is not type(original[key]):
            patch[key] = value
    return patch


@given(_objects, _objects)
def test_a_patch_built_from_a_diff_reproduces_the_target(
    original: dict[str, Any], target: dict[str, Any]
) -> None:
    patch = two_way_diff(original, target)
    assert apply_strategic_merge_patch(original, patch, "ConfigMap") == target
    assert apply_merge_patch(original, patch) == target


# --- more strategic merge cases --------------------------------------------------------------


def test_retain_keys_in_a_volume_switches_its_source() -> None:
    # What kubectl apply sends when a volume changes from emptyDir to configMap.
    patch = {
        "spec": {
            "volumes": [
                {"name": "data", "$retainKeys": ["configMap", "name"], "configMap": {"name": "c"}}
            ]
        }
    }
    assert smp(pod(), patch)["spec"]["volumes"] == [{"name": "data", "configMap": {"name": "c"}}]


@pytest.mark.parametrize(
    "field, key, original, addition",
    [
        ("hostAliases", "ip", {"ip": "1.1.1.1", "hostnames": ["a"]}, {"ip": "2.2.2.2"}),
        ("imagePullSecrets", "name", {"name": "a"}, {"name": "b"}),
        ("initContainers", "name", {"name": "init", "image": "i"}, {"name": "init2"}),
        (
            "topologySpreadConstraints",
            "topologyKey",
            {"topologyKey": "zone", "maxSkew": 1},
            {"topologyKey": "host"},
        ),
    ],
)
def test_other_pod_spec_lists_merge_by_their_keys(
    field: str, key: str, original: dict[str, Any], addition: dict[str, Any]
) -> None:
    obj = {"spec": {field: [original]}}
    update = {key: original[key], "extra": 1}
    result = smp(obj, {"spec": {field: [update, addition]}})
    assert result["spec"][field] == [{**original, "extra": 1}, addition]


def test_set_element_order_with_a_deleted_item() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}],
            "containers": [{"name": "app", "$patch": "delete"}],
        }
    }
    assert [c["name"] for c in smp(pod(), patch)["spec"]["containers"]] == ["sidecar"]


def test_set_element_order_with_a_deleted_finalizer() -> None:
    # kubectl apply removing a finalizer sends both directives.
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["b.io/y"],
            "$deleteFromPrimitiveList/finalizers": ["a.io/x"],
        }
    }
    assert smp(pod(), patch)["metadata"]["finalizers"] == ["b.io/y"]


def test_set_element_order_must_agree_with_the_patch_list() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "app"}],
            "containers": [{"name": "other", "image": "x"}],
        }
    }
    with pytest.raises(PatchError) as error:
        smp(pod(), patch)
    assert error.value.code == 500
    assert error.value.message.startswith("The order in patch list:")


def test_node_pod_cidrs_merge_as_a_set() -> None:
    node = {"spec": {"podCIDRs": ["10.0.0.0/24"]}}
    patch = {"spec": {"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}}
    assert smp(node, patch, "Node")["spec"]["podCIDRs"] == ["10.0.0.0/24", "fd00::/64"]


def test_service_account_secrets_merge_by_name() -> None:
    account = {"secrets": [{"name": "a"}]}
    assert smp(account, {"secrets": [{"name": "b"}]}, "ServiceAccount")["secrets"] == [
        {"name": "b"},
        {"name": "a"},
    ]


def test_cron_job_templates_merge_like_pods() -> None:
    cron = {"spec": {"jobTemplate": {"spec": {"template": {"spec": pod()["spec"]}}}}}
    patch = {
        "spec": {
            "jobTemplate": {
                "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:3"}]}}}
            }
        }
    }
    containers = smp(cron, patch, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ]
    assert [c["name"] for c in containers] == ["app", "sidecar"]


def test_directives_are_not_stored_in_new_values() -> None:
    obj: dict[str, Any] = {"spec": {}}
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "$retainKeys": ["name"]},
                {"name": "b", "$patch": "delete"},
            ]
        }
    }
    assert smp(obj, patch)["spec"]["containers"] == [{"name": "a"}]


def test_a_patch_of_null_changes_nothing_and_other_non_objects_are_bad_requests() -> None:
    assert apply_strategic_merge_patch(pod(), None, "Pod") == pod()  # type: ignore[arg-type]
    with pytest.raises(PatchError) as error:
        apply_strategic_merge_patch(pod(), [1], "Pod")  # type: ignore[arg-type]
    assert error.value.code == 400


def test_unknown_patch_directives_in_lists_are_refused() -> None:
    with pytest.raises(PatchError) as error:
        smp(pod(), {"spec": {"containers": [{"name": "app", "$patch": "frobnicate"}]}})
    assert error.value.message == (
        "unknown patch type: frobnicate in map: map[$patch:frobnicate name:app]"
    )


_names = st.lists(st.text("abc", min_size=1, max_size=3), unique=True, max_size=4)


@given(_names, _names)
def test_a_pod_patched_with_itself_is_unchanged(containers: list[str], env: list[str]) -> None:
    obj = {
        "metadata": {"finalizers": [f"f/{n}" for n in containers], "labels": {"a": "b"}},
        "spec": {
            "containers": [
                {"name": n, "image": n, "env": [{"name": e, "value": n} for e in env]}
                for n in containers
            ],
            "tolerations": [{"key": e} for e in env],
        },
    }
    assert smp(obj, copy.deepcopy(obj)) == obj
    assert smp(obj, {}) == obj


def test_json_patch_on_arrays_and_nested_tests() -> None:
    obj = {"spec": {"items": [{"a": 1}, {"b": 2}], "m": {"x": [1, 2]}}}
    operations = [
        {"op": "test", "path": "/spec/m", "value": {"x": [1, 2]}},
        {"op": "remove", "path": "/spec/items/0"},
        {"op": "add", "path": "/spec/items/0", "value": {"c": 3}},
    ]
    assert apply_json_patch(obj, operations) == {
        "spec": {"items": [{"c": 3}, {"b": 2}], "m": {"x": [1, 2]}}
    }


def test_json_patch_paths_escape_slashes_and_tildes() -> None:
    obj = {"metadata": {"labels": {"example.com/a": "1", "t~x": "2"}}}
    operations = [
        {"op": "remove", "path": "/metadata/labels/example.com~1a"},
        {"op": "replace", "path": "/metadata/labels/t~0x", "value": "3"},
    ]
    assert apply_json_patch(obj, operations) == {"metadata": {"labels": {"t~x": "3"}}}


def test_set_element_order_of_a_new_list_stores_no_directives() -> None:
    obj: dict[str, Any] = {"spec": {}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [
                {"name": "b"},
                {"name": "a", "image": None},
                {"name": "c", "$patch": "delete"},
            ],
        }
    }
    assert smp(obj, patch)["spec"]["containers"] == [{"name": "b"}, {"name": "a"}]


def test_new_list_items_are_stored_without_nulls() -> None:
    patch = {"spec": {"containers": [{"name": "new", "image": "n", "command": None}]}}
    assert smp(pod(), patch)["spec"]["containers"][0] == {"name": "new", "image": "n"}
