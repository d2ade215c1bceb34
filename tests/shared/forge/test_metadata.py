"""shared.forge.metadata: every reflection forge's copy is ours and carries nothing the home
cluster keeps (over generated objects of each kind), and the skip lists merge the global flags
with the virtual node's offloading patch."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from shared.api.offloading_patch import OffloadingPatch
from shared.forge.metadata import reflection_config, remote_metadata
from shared.ownership import is_owned
from shared.wellknown import ENDPOINTSLICE_MANAGED_BY_LABEL, SERVICE_NAME_LABEL
from tests.shared.forge.objects import EXAMPLES, HOME, REMOTE, REMOTE_NS, forged

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
