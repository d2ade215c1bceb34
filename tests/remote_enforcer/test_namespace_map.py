"""NamespaceMap → twin namespaces with the consumer's RBAC; foreign names refused; removed
entries deleted; a deleted map (even while the enforcer was down) takes its twin namespaces,
held by the enforcer's finalizer until they are deleted (DESIGN.md sections 6 and 7)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from shared.api.namespace_map import NAMESPACE_MAP
from shared.ownership import ownership_labels
from shared.wellknown import (
    CONSUMER_SERVICE_ACCOUNT,
    TWIN_NAMESPACE_ROLE,
    TWIN_NAMESPACES_FINALIZER,
)
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    PROVIDER_ID,
    Enforcer,
    ShadowPods,
    make_tenant_namespace,
    make_twin_namespace,
    new_name,
    shadowpod,
)


def namespace_or_none(remote: Any, name: str) -> Any:
    try:
        return remote.core.read_namespace(name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


class Maps:
    def __init__(self, remote: Any) -> None:
        self.api = client.CustomObjectsApi(remote.api_client)

    def create(self, namespace: str, desired: dict[str, str]) -> str:
        name = new_name("map")
        self.api.create_namespaced_custom_object(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, namespace, NAMESPACE_MAP.plural,
            {"apiVersion": NAMESPACE_MAP.api_version, "kind": NAMESPACE_MAP.kind,
             "metadata": {"name": name}, "spec": {"desiredMapping": desired}})
        return name

    def drop(self, namespace: str, name: str, home_namespace: str) -> None:
        self.api.patch_namespaced_custom_object(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, namespace, NAMESPACE_MAP.plural, name,
            {"spec": {"desiredMapping": {home_namespace: None}}})

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(self.api.get_namespaced_custom_object(
                NAMESPACE_MAP.group, NAMESPACE_MAP.version, namespace, NAMESPACE_MAP.plural,
                name))
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def current(self, namespace: str, name: str) -> dict[str, Any]:
        obj = self.get(namespace, name) or {}
        return dict((obj.get("status") or {}).get("currentMapping") or {})

    def delete(self, namespace: str, name: str) -> None:
        self.api.delete_namespaced_custom_object(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, namespace, NAMESPACE_MAP.plural, name)


@pytest.fixture
def maps(remote: Any, enforcer: Any) -> Maps:
    return Maps(remote)


def phases(current: dict[str, Any]) -> dict[str, str]:
    return {home: entry["phase"] for home, entry in current.items()}


def consumer_client(remote: Any, tenant: str) -> client.ApiClient:
    """An API client authenticated as the tenant's consumer service account."""
    remote.core.create_namespaced_service_account(
        tenant, {"metadata": {"name": CONSUMER_SERVICE_ACCOUNT}})
    token = remote.core.create_namespaced_service_account_token(
        CONSUMER_SERVICE_ACCOUNT, tenant, {"spec": {}}).status.token
    configuration = copy.copy(remote.api_client.configuration)
    configuration.refresh_api_key_hook = None
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    configuration.cert_file = configuration.key_file = None
    return client.ApiClient(configuration)


def test_twin_namespaces_are_created_labelled_and_usable_only_by_the_consumer(
        remote: Any, maps: Maps) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin_a, twin_b = new_name("twin-a"), new_name("twin-b")
    name = maps.create(tenant, {"app-a": twin_a, "app-b": twin_b})

    wait_for(lambda: phases(maps.current(tenant, name)) == {
        "app-a": "Accepted", "app-b": "Accepted"}, message="mapping not accepted")
    for twin in (twin_a, twin_b):
        labels = remote.core.read_namespace(twin).metadata.labels
        assert ownership_labels(consumer, PROVIDER_ID).items() <= labels.items()

    as_consumer = consumer_client(remote, tenant)
    core = client.CoreV1Api(as_consumer)
    core.create_namespaced_config_map(twin_a, {"metadata": {"name": "settings"}})
    ShadowPods(as_consumer).create(twin_b, shadowpod(new_name("p"), consumer))
    core.list_namespaced_pod(twin_b)  # reads are allowed
    core.list_namespaced_event(twin_b)

    outside = new_name("outside")
    remote.core.create_namespace({"metadata": {"name": outside}})
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(outside, {"metadata": {"name": "settings"}})
    assert refused.value.status == 403
    assert f'cannot create resource "configmaps" in API group "" in the namespace "{outside}"' \
        in json.loads(refused.value.body)["message"]
    with pytest.raises(ApiException) as no_pod_writes:
        core.delete_namespaced_pod("anything", twin_b)
    assert no_pod_writes.value.status == 403


def test_a_name_that_exists_and_is_not_ours_is_creation_loop_back_off(
        remote: Any, maps: Maps) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    foreign = new_name("foreign")
    remote.core.create_namespace({"metadata": {"name": foreign, "labels": {"team": "db"}}})
    name = maps.create(tenant, {"app": foreign})

    entry = wait_for(lambda: maps.current(tenant, name).get("app"))
    assert entry["phase"] == "CreationLoopBackOff"
    assert entry["message"] == (f"namespace {foreign!r} already exists and is not managed by "
                                f"annex for consumer {consumer!r}")
    assert remote.core.read_namespace(foreign).metadata.labels == {
        "team": "db", "kubernetes.io/metadata.name": foreign}


def test_a_held_name_is_taken_once_freed_and_waiting_for_it_posts_no_warnings(
        remote: Any, maps: Maps) -> None:
    """The map's status says CreationLoopBackOff; the enforcer looks again on its own (every
    --namespace-map-resync-seconds, 1 s here) without an Event or an error each time."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    foreign = new_name("foreign")
    remote.core.create_namespace({"metadata": {"name": foreign}})
    name = maps.create(tenant, {"app": foreign})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "CreationLoopBackOff"})
    generation = maps.get(tenant, name)["metadata"]["generation"]

    remote.core.delete_namespace(foreign)
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"}, timeout=30,
             message="the freed name was not taken")
    assert maps.get(tenant, name)["metadata"]["generation"] == generation  # nobody touched it
    warnings = [event.message for event in remote.core.list_namespaced_event(tenant).items
                if event.involved_object.name == name and event.type != "Normal"]
    assert warnings == []


def test_a_twin_namespace_deleted_behind_the_enforcers_back_is_made_again(
        remote: Any, maps: Maps) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = new_name("twin")
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})
    first = remote.core.read_namespace(twin).metadata.uid

    remote.core.delete_namespace(twin)
    wait_for(lambda: (ns := namespace_or_none(remote, twin)) is not None
             and ns.metadata.uid != first and ns.metadata.deletion_timestamp is None,
             timeout=30, message="the twin namespace was not made again")
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    wait_for(lambda: rbac.read_namespaced_role(TWIN_NAMESPACE_ROLE, twin),
             message="the consumer's Role was not made again")


def test_a_twin_name_held_by_a_terminating_namespace_is_taken_once_it_is_gone(
        remote: Any, maps: Maps) -> None:
    """The map is converged again on the enforcer's own (kopf's retries, unbounded), not on
    the next change to the map: nothing touches it while the old namespace goes."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = make_twin_namespace(remote, consumer)  # ours, from an earlier map
    hold = {"metadata": {"name": "held", "finalizers": ["annex.test/hold"]}}
    remote.core.create_namespaced_config_map(twin, hold)
    remote.core.delete_namespace(twin)
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Terminating"},
             message="the terminating twin was not reported")
    generation = maps.get(tenant, name)["metadata"]["generation"]

    remote.core.patch_namespaced_config_map("held", twin, {"metadata": {"finalizers": None}})
    wait_for(lambda: namespace_or_none(remote, twin) is None
             or namespace_or_none(remote, twin).metadata.deletion_timestamp is None,
             timeout=30, message="the old twin namespace was not removed")

    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"}, timeout=30,
             message="the mapping was not tried again")
    assert namespace_or_none(remote, twin).metadata.deletion_timestamp is None
    assert maps.get(tenant, name)["metadata"]["generation"] == generation


def test_removed_entries_have_their_namespace_deleted(remote: Any, maps: Maps) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    kept, dropped = new_name("kept"), new_name("dropped")
    name = maps.create(tenant, {"kept": kept, "dropped": dropped})
    wait_for(lambda: len(maps.current(tenant, name)) == 2)

    maps.drop(tenant, name, "dropped")

    wait_for(lambda: set(maps.current(tenant, name)) == {"kept"})
    wait_for(lambda: (ns := namespace_or_none(remote, dropped)) is None
             or ns.metadata.deletion_timestamp is not None, message="not deleted")
    assert namespace_or_none(remote, kept).metadata.deletion_timestamp is None


def deleted(remote: Any, namespace: str) -> bool:
    return (ns := namespace_or_none(remote, namespace)) is None \
        or ns.metadata.deletion_timestamp is not None


def test_deleting_the_map_deletes_its_twin_namespaces(remote: Any, maps: Maps) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = new_name("twin")
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})
    # kopf keeps its records (the spec it last handled) in annotations of the enforcer's,
    # never in the status
    held = wait_for(lambda: (found := maps.get(tenant, name)) and "enforcer.annex.io/last-"
                    "handled-configuration" in found["metadata"].get("annotations", {}) and found)
    assert TWIN_NAMESPACES_FINALIZER in held["metadata"]["finalizers"]
    assert set(held["status"]) == {"currentMapping"}
    assert all(key.startswith("enforcer.annex.io/")
               for key in held["metadata"].get("annotations") or {})

    maps.delete(tenant, name)

    wait_for(lambda: deleted(remote, twin), message="twin namespace kept")
    wait_for(lambda: maps.get(tenant, name) is None, message="the map was not released")


def test_a_map_deleted_while_the_enforcer_is_down_takes_its_twin_namespaces_on_restart(
        remote: Any, maps: Maps, enforcer: Enforcer) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = new_name("twin")
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})

    enforcer.kill()
    try:
        maps.delete(tenant, name)
        held = maps.get(tenant, name)
        assert held is not None and held["metadata"].get("deletionTimestamp")
        assert held["metadata"]["finalizers"] == [TWIN_NAMESPACES_FINALIZER]
        assert not deleted(remote, twin)
    finally:
        enforcer.start()

    wait_for(lambda: deleted(remote, twin), message="twin namespace leaked")
    wait_for(lambda: maps.get(tenant, name) is None, message="the map was not released")


def test_a_map_finalized_by_the_previous_version_is_released_after_an_upgrade(
        remote: Any, maps: Maps, enforcer: Enforcer) -> None:
    """Earlier versions put the same finalizer on their maps and kept no kopf records: a map
    of theirs, deleted before the new version starts, still takes its twin namespaces."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    enforcer.kill()
    try:
        twin = make_twin_namespace(remote, consumer)
        name = new_name("map")
        maps.api.create_namespaced_custom_object(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, tenant, NAMESPACE_MAP.plural,
            {"apiVersion": NAMESPACE_MAP.api_version, "kind": NAMESPACE_MAP.kind,
             "metadata": {"name": name, "finalizers": [TWIN_NAMESPACES_FINALIZER]},
             "spec": {"desiredMapping": {"app": twin}}})
        maps.api.patch_namespaced_custom_object_status(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, tenant, NAMESPACE_MAP.plural, name,
            {"status": {"currentMapping": {"app": {"remoteNamespace": twin,
                                                   "phase": "Accepted"}}}})
        maps.delete(tenant, name)
    finally:
        enforcer.start()

    wait_for(lambda: deleted(remote, twin), message="twin namespace leaked")
    wait_for(lambda: maps.get(tenant, name) is None, message="the map was not released")
