"""shared.forge.tenancy's twin namespace policy: which names a consumer's twins may have, how
many, and the ResourceQuota bounding the objects in each."""

from __future__ import annotations

import pytest

from shared.api.namespace_map import MappingPhase
from shared.api.quota import DEFAULT_NAMESPACE_OBJECT_COUNTS, NamespacePolicy
from shared.forge.namespace import remote_namespace_name
from shared.forge.tenancy import (
    OBJECT_COUNTS_QUOTA,
    name_allowed,
    refused_twins,
    resource_quota_patch,
    tenant_twin_problem,
    twin_name_problem,
    twin_resource_quota,
)
from shared.ownership import ownership_labels
from shared.wellknown import TENANT_NAMESPACE_LABEL

CONSUMER = "home-1"
DEFAULT = NamespacePolicy()


def test_names_carrying_the_consumer_s_id_are_accepted() -> None:
    assert twin_name_problem("apps", "apps-home-1", CONSUMER, DEFAULT) is None
    assert twin_name_problem("apps", "chosen-home-1", CONSUMER, DEFAULT) is None


def test_the_shortened_default_name_of_its_own_home_namespace_is_accepted() -> None:
    home = "a-very-long-namespace-name-that-the-default-name-strategy-must-cut"
    short = remote_namespace_name(home, "DefaultName", CONSUMER)  # type: ignore[arg-type]
    assert not short.endswith(CONSUMER)
    assert twin_name_problem(home, short, CONSUMER, DEFAULT) is None
    # the same hashed form under another home namespace is not this one's DefaultName
    assert twin_name_problem("other", short, CONSUMER, DEFAULT) is not None


def test_a_name_without_the_id_is_refused_unless_allowed() -> None:
    assert twin_name_problem("apps", "apps", CONSUMER, DEFAULT) == (
        "namespace 'apps' does not carry the consumer's cluster id (a twin name ends in "
        "'-home-1', as the DefaultName mapping strategy makes them) and is not in the "
        "consumer's namespacePolicy.allowedNames (none)")
    allowing = NamespacePolicy(allowed_names=["apps", "team-*"])
    assert twin_name_problem("apps", "apps", CONSUMER, allowing) is None
    assert twin_name_problem("x", "team-red", CONSUMER, allowing) is None
    assert twin_name_problem("x", "teams", CONSUMER, allowing) is not None
    # another consumer's DefaultName does not carry this one's id
    assert twin_name_problem("apps", "apps-home-2", CONSUMER, DEFAULT) is not None


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease",
                                  "kube-anything-home-1"])
def test_system_namespaces_are_refused_whatever_the_policy_allows(name: str) -> None:
    problem = twin_name_problem("x", name, CONSUMER, NamespacePolicy(allowed_names=["*"]))
    assert problem == (f"namespace {name!r} is a system namespace: it is never a consumer's "
                       f"twin namespace")


def test_tenant_namespaces_are_refused_by_name_and_by_label() -> None:
    problem = twin_name_problem("x", "annex-tenant-home-1", CONSUMER,
                                NamespacePolicy(allowed_names=["*"]))
    assert problem is not None and "tenant namespace" in problem
    labelled = {"metadata": {"name": "custom", "labels": {TENANT_NAMESPACE_LABEL: "true"}}}
    assert tenant_twin_problem(labelled, "custom") == (
        f"namespace 'custom' is a tenant namespace ({TENANT_NAMESPACE_LABEL}): it is never a "
        f"consumer's twin namespace")
    assert tenant_twin_problem({"metadata": {"name": "plain"}}, "plain") is None
    assert tenant_twin_problem(None, "absent") is None


def test_allowed_names_are_exact_or_prefixes() -> None:
    assert name_allowed("a", ["a"]) and not name_allowed("ab", ["a"])
    assert name_allowed("ab", ["a*"]) and name_allowed("anything", ["*"])
    assert not name_allowed("a", [])


def test_beyond_the_cap_made_twins_win_then_home_names_in_order() -> None:
    desired = {f"ns{i:02}": f"ns{i:02}-{CONSUMER}" for i in range(25)}
    made = {"ns24-home-1"}
    refused = refused_twins(desired, CONSUMER, DEFAULT, made.__contains__, others=0)
    # 20 made: ns24 (already made) and ns00..ns18; ns19..ns23 refused
    assert sorted(refused) == [f"ns{i:02}" for i in range(19, 24)]
    assert refused["ns19"] == {
        "remoteNamespace": "ns19-home-1", "phase": MappingPhase.CREATION_LOOP_BACK_OFF.value,
        "message": "consumer 'home-1' may have at most 20 twin namespaces "
                   "(namespacePolicy.maxTwinNamespaces): 'ns19-home-1' would be one more"}
    # twins of other maps count against the same cap
    assert len(refused_twins(desired, CONSUMER, DEFAULT, made.__contains__, others=18)) == 23


def test_refused_names_do_not_take_room_and_made_twins_stay() -> None:
    desired = {"a": "a", "b": "b-home-1", "c": "kube-system"}
    policy = NamespacePolicy(max_twin_namespaces=1)
    refused = refused_twins(desired, CONSUMER, policy, lambda name: False, others=0)
    assert sorted(refused) == ["a", "c"]
    assert all(e["phase"] == "CreationLoopBackOff" for e in refused.values())
    # a twin made before the policy was tightened is not refused
    assert "a" not in refused_twins(desired, CONSUMER, policy, {"a"}.__contains__, others=0)


def test_each_twin_has_a_resource_quota_of_the_policy_s_object_counts() -> None:
    quota = twin_resource_quota("apps-home-1", CONSUMER, "provider",
                                DEFAULT.object_counts)
    assert quota == {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": OBJECT_COUNTS_QUOTA, "namespace": "apps-home-1",
                     "labels": ownership_labels(CONSUMER, "provider")},
        "spec": {"hard": DEFAULT_NAMESPACE_OBJECT_COUNTS}}
    assert resource_quota_patch(quota, quota) is None
    changed = twin_resource_quota("apps-home-1", CONSUMER, "provider", {"configmaps": "5"})
    assert resource_quota_patch(quota, changed) == {"spec": {"hard": {
        **{name: None for name in DEFAULT_NAMESPACE_OBJECT_COUNTS if name != "configmaps"},
        "configmaps": "5"}}}
