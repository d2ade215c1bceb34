"""An enforcer declaring two pools (`--offer-pool`), on a cluster whose schedulable node is
labelled into one of them (a label patch, as an administrator labels nodes: the same on kubesim
and a real API server): the offer has an entry per pool with that pool's capacity, a ShadowPod's
pod runs on its pool's nodes only, and nothing the consumer writes widens that. A consumer
whose Quota lends it some pools (`spec.pools`) is offered those only and runs its pods in those
only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from shared.api.quota import QUOTA
from shared.api.resource_offer import RESOURCE_OFFER
from shared.node_selector import node_selector_matches
from shared.quantity import parse_quantity
from shared.wellknown import RESOURCE_OFFER_NAME
from tests.e2e.devices import schedulable_node
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    WEBHOOK_NAME,
    Enforcer,
    ShadowPods,
    denial,
    make_twin_namespace,
    new_name,
    room_for_pods,
    running_enforcer,
    shadowpod,
)

CONSUMER = "consumer-pools"
POOL_LABEL = "pools.annex.test/pool"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture(scope="module")
def labelled(remote: Any) -> Iterator[str]:
    """A schedulable node in pool "here" while the module runs (label removed afterwards); no
    node is in pool "nowhere"."""
    node = schedulable_node(remote)
    remote.core.patch_node(node, {"metadata": {"labels": {POOL_LABEL: "here"}}})
    yield node
    remote.core.patch_node(node, {"metadata": {"labels": {POOL_LABEL: None}}})


@pytest.fixture(scope="module")
def enforcer(remote: Any, labelled: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforcer]:
    with running_enforcer(remote, remote.kubeconfig, Path(tmp_path_factory.mktemp("enforcer")),
                          ["--offer-pool", f"here={POOL_LABEL}=here",
                           "--offer-pool", f"nowhere={POOL_LABEL}=nowhere"]) as process:
        yield process


@pytest.fixture(scope="module")
def tenant(remote: Any, enforcer: Enforcer) -> str:
    return room_for_pods(remote, CONSUMER)


@pytest.fixture
def twin(remote: Any, enforcer: Enforcer, tenant: str) -> str:
    return make_twin_namespace(remote, CONSUMER)


def _pool_spec(name: str, pool: str | None, pod: dict[str, Any] | None = None,
               consumer: str = CONSUMER) -> dict[str, Any]:
    body = shadowpod(name, consumer, pod)
    if pool is not None:
        body["spec"]["pool"] = pool
    return body


def _selector(remote: Any, namespace: str, name: str) -> dict[str, Any]:
    pod = wait_for(lambda: _pod(remote, namespace, name), message=f"the pod of {name}")
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    return affinity[REQUIRED]  # type: ignore[no-any-return]


def _pod(remote: Any, namespace: str, name: str) -> dict[str, Any] | None:
    pods = remote.core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}")
    return remote.api_client.sanitize_for_serialization(pods.items[0]) if pods.items else None  # type: ignore[no-any-return]


def _offer_pools(remote: Any, tenant: str) -> list[dict[str, Any]] | None:
    """The pools of the offer in `tenant` ([] for none), None while there is no offer."""
    try:
        spec = client.CustomObjectsApi(remote.api_client).get_namespaced_custom_object(
            RESOURCE_OFFER.group, RESOURCE_OFFER.version, tenant, RESOURCE_OFFER.plural,
            RESOURCE_OFFER_NAME)["spec"]
    except client.ApiException:
        return None
    return list(spec.get("pools") or [])


def test_each_pool_has_its_entry_in_the_offer_with_its_own_capacity(
        remote: Any, tenant: str) -> None:
    here, nowhere = wait_for(lambda: _offer_pools(remote, tenant), timeout=60,
                             message="the offer's pools")
    assert (here["name"], here["nodeSelector"]) == ("here", {POOL_LABEL: "here"})
    assert here["labels"][POOL_LABEL] == "here"
    assert parse_quantity(here["resources"]["cpu"]) > 0
    assert parse_quantity(nowhere["resources"]["cpu"]) == 0  # no node holds its label


def test_a_pod_runs_on_its_pools_nodes(remote: Any, twin: str, labelled: str,
                                       shadowpods: ShadowPods) -> None:
    name = new_name("here")
    shadowpods.create(twin, _pool_spec(name, "here"))
    selector = _selector(remote, twin, name)
    assert node_selector_matches(selector, {POOL_LABEL: "here"})
    assert not node_selector_matches(selector, {POOL_LABEL: "nowhere"})
    assert not node_selector_matches(selector, {})
    wait_for(lambda: (_pod(remote, twin, name) or {}).get("spec", {}).get("nodeName")
             == labelled, message="the pod on the pool's node")


def test_the_consumers_own_affinity_is_narrowed_to_its_pool_never_widened(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("wide")
    wide = {"containers": [{"name": "main", "image": "nginx:1"}],
            "affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}}
    shadowpods.create(twin, _pool_spec(name, "nowhere", wide))
    selector = _selector(remote, twin, name)
    # Its own requirement kept, the pool's added: no node of the cluster is in that pool.
    assert node_selector_matches(selector, {"kubernetes.io/os": "linux", POOL_LABEL: "nowhere"})
    assert not node_selector_matches(selector, {"kubernetes.io/os": "linux"})
    assert not node_selector_matches(selector, {POOL_LABEL: "nowhere"})

    def unschedulable() -> bool:
        conditions = ((_pod(remote, twin, name) or {}).get("status") or {}).get("conditions")
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in conditions or [])

    wait_for(unschedulable, timeout=60, message="the pod kept off every node outside its pool")


def test_a_pod_naming_no_pool_runs_on_some_pools_nodes(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    name = new_name("any")
    shadowpods.create(twin, _pool_spec(name, None))
    selector = _selector(remote, twin, name)
    assert node_selector_matches(selector, {POOL_LABEL: "here"})
    assert node_selector_matches(selector, {POOL_LABEL: "nowhere"})
    assert not node_selector_matches(selector, {})


def test_an_unknown_pool_or_a_changed_one_is_refused(
        remote: Any, twin: str, shadowpods: ShadowPods) -> None:
    assert denial(WEBHOOK_NAME, lambda: shadowpods.create(
        twin, _pool_spec(new_name("elsewhere"), "elsewhere"))) == (
        "spec.pool: Unsupported value 'elsewhere': this provider's pools are here, nowhere")
    name = new_name("moved")
    shadowpods.create(twin, _pool_spec(name, "here"))
    assert denial(WEBHOOK_NAME, lambda: shadowpods.patch(
        twin, name, {"spec": {"pool": "nowhere"}})) == (
        "spec.pool: Forbidden: the pool of a ShadowPod cannot change")
    assert shadowpods.get(twin, name)["spec"]["pool"] == "here"


# --- a consumer lent some of the pools (its Quota's spec.pools) -------------------------------

LENT = "consumer-lent"
"""Lent the pool "here" only."""
UNDECLARED = "consumer-undeclared"
"""Lent a pool the provider does not declare: nothing."""


def _lend(remote: Any, consumer: str, pools: list[str] | None) -> str:
    """The consumer's tenant namespace, its Quota lending it `pools`."""
    tenant = room_for_pods(remote, consumer)
    client.CustomObjectsApi(remote.api_client).patch_namespaced_custom_object(
        QUOTA.group, QUOTA.version, tenant, QUOTA.plural, consumer, {"spec": {"pools": pools}})
    return tenant


@pytest.fixture(scope="module")
def lent_tenant(remote: Any, enforcer: Enforcer) -> str:
    return _lend(remote, LENT, ["here"])


def _offered_pools(remote: Any, tenant: str) -> list[str] | None:
    pools = _offer_pools(remote, tenant)
    return None if pools is None else [pool["name"] for pool in pools]


def test_a_consumers_offer_lists_only_the_pools_its_quota_lends_it(
        remote: Any, tenant: str, lent_tenant: str) -> None:
    wait_for(lambda: _offered_pools(remote, lent_tenant) == ["here"], timeout=60,
             message="the lent consumer's offer of pool here only")
    assert _offered_pools(remote, tenant) == ["here", "nowhere"]  # another consumer: every pool
    api = client.CustomObjectsApi(remote.api_client)
    api.patch_namespaced_custom_object(QUOTA.group, QUOTA.version, lent_tenant, QUOTA.plural,
                                       LENT, {"spec": {"pools": ["nowhere"]}})
    try:
        wait_for(lambda: _offered_pools(remote, lent_tenant) == ["nowhere"], timeout=60,
                 message="the offer following the Quota's pools")
    finally:
        api.patch_namespaced_custom_object(QUOTA.group, QUOTA.version, lent_tenant,
                                           QUOTA.plural, LENT, {"spec": {"pools": ["here"]}})
    wait_for(lambda: _offered_pools(remote, lent_tenant) == ["here"], timeout=60,
             message="the offer of pool here again")


def test_a_pool_not_lent_to_the_consumer_is_refused_and_naming_none_stays_in_its_pools(
        remote: Any, lent_tenant: str, shadowpods: ShadowPods) -> None:
    twin = make_twin_namespace(remote, LENT)
    assert denial(WEBHOOK_NAME, lambda: shadowpods.create(
        twin, _pool_spec(new_name("lent"), "nowhere", consumer=LENT))) == (
        "spec.pool: Forbidden: pool 'nowhere' is not lent to this consumer (its Quota's "
        "spec.pools: here)")
    name = new_name("lent-any")
    shadowpods.create(twin, _pool_spec(name, None, consumer=LENT))
    selector = _selector(remote, twin, name)
    assert node_selector_matches(selector, {POOL_LABEL: "here"})
    assert not node_selector_matches(selector, {POOL_LABEL: "nowhere"})


def test_a_quota_lending_an_undeclared_pool_gets_an_event_and_lends_nothing(
        remote: Any, enforcer: Enforcer, shadowpods: ShadowPods) -> None:
    tenant = _lend(remote, UNDECLARED, ["elsewhere"])

    def warned() -> list[str]:
        return [event.message for event in remote.core.list_namespaced_event(tenant).items
                if event.reason == "UndeclaredPools"
                and event.involved_object.name == UNDECLARED]
    assert wait_for(warned, timeout=60, message="an UndeclaredPools Event on the Quota") == [
        "spec.pools names elsewhere, which this provider does not declare (its pools: here, "
        "nowhere): lent nothing"]
    wait_for(lambda: _offered_pools(remote, tenant) == [], timeout=60,
             message="an offer of no pool")
    twin = make_twin_namespace(remote, UNDECLARED)
    assert denial(WEBHOOK_NAME, lambda: shadowpods.create(
        twin, _pool_spec(new_name("none"), None, consumer=UNDECLARED))) == (
        "spec.pool: Forbidden: this consumer is lent none of this provider's pools (its "
        "Quota's spec.pools: elsewhere)")
