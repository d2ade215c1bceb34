"""shared.forge.persistentvolumeclaim: which home claims the virtual node provisions, the
provider's class for them, and the remote copy (nothing of the home cluster's storage)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.api.resource_offer import ClassOffer
from shared.forge.compare import needs_update
from shared.forge.metadata import reflection_config
from shared.forge.persistentvolumeclaim import (
    awaits_virtual_volume,
    claim_usage,
    home_claim_status,
    real_claim,
    real_claim_of,
    remote_claim,
    remote_storage_class,
)
from shared.quota import admit_claim
from shared.wellknown import (
    REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION,
    REMOTE_STORAGE_CLASS_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATION,
    VIRTUAL_STORAGE_PROVISIONER,
)
from tests.shared.forge.objects import HOME, REMOTE, REMOTE_NS

NODE = "liqo-remote"


def home_claim(**annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-db-0", "namespace": "shop", "uid": "u-1",
                     "resourceVersion": "7", "labels": {"app": "db"},
                     "finalizers": ["kubernetes.io/pvc-protection"],
                     "annotations": {STORAGE_PROVISIONER_ANNOTATION: VIRTUAL_STORAGE_PROVISIONER,
                                     SELECTED_NODE_ANNOTATION: NODE,
                                     "pv.kubernetes.io/bind-completed": "yes",
                                     "team": "data", **annotations}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "liqo",
                 "volumeMode": "Filesystem", "resources": {"requests": {"storage": "1Gi"}},
                 "selector": {"matchLabels": {"disk": "fast"}},
                 "dataSource": {"kind": "VolumeSnapshot", "name": "snap"}},
        "status": {"phase": "Pending"},
    }


def test_the_virtual_node_provisions_only_its_own_unbound_claims() -> None:
    claim = home_claim()
    assert awaits_virtual_volume(claim, VIRTUAL_STORAGE_PROVISIONER, NODE)
    assert not awaits_virtual_volume(claim, VIRTUAL_STORAGE_PROVISIONER, "liqo-other")
    assert not awaits_virtual_volume(claim, "rancher.io/local-path", NODE)
    bound = {**claim, "spec": {**claim["spec"], "volumeName": "pvc-u-1"}}
    assert not awaits_virtual_volume(bound, VIRTUAL_STORAGE_PROVISIONER, NODE)
    going = {**claim, "metadata": {**claim["metadata"],
                                   "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert not awaits_virtual_volume(going, VIRTUAL_STORAGE_PROVISIONER, NODE)


def test_the_provider_class_is_the_asked_then_the_default_then_the_first_offered() -> None:
    offered = [ClassOffer(name="fast"), ClassOffer(name="standard", default=True)]
    assert remote_storage_class(home_claim(), offered) == "standard"
    assert remote_storage_class(home_claim(), offered[:1]) == "fast"
    assert remote_storage_class(home_claim(), []) is None
    asked = home_claim(**{REMOTE_STORAGE_CLASS_ANNOTATION: "gold"})
    assert remote_storage_class(asked, offered) == "gold"  # the provider's to refuse


def test_liqos_storage_class_annotation_and_annexs_alias_ask_alike_liqos_first() -> None:
    offered = [ClassOffer(name="standard", default=True)]
    alias = home_claim(**{REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION: "fast"})
    assert remote_storage_class(alias, offered) == "fast"
    both = home_claim(**{REMOTE_STORAGE_CLASS_ANNOTATION: "gold",
                         REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION: "fast"})
    assert remote_storage_class(both, offered) == "gold"
    empty = home_claim(**{REMOTE_STORAGE_CLASS_ANNOTATION: "",
                          REMOTE_STORAGE_CLASS_ALIAS_ANNOTATION: "fast"})
    assert remote_storage_class(empty, offered) == "fast"
    # requests of the home side: neither name reaches the remote claim
    copy = remote_claim(both, REMOTE_NS, reflection_config(HOME, REMOTE), "gold")
    assert copy["metadata"]["annotations"] == {"team": "data"}


def test_the_remote_claim_carries_nothing_of_the_home_storage() -> None:
    config = reflection_config(HOME, REMOTE)
    remote = remote_claim(home_claim(), REMOTE_NS, config, "standard")
    assert remote["metadata"]["namespace"] == REMOTE_NS
    assert remote["metadata"]["name"] == "data-db-0"
    assert remote["metadata"]["annotations"] == {"team": "data"}
    assert remote["metadata"]["labels"]["app"] == "db"
    for bookkeeping in ("uid", "resourceVersion", "finalizers"):
        assert bookkeeping not in remote["metadata"]
    assert remote["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                              "volumeMode": "Filesystem",
                              "resources": {"requests": {"storage": "1Gi"}}}
    assert "status" not in remote
    default_class = remote_claim(home_claim(), REMOTE_NS, config, None)
    assert "storageClassName" not in default_class["spec"]


def test_what_the_remote_server_fills_in_is_no_drift_but_a_resize_is() -> None:
    config = reflection_config(HOME, REMOTE)
    first = remote_claim(home_claim(), REMOTE_NS, config, None)
    remote_marks = {SELECTED_NODE_ANNOTATION: "remote-worker",
                    STORAGE_PROVISIONER_ANNOTATION: "rancher.io/local-path",
                    "pv.kubernetes.io/bind-completed": "yes"}
    current = {**first,
               "metadata": {**first["metadata"],
                            "annotations": {**first["metadata"]["annotations"],
                                            **remote_marks}},
               "spec": {**first["spec"], "storageClassName": "standard", "volumeName": "pvc-9"},
               "status": {"phase": "Bound"}}
    desired = remote_claim(home_claim(), REMOTE_NS, config, None, current)
    assert desired["metadata"]["annotations"] == {"team": "data", **remote_marks}
    assert not needs_update(current, desired)
    bigger = home_claim()
    bigger["spec"]["resources"] = {"requests": {"storage": "2Gi"}}
    assert needs_update(current, remote_claim(bigger, REMOTE_NS, config, None, current))


def test_storage_quota_refuses_a_claim_beyond_the_limit_whatever_the_mode() -> None:
    limits = {"requests.storage": "10Gi"}
    assert admit_claim(False, limits, {"requests.storage": "8Gi"},
                       claim_usage(home_claim())).allowed
    refused = admit_claim(False, limits, {"requests.storage": "9.5Gi"},
                          claim_usage(home_claim()))
    assert not refused.allowed
    assert refused.message.startswith("quota exceeded for requests.storage")
    assert not admit_claim(True, {}, {}, claim_usage(home_claim())).allowed
    assert admit_claim(False, {"cpu": "1"}, {}, claim_usage(home_claim())).allowed


def test_a_local_consumers_real_claim_is_owned_by_the_virtual_one_and_placed() -> None:
    claim = home_claim()
    real = real_claim(claim, "standard", "home-worker-1")
    assert real["metadata"]["name"] == "real-u-1"
    assert real["metadata"]["namespace"] == "shop"
    assert real["metadata"]["annotations"] == {SELECTED_NODE_ANNOTATION: "home-worker-1"}
    [owner] = real["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "PersistentVolumeClaim", "data-db-0", "u-1")
    assert real["spec"]["storageClassName"] == "standard"
    assert real["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    assert real_claim_of(real) == "data-db-0"
    assert real_claim_of(claim) is None


NOW = datetime(2026, 11, 24, 19, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 24, 19, 5, tzinfo=UTC)


def bound_claim(capacity: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    claim = home_claim()
    claim["spec"]["resources"] = {"requests": {"storage": "2Gi"}}
    claim["spec"]["volumeName"] = "pvc-u-1"
    claim["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"],
                       "capacity": {"storage": capacity}, "conditions": list(conditions)}
    return claim


RESIZING = {"type": "Resizing", "status": "True", "lastTransitionTime": "2026-11-24T18:59:00Z"}
FS_PENDING = {"type": "FileSystemResizePending", "status": "True",
              "lastTransitionTime": "2026-11-24T18:59:30Z",
              "message": "Waiting for user to (re-)start a pod to finish file system resize of "
                         "volume on node."}
SOMEBODY_ELSES = {"type": "ModifyingVolume", "status": "True"}
REMOTE_BOUND = {"type": "RemoteClaimBound", "status": "True", "reason": "Bound",
                "message": "remote claim shop/data-db-0 is Bound",
                "lastTransitionTime": "2026-11-24T18:58:00Z"}


def test_the_home_claim_shows_the_remote_resize_as_an_external_resizer_writes_it() -> None:
    home = bound_claim("1Gi", SOMEBODY_ELSES, REMOTE_BOUND)
    resizing = bound_claim("1Gi", RESIZING)
    assert home_claim_status(home, resizing, None, NOW) == {
        "conditions": [SOMEBODY_ELSES, RESIZING, REMOTE_BOUND]}
    home["status"]["conditions"] = [SOMEBODY_ELSES, RESIZING, REMOTE_BOUND]
    assert home_claim_status(home, resizing, None, NOW) is None  # shown already
    pending = bound_claim("1Gi", FS_PENDING)  # the provider's kubelet grows the file system
    assert home_claim_status(home, pending, None, NOW) == {
        "conditions": [SOMEBODY_ELSES, FS_PENDING, REMOTE_BOUND]}
    home["status"]["conditions"] = [SOMEBODY_ELSES, FS_PENDING, REMOTE_BOUND]
    done = bound_claim("2Gi")
    assert home_claim_status(home, done, None, NOW) == {
        "conditions": [SOMEBODY_ELSES, REMOTE_BOUND], "capacity": {"storage": "2Gi"}}
    home["status"].update(conditions=[SOMEBODY_ELSES, REMOTE_BOUND], capacity={"storage": "2Gi"})
    assert home_claim_status(home, done, None, NOW) is None


def test_a_refused_expansion_is_a_controller_resize_error_while_it_lasts() -> None:
    home = bound_claim("1Gi", REMOTE_BOUND)
    remote = bound_claim("1Gi")
    refusal = 'quota exceeded for requests.storage: requested 1Gi, used 1Gi, limited 1Gi'
    patch = home_claim_status(home, remote, refusal, NOW)
    assert patch == {"conditions": [{"type": "ControllerResizeError", "status": "True",
                                     "message": refusal,
                                     "lastTransitionTime": "2026-11-24T19:00:00Z"},
                                    REMOTE_BOUND]}
    home["status"]["conditions"] = patch["conditions"]
    assert home_claim_status(home, remote, refusal, LATER) is None  # refused again: as it was
    assert home_claim_status(home, remote, None, LATER) == {"conditions": [REMOTE_BOUND]}


def test_the_home_claim_says_whether_its_remote_claim_is_bound_yet() -> None:
    """The home claim is Bound once its volume exists; the remote one may still wait (for its
    first consumer, a provisioner): the home claim says so, then that it is bound."""
    home = bound_claim("1Gi", SOMEBODY_ELSES)
    waiting = {**bound_claim("1Gi"), "status": {"phase": "Pending"}}
    pending = {"type": "RemoteClaimBound", "status": "False", "reason": "Pending",
               "message": "remote claim shop/data-db-0 is Pending",
               "lastTransitionTime": "2026-11-24T19:00:00Z"}
    assert home_claim_status(home, waiting, None, NOW) == {"conditions": [SOMEBODY_ELSES, pending]}
    home["status"]["conditions"] = [SOMEBODY_ELSES, pending]
    assert home_claim_status(home, waiting, None, LATER) is None  # still pending: as it was
    assert home_claim_status(home, bound_claim("1Gi"), None, LATER) == {"conditions": [
        SOMEBODY_ELSES, {**REMOTE_BOUND, "lastTransitionTime": "2026-11-24T19:05:00Z"}]}


def test_nothing_is_written_on_a_claim_the_pv_controller_has_not_bound() -> None:
    pending = home_claim()
    assert home_claim_status(pending, bound_claim("2Gi", RESIZING), "refused", NOW) is None
    unbound_remote = {**bound_claim("5Gi"), "status": {"phase": "Pending"}}
    patch = home_claim_status(bound_claim("1Gi"), unbound_remote, None, NOW)
    assert patch is not None and "capacity" not in patch  # the remote capacity is not known
