"""NamespaceMap → twin namespaces with the consumer's RBAC; foreign names refused; removed
entries deleted; a deleted map (even while the enforcer was down) takes its twin namespaces,
held by the enforcer's finalizer until they are deleted."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.quota import QUOTA
from shared.forge.tenancy import OBJECT_COUNTS_QUOTA
from shared.ownership import ownership_labels
from shared.wellknown import (
    CONSUMER_SERVICE_ACCOUNT,
    TWIN_NAMESPACE_ROLE,
    TWIN_NAMESPACES_FINALIZER,
)
from tests.helpers import metric_samples, sample, wait_for
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
            {**NAMESPACE_MAP.type_meta(),
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


def twin_name(prefix: str, consumer: str) -> str:
    """A twin name the consumer may use by default: it carries its cluster id, as the
    DefaultName mapping strategy makes names."""
    return f"{new_name(prefix)}-{consumer}"


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
    twin_a, twin_b = twin_name("twin-a", consumer), twin_name("twin-b", consumer)
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
    foreign = twin_name("foreign", consumer)
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
    """The map's status says CreationLoopBackOff; the enforcer looks again when the namespace
    holding the name changes (here: it goes), without an Event or an error each time."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    foreign = twin_name("foreign", consumer)
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
    twin = twin_name("twin", consumer)
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})
    first = remote.core.read_namespace(twin).metadata.uid

    remote.core.delete_namespace(twin)
    wait_for(lambda: (ns := namespace_or_none(remote, twin)) is not None
             and ns.metadata.uid != first and ns.metadata.deletion_timestamp is None,
             timeout=30, message="the twin namespace was not made again")
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    binding = wait_for(lambda: rbac.read_namespaced_role_binding(TWIN_NAMESPACE_ROLE, twin),
                       message="the consumer's RoleBinding was not made again")
    assert (binding.role_ref.kind, binding.role_ref.name) == ("ClusterRole", TWIN_NAMESPACE_ROLE)


def test_a_twin_name_held_by_a_terminating_namespace_is_taken_once_it_is_gone(
        remote: Any, maps: Maps) -> None:
    """The map is converged again on the enforcer's own once the old namespace is gone, not on
    the next change to the map: nothing touches it while the old namespace goes."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = twin_name("twin", consumer)  # ours, from an earlier map
    remote.core.create_namespace({"metadata": {
        "name": twin, "labels": ownership_labels(consumer, PROVIDER_ID)}})
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
    kept, dropped = twin_name("kept", consumer), twin_name("dropped", consumer)
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
    twin = twin_name("twin", consumer)
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})
    # The enforcer's finalizer and its status.currentMapping: nothing else of its on the map
    # (the agent writes the spec).
    held = maps.get(tenant, name)
    assert held is not None and held["metadata"]["finalizers"] == [TWIN_NAMESPACES_FINALIZER]
    assert set(held["status"]) == {"currentMapping"}
    assert not held["metadata"].get("annotations")

    maps.delete(tenant, name)

    wait_for(lambda: deleted(remote, twin), message="twin namespace kept")
    wait_for(lambda: maps.get(tenant, name) is None, message="the map was not released")


def test_a_map_deleted_while_the_enforcer_is_down_takes_its_twin_namespaces_on_restart(
        remote: Any, maps: Maps, enforcer: Enforcer) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = twin_name("twin", consumer)
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
            {**NAMESPACE_MAP.type_meta(),
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


KOPF_RECORDS = {"enforcer.annex.io/last-handled-configuration": '{"spec":{}}',
                "enforcer.annex.io/converge": '{"started":"2024-01-01T00:00:00.000000"}'}
"""What kopf, which served NamespaceMaps in earlier versions, kept on each map it handled."""


def settled(enforcer: Enforcer, controller: str) -> bool:
    """The enforcer's `controller` has reconciled every key it was given."""
    samples = metric_samples(enforcer.get("/metrics").data.decode())
    return sample(samples, "workqueue_depth", name=controller) == 0 and sample(
        samples, "annex_remote_enforcer_controller_queued_keys", controller=controller) == 0


def test_a_map_kopf_handled_is_taken_over_without_a_write_and_released_when_deleted(
        remote: Any, maps: Maps, enforcer: Enforcer) -> None:
    """An upgrade from the versions that served maps with kopf: the same finalizer, and kopf's
    records left as they are (nothing reads them; removing them would rewrite every map at the
    upgrade). A converged map costs no write; deleted, it takes its twins."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    enforcer.kill()
    try:
        twin = make_twin_namespace(remote, consumer)  # without its binding: made on start
        name = new_name("map")
        maps.api.create_namespaced_custom_object(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, tenant, NAMESPACE_MAP.plural,
            {**NAMESPACE_MAP.type_meta(),
             "metadata": {"name": name, "finalizers": [TWIN_NAMESPACES_FINALIZER],
                          "annotations": KOPF_RECORDS},
             "spec": {"desiredMapping": {"app": twin}}})
        maps.api.patch_namespaced_custom_object_status(
            NAMESPACE_MAP.group, NAMESPACE_MAP.version, tenant, NAMESPACE_MAP.plural, name,
            {"status": {"currentMapping": {"app": {"remoteNamespace": twin,
                                                   "phase": "Accepted"}}}})
        before = maps.get(tenant, name)
    finally:
        enforcer.start()

    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    wait_for(lambda: rbac.read_namespaced_role_binding(TWIN_NAMESPACE_ROLE, twin),
             message="the map was not converged")
    wait_for(lambda: settled(enforcer, "namespacemaps"), message="the map's reconcile went on")
    after = maps.get(tenant, name)
    assert before is not None and after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["metadata"]["annotations"] == KOPF_RECORDS

    maps.delete(tenant, name)
    wait_for(lambda: deleted(remote, twin), message="twin namespace leaked")
    wait_for(lambda: maps.get(tenant, name) is None, message="the map was not released")


# --- the consumer's namespace policy (its Quota's namespacePolicy) ---------------------------


def set_namespace_policy(remote: Any, tenant: str, consumer: str, policy: dict[str, Any]) -> None:
    """The consumer's Quota, created or changed, with `policy` as its namespacePolicy."""
    quotas = client.CustomObjectsApi(remote.api_client)
    body = {**QUOTA.type_meta(),
            "metadata": {"name": consumer},
            "spec": {"consumerClusterId": consumer, "namespacePolicy": policy}}
    try:
        quotas.create_namespaced_custom_object(QUOTA.group, QUOTA.version, tenant, QUOTA.plural,
                                               body)
    except ApiException as error:
        if error.status != 409:
            raise
        quotas.patch_namespaced_custom_object(QUOTA.group, QUOTA.version, tenant, QUOTA.plural,
                                              consumer, {"spec": body["spec"]})


def test_twin_names_without_the_consumer_id_system_and_tenant_names_are_refused(
        remote: Any, maps: Maps) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    other_tenant = make_tenant_namespace(remote, new_name("other"))
    plain, carrying = new_name("plain"), twin_name("apps", consumer)
    name = maps.create(tenant, {"plain": plain, "system": "kube-system",
                                "tenant": other_tenant, "apps": carrying})

    current = wait_for(lambda: (found := maps.current(tenant, name)) and len(found) == 4
                       and found, message="the map was not converged")
    assert phases(current) == {"plain": "CreationLoopBackOff", "system": "CreationLoopBackOff",
                               "tenant": "CreationLoopBackOff", "apps": "Accepted"}
    assert current["plain"]["message"] == (
        f"namespace {plain!r} does not carry the consumer's cluster id (a twin name ends in "
        f"'-{consumer}', as the DefaultName mapping strategy makes them) and is not in the "
        f"consumer's namespacePolicy.allowedNames (none)")
    assert current["system"]["message"] == (
        "namespace 'kube-system' is a system namespace: it is never a consumer's twin namespace")
    assert "does not carry the consumer's cluster id" in current["tenant"]["message"]
    assert namespace_or_none(remote, plain) is None

    # allowedNames lets the plain name in, never a system or tenant namespace
    set_namespace_policy(remote, tenant, consumer,
                         {"allowedNames": ["plain-*", "kube-system", other_tenant]})
    current = wait_for(lambda: (found := maps.current(tenant, name)) and phases(found) == {
        "plain": "Accepted", "system": "CreationLoopBackOff", "tenant": "CreationLoopBackOff",
        "apps": "Accepted"} and found, timeout=30, message="the allowed name was not taken")
    assert current["tenant"]["message"] == (
        f"namespace {other_tenant!r} is a tenant namespace (liqo.io/tenant-namespace): it is "
        f"never a consumer's twin namespace")
    system_labels = remote.core.read_namespace("kube-system").metadata.labels or {}
    assert not set(ownership_labels(consumer, PROVIDER_ID)) & set(system_labels)


def test_twins_beyond_max_twin_namespaces_are_refused(remote: Any, maps: Maps) -> None:
    """The default cap is 20: of 21 entries, the one last by home namespace name is refused."""
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    desired = {f"ns{index:02}": f"ns{index:02}-{consumer}" for index in range(21)}
    name = maps.create(tenant, desired)

    current = wait_for(lambda: (found := maps.current(tenant, name)) and len(found) == 21
                       and found, timeout=60, message="the map was not converged")
    assert [home for home, entry in current.items() if entry["phase"] != "Accepted"] == ["ns20"]
    assert current["ns20"] == {
        "remoteNamespace": f"ns20-{consumer}", "phase": "CreationLoopBackOff",
        "message": f"consumer {consumer!r} may have at most 20 twin namespaces "
                   f"(namespacePolicy.maxTwinNamespaces): 'ns20-{consumer}' would be one more"}
    assert namespace_or_none(remote, f"ns20-{consumer}") is None


def test_each_twin_has_its_object_counts_quota_the_consumer_cannot_exceed_nor_change(
        remote: Any, maps: Maps) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    twin = twin_name("twin", consumer)
    set_namespace_policy(remote, tenant, consumer, {"objectCounts": {"configmaps": "4"}})
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})
    quota = remote.core.read_namespaced_resource_quota(OBJECT_COUNTS_QUOTA, twin)
    assert quota.spec.hard == {"configmaps": "4"}
    assert ownership_labels(consumer, PROVIDER_ID).items() <= quota.metadata.labels.items()

    as_consumer = client.CoreV1Api(consumer_client(remote, tenant))
    present = len(remote.core.list_namespaced_config_map(twin).items)  # kube-root-ca.crt

    def refusal(index: int) -> str | None:
        """None while ConfigMaps are admitted (a real quota controller's first sync aside)."""
        try:
            as_consumer.create_namespaced_config_map(twin, {"metadata": {"name": f"c{index}"}})
            return None
        except ApiException as error:
            assert error.status == 403, error.body
            return str(json.loads(error.body)["message"])
    for index in range(4 - present):
        assert refusal(index) is None
    message = wait_for(lambda: refusal(99), timeout=30, message="the fifth ConfigMap admitted")
    assert message == ('configmaps "c99" is forbidden: exceeded quota: annex-consumer, '
                       'requested: configmaps=1, used: configmaps=4, limited: configmaps=4')

    for change in (lambda: as_consumer.patch_namespaced_resource_quota(
            OBJECT_COUNTS_QUOTA, twin, {"spec": {"hard": {"configmaps": "1000"}}}),
            lambda: as_consumer.delete_namespaced_resource_quota(OBJECT_COUNTS_QUOTA, twin),
            lambda: as_consumer.create_namespaced_resource_quota(twin, {
                "metadata": {"name": "mine"}, "spec": {"hard": {"configmaps": "1"}}})):
        with pytest.raises(ApiException) as forbidden:
            change()
        assert forbidden.value.status == 403

    # a changed policy is applied to the twins there are
    set_namespace_policy(remote, tenant, consumer, {"objectCounts": {"configmaps": "10",
                                                                     "secrets": "2"}})
    wait_for(lambda: remote.core.read_namespaced_resource_quota(
        OBJECT_COUNTS_QUOTA, twin).spec.hard == {"configmaps": "10", "secrets": "2"},
        timeout=30, message="the twin's ResourceQuota did not follow the Quota")
