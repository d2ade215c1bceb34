"""Garbage collection through ownerReferences, and switching controllers off per cluster."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.helpers import wait_for
from tests.kubesim.test_controllers_cluster import pod_manifest


def owned_configmap(name: str, owner: Any) -> dict[str, Any]:
    return owned_by(name, owner.metadata.name, owner.metadata.uid)


def owned_by(name: str, owner_name: str, owner_uid: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner_name, "uid": owner_uid}]}}


def exists(read: Any) -> bool:
    try:
        read()
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_dependents_go_with_their_owner(home, namespace) -> None:
    owner = home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    home.core.create_namespaced_config_map(namespace, owned_configmap("dependent", owner))
    home.core.delete_namespaced_config_map("owner", namespace)
    wait_for(lambda: not exists(lambda: home.core.read_namespaced_config_map("dependent",
                                                                             namespace)))


def test_foreground_deletion_waits_for_dependents(home, namespace) -> None:
    owner = home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    held = owned_configmap("held", owner)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    held["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
    home.core.create_namespaced_config_map(namespace, held)
    home.core.delete_namespaced_config_map("owner", namespace,
                                           propagation_policy="Foreground")
    wait_for(lambda: home.core.read_namespaced_config_map("held", namespace)
             .metadata.deletion_timestamp is not None)
    waiting = home.core.read_namespaced_config_map("owner", namespace)
    assert "foregroundDeletion" in waiting.metadata.finalizers
    home.core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    wait_for(lambda: not exists(lambda: home.core.read_namespaced_config_map("owner",
                                                                             namespace)))


def test_a_refused_end_of_foreground_deletion_is_tried_again(home, namespace) -> None:
    # A webhook that cannot be called (failurePolicy Fail) refuses updates of the owner, so
    # removing its foregroundDeletion finalizer fails once its dependent is gone.
    registrations = client.AdmissionregistrationV1Api(home.api_client)
    name = f"unreachable-{uuid.uuid4().hex[:8]}"
    registrations.create_validating_webhook_configuration({
        "metadata": {"name": name}, "webhooks": [{
            "name": "unreachable.example.com",
            "clientConfig": {"url": "https://127.0.0.1:9/validate"},
            "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "objectSelector": {"matchLabels": {"guarded": "yes"}},
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2}]})
    try:
        owner = home.core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "owner", "labels": {"guarded": "yes"}}})
        held = owned_configmap("held", owner)
        held["metadata"]["finalizers"] = ["example.com/hold"]
        held["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
        home.core.create_namespaced_config_map(namespace, held)
        home.core.delete_namespaced_config_map("owner", namespace,
                                               propagation_policy="Foreground")
        home.core.patch_namespaced_config_map("held", namespace,
                                              {"metadata": {"finalizers": None}})
        wait_for(lambda: not exists(lambda: home.core.read_namespaced_config_map(
            "held", namespace)))
        assert "foregroundDeletion" in home.core.read_namespaced_config_map(
            "owner", namespace).metadata.finalizers
    finally:
        registrations.delete_validating_webhook_configuration(name)
    wait_for(lambda: not exists(lambda: home.core.read_namespaced_config_map("owner",
                                                                             namespace)),
             timeout=60)


def test_objects_whose_owner_never_existed_are_collected(home, namespace) -> None:
    home.core.create_namespaced_config_map(namespace,
                                           owned_by("orphan", "ghost", str(uuid.uuid4())))
    wait_for(lambda: not exists(lambda: home.core.read_namespaced_config_map("orphan",
                                                                             namespace)),
             timeout=60)


def test_a_reference_naming_another_object_than_its_uids_dangles(home, namespace) -> None:
    """The collector looks an owner up by kind and name and compares uids."""
    owner = home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    home.core.create_namespaced_config_map(
        namespace, owned_by("misnamed", "not-the-owner", owner.metadata.uid))
    wait_for(lambda: not exists(lambda: home.core.read_namespaced_config_map("misnamed",
                                                                             namespace)),
             timeout=60)
    assert exists(lambda: home.core.read_namespaced_config_map("owner", namespace))


def test_a_reference_to_an_absent_owner_is_dropped_when_a_live_owner_remains(home,
                                                                            namespace) -> None:
    owner = home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "live"}})
    body = owned_configmap("shared", owner)
    body["metadata"]["ownerReferences"].append(
        owned_by("shared", "ghost", str(uuid.uuid4()))["metadata"]["ownerReferences"][0])
    home.core.create_namespaced_config_map(namespace, body)
    wait_for(lambda: [r.name for r in home.core.read_namespaced_config_map(
        "shared", namespace).metadata.owner_references] == ["live"], timeout=60)


def test_events_are_not_collected(home, namespace) -> None:
    """Events are among the collector's ignored resources: they outlive their owners."""
    owner = home.core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    home.core.create_namespaced_config_map(namespace, owned_configmap("dependent", owner))
    reference = owned_configmap("e", owner)["metadata"]["ownerReferences"]
    home.core.create_namespaced_event(namespace, {
        "metadata": {"name": "e", "ownerReferences": reference},
        "involvedObject": {"kind": "ConfigMap", "namespace": namespace, "name": "owner"},
        "reason": "Tested", "message": "m", "type": "Normal"})
    home.core.delete_namespaced_config_map("owner", namespace)
    wait_for(lambda: not exists(lambda: home.core.read_namespaced_config_map("dependent",
                                                                             namespace)),
             timeout=60)
    assert exists(lambda: home.core.read_namespaced_event("e", namespace))


@pytest.mark.kubesim_only(reason="kubesim's controller switches, on a simulated cluster of its own")
def test_controllers_can_be_switched_off_per_cluster(tmp_path: Path) -> None:
    from kubesim.cluster import Cluster, ClusterThread

    sim = Cluster("bare")
    sim.controller_names = ["kubelet"]  # type: ignore[attr-defined]
    with ClusterThread([sim], tmp_path):
        api_client = config.new_client_from_config(config_file=str(tmp_path / "bare.kubeconfig"))
        core = client.CoreV1Api(api_client)
        wait_for(lambda: core.list_node().items)  # the kubelet registers its node
        # no serviceaccount controller: no `default` account, so the ServiceAccount
        # admission plugin refuses pods (after its short wait for the account)
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod("default", pod_manifest("waiting"))
        assert refused.value.status == 403
        assert json.loads(refused.value.body)["message"] == (
            'pods "waiting" is forbidden: error looking up service account default/default: '
            'serviceaccount "default" not found')
        core.create_namespaced_service_account("default", {"metadata": {"name": "default"}})
        core.create_namespaced_pod("default", pod_manifest("waiting"))
        owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
        core.create_namespaced_config_map("default", owned_configmap("dependent", owner))
        core.delete_namespaced_config_map("owner", "default")
        # no scheduler, no garbage collector, no root-CA publisher: nothing happens
        assert list(sim.controllers.controllers) == ["kubelet"]
        pod = core.read_namespaced_pod("waiting", "default")
        assert pod.spec.node_name is None and pod.status.phase == "Pending"
        assert exists(lambda: core.read_namespaced_config_map("dependent", "default"))
        assert not exists(lambda: core.read_namespaced_config_map("kube-root-ca.crt",
                                                                  "default"))
        api_client.close()


def test_controller_names_use_kube_controller_managers_syntax() -> None:
    from kubesim.__main__ import parse
    from kubesim.controllers import ALL_CONTROLLERS, parse_controller_names

    assert parse_controller_names("*") == list(ALL_CONTROLLERS)
    assert "scheduler" not in parse_controller_names("*,-scheduler")
    assert parse_controller_names("kubelet,scheduler") == ["kubelet", "scheduler"]
    with pytest.raises(ValueError):
        parse_controller_names("kubelet,nonsense")
    _, [spec] = parse(["up", "--dir", "d", "x", "--controllers", "*,-kubelet",
                       "--worker-cpu", "8", "--worker-memory", "16Gi", "--worker-pods", "50"])
    assert (spec.controllers, spec.worker_cpu, spec.worker_memory, spec.worker_pods) == (
        "*,-kubelet", "8", "16Gi", 50)
