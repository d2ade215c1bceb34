"""shared.forge.namespace_offloading: the phase over clusters, and plans that converge: once
written, a plan asks for nothing more, and no twin is asked for without the finalizer that holds
the NamespaceOffloading's deletion until it is gone. (The plans themselves are golden cases,
namespace_offloading/.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.api.namespace_map import MappingPhase, NamespaceMap
from shared.forge.namespace_offloading import finalizer_name, offloading_plan, phase_of
from tests.shared.forge.objects import merge_patched

EXAMPLES = settings(max_examples=1500, deadline=None, database=None)
NOW = datetime(2026, 11, 21, 20, 0, tzinfo=UTC)
REMOTE = "remote"
NODE_LABELS = {"liqo.io/type": "virtual-node", "region": "eu"}


def test_the_offloading_phase_over_clusters() -> None:
    ready = [{"type": "Ready", "status": "True", "reason": "Accepted"}]
    pending = [{"type": "Ready", "status": "False", "reason": "Pending"}]
    failed = [{"type": "Ready", "status": "False", "reason": "CreationLoopBackOff"}]
    invalid = [{"type": "Ready", "status": "False", "reason": "InvalidNamespaceName"}]
    assert phase_of({}, False) == "NoClusterSelected"
    assert phase_of({"a": ready, "b": ready}, False) == "Ready"
    assert phase_of({"a": ready, "b": pending}, False) == "InProgress"
    assert phase_of({"a": ready, "b": []}, False) == "InProgress"  # b has not reported yet
    assert phase_of({"a": ready, "b": failed}, False) == "SomeFailed"
    assert phase_of({"a": failed, "b": invalid}, False) == "AllFailed"
    assert phase_of({"a": ready}, True) == "Terminating"


_condition = st.fixed_dictionaries({
    "type": st.just("Ready"),
    "status": st.sampled_from(["True", "False"]),
    "reason": st.sampled_from(["Accepted", "Pending", "CreationLoopBackOff", "Terminating"]),
    "message": st.sampled_from(["namespace extended to 'shop-home'", "waiting"]),
    "lastTransitionTime": st.just("2026-11-21T19:00:00Z"),
})
_conditions_by_cluster = st.dictionaries(st.sampled_from([REMOTE, "other"]),
                                         st.lists(_condition, max_size=1), max_size=2)


@st.composite
def offloadings(draw: st.DrawFn) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "offloading", "namespace": "shop", "resourceVersion": "9",
                                "generation": draw(st.integers(1, 3))}
    if draw(st.booleans()):
        metadata["deletionTimestamp"] = "2026-11-21T19:59:00Z"
    if draw(st.booleans()):
        metadata["finalizers"] = [finalizer_name(REMOTE)]
    spec: dict[str, Any] = draw(st.sampled_from([
        {}, {"namespaceMappingStrategy": "EnforceSameName"},
        {"namespaceMappingStrategy": "SelectedName"},  # refused: no remoteNamespaceName
        {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "shop-x"}]))
    region = draw(st.sampled_from([None, "eu", "us"]))
    if region is not None:
        spec["clusterSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "region", "operator": "In", "values": [region]}]}]}
    status = draw(st.fixed_dictionaries({}, optional={
        "offloadingPhase": st.sampled_from(["Ready", "InProgress", "Terminating"]),
        "remoteNamespaceName": st.sampled_from(["shop-home", "shop"]),
        "observedGeneration": st.integers(1, 3),
        "remoteNamespacesConditions": _conditions_by_cluster,
    }))
    return {"metadata": metadata, "spec": spec, "status": status}


_twin_names = st.sampled_from(["shop-home", "shop", "shop-x", "shop-old"])
namespace_maps = st.one_of(st.none(), st.builds(
    lambda desired, current: NamespaceMap.model_validate({
        "metadata": {"name": "home", "namespace": "liqo-tenant-home"},
        "spec": {"desiredMapping": {"shop": desired} if desired else {}},
        "status": {"currentMapping": {"shop": current} if current else {}}}),
    st.one_of(st.none(), _twin_names),
    st.one_of(st.none(), st.fixed_dictionaries({
        "remoteNamespace": _twin_names, "phase": st.sampled_from(list(MappingPhase))}))))


def _plan(offloading: dict[str, Any] | None, namespace_map: NamespaceMap | None,
          now: datetime) -> Any:
    return offloading_plan(offloading, "shop", namespace_map,
                           nodes={"liqo-remote": NODE_LABELS}, home_cluster_id="home",
                           remote_cluster_id=REMOTE, now=now)


@EXAMPLES
@given(offloadings(), namespace_maps)
def test_a_written_plan_asks_for_nothing_more(offloading: dict[str, Any],
                                              namespace_map: NamespaceMap | None) -> None:
    plan = _plan(offloading, namespace_map, NOW)
    if plan.remote_namespace is not None:
        assert plan.finalizer, "a twin is asked for only under the finalizer"
    written = {**offloading, "status": merge_patched(offloading["status"], plan.status or {})}
    finalizers = [] if not plan.finalizer else [finalizer_name(REMOTE)]
    written["metadata"] = {**offloading["metadata"], "finalizers": finalizers}
    again = _plan(written, namespace_map, NOW + timedelta(minutes=1))
    assert again.status is None
    assert again.invalid_name is None  # reported once
    assert (again.scheduling_enabled, again.remote_namespace, again.finalizer) == (
        plan.scheduling_enabled, plan.remote_namespace, plan.finalizer)


@EXAMPLES
@given(offloadings(), namespace_maps)
def test_a_withdrawn_virtual_node_asks_for_no_twin_and_holds_until_it_is_gone(
        offloading: dict[str, Any], namespace_map: NamespaceMap | None) -> None:
    """Its VirtualNode deleted, the agent withdraws every namespace (the home controller's drain
    waits on the finalizer): no entry; the finalizer stays while the enforcer still reports the
    twin, and is never added."""
    plan = offloading_plan(offloading, "shop", namespace_map,
                           nodes={"liqo-remote": NODE_LABELS}, home_cluster_id="home",
                           remote_cluster_id=REMOTE, now=NOW, withdrawn=True)
    assert plan.remote_namespace is None
    still_mapped = namespace_map is not None and "shop" in namespace_map.status.current_mapping
    held = finalizer_name(REMOTE) in (offloading["metadata"].get("finalizers") or [])
    assert plan.finalizer == (still_mapped and held)
