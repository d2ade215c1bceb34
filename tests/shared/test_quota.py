"""Quota arithmetic: quantities as apimachinery reads them, pod usage, and admission against a
simple reference model."""

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.api.quota import LimitsEnforcement
from shared.quantity import QuantityFormat, format_quantity, parse, parse_quantity
from shared.quota import (
    admit,
    admit_claim,
    limits_for,
    pod_requests,
    total_usage,
    used_for,
)

EXAMPLES = settings(max_examples=3000, deadline=None, database=None)
# Generating whole pods costs more per example.
POD_EXAMPLES = settings(max_examples=2000, deadline=None, database=None)
MI = 2**20


def _container(name: str, millicpu: int | None, memory_mi: int | None) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if millicpu is not None:
        requests["cpu"] = f"{millicpu}m"
    if memory_mi is not None:
        requests["memory"] = f"{memory_mi}Mi"
    return {"name": name, "image": "app", "resources": {"requests": requests}}


# (millicpu, MiB) per container; None means "no request".
requests = st.tuples(
    st.one_of(st.none(), st.integers(0, 8000)), st.one_of(st.none(), st.integers(0, 4096))
)


def _reference_usage(
    containers: list[tuple[int | None, int | None]], inits: list[tuple[int | None, int | None]]
) -> dict[str, Decimal]:
    """The textbook rule: sum the containers, max with each init container, plus one pod."""
    usage = {"pods": Decimal(1)}
    for index, name, unit in ((0, "cpu", Decimal("0.001")), (1, "memory", Decimal(MI))):
        if any(c[index] is not None for c in containers + inits):
            total = sum(c[index] or 0 for c in containers)
            peak = max((c[index] or 0 for c in inits), default=0)
            usage[name] = max(total, peak) * unit
    return usage


def _spec(
    containers: list[tuple[int | None, int | None]], inits: list[tuple[int | None, int | None]]
) -> dict[str, Any]:
    return {
        "containers": [_container(f"c{i}", *c) for i, c in enumerate(containers)],
        "initContainers": [_container(f"i{i}", *c) for i, c in enumerate(inits)],
    }


@POD_EXAMPLES
@given(st.lists(requests, min_size=1, max_size=5), st.lists(requests, max_size=3))
def test_pod_usage_matches_the_reference_model(
    containers: list[tuple[int | None, int | None]], inits: list[tuple[int | None, int | None]]
) -> None:
    assert pod_requests(_spec(containers, inits)) == _reference_usage(containers, inits)


full_requests = st.tuples(st.integers(1, 4000), st.integers(1, 2048))


@POD_EXAMPLES
@given(
    st.lists(st.lists(full_requests, min_size=1, max_size=3), min_size=1, max_size=12),
    st.integers(1, 16000),
    st.integers(1, 16384),
)
def test_a_consumer_admitted_pod_by_pod_never_exceeds_its_quota(
    pods: list[list[tuple[int, int]]], limit_millicpu: int, limit_mi: int
) -> None:
    """Admit pods one at a time as the enforcer does; a pod is admitted exactly when the
    reference model says it fits, and the running total stays within the limits."""
    limits = {"cpu": f"{limit_millicpu}m", "memory": f"{limit_mi}Mi", "pods": "100"}
    admitted: list[dict[str, Decimal]] = []
    used_millicpu = used_mi = 0
    for containers in pods:
        spec = _spec(list(containers), [])
        decision = admit(LimitsEnforcement.SOFT, False, limits, total_usage(admitted), spec)
        cpu = sum(c[0] for c in containers)
        memory = sum(c[1] for c in containers)
        fits = used_millicpu + cpu <= limit_millicpu and used_mi + memory <= limit_mi
        assert decision.allowed == fits, decision.message
        if decision.allowed:
            admitted.append(decision.requested)
            used_millicpu, used_mi = used_millicpu + cpu, used_mi + memory
        else:
            assert "quota exceeded for" in decision.message
            assert "short by" in decision.message
    total = total_usage(admitted)
    assert total.get("cpu", Decimal(0)) <= parse_quantity(limits["cpu"])
    assert total.get("memory", Decimal(0)) <= parse_quantity(limits["memory"])
    assert total.get("pods", Decimal(0)) == len(admitted)


def test_admitted_usage_is_written_back_in_canonical_units() -> None:
    pods = [_spec([(250, 512), (1250, 1024)], []), _spec([(500, 512)], [])]
    usage = total_usage(admit(LimitsEnforcement.NONE, False, {}, {}, pod).requested for pod in pods)
    limits = {"resources": {"cpu": "4", "memory": "8Gi", "pods": "10"}}
    assert used_for(limits, usage) == {"cpu": "2", "memory": "2Gi", "pods": "2"}
    assert used_for({"resources": {"cpu": "1"}}, {"cpu": Decimal("0.1")}) == {"cpu": "100m"}


def test_the_shortfall_message_names_resource_and_figures() -> None:
    spec = _spec([(500, 256)], [])
    decision = admit(LimitsEnforcement.SOFT, False, {"cpu": "10", "memory": "1Gi", "pods": "10"},
                     {"cpu": "9700m"}, spec)
    assert not decision.allowed
    assert decision.message == (
        "quota exceeded for cpu: requested 500m, used 9700m of 10, short by 200m"
    )


@pytest.mark.parametrize("enforcement", list(LimitsEnforcement))
def test_cordoned_consumers_get_no_pod_in_any_mode(enforcement: LimitsEnforcement) -> None:
    decision = admit(enforcement, True, {"cpu": "100"}, {}, _spec([(1, 1)], []))
    assert not decision.allowed
    assert "cordoned" in decision.message


def test_none_enforcement_admits_pods_without_requests_as_using_nothing_but_a_pod() -> None:
    spec = _spec([(None, None)], [])
    decision = admit(LimitsEnforcement.NONE, False, {"cpu": "1", "pods": "2"},
                     {"cpu": "1", "pods": "1"}, spec)
    assert decision.allowed, decision.message
    assert decision.requested == {"pods": Decimal(1)}


def test_none_enforcement_still_refuses_what_does_not_fit() -> None:
    """Liqo counts requests in every mode: None only waives the need to state them."""
    decision = admit(LimitsEnforcement.NONE, False, {"cpu": "1", "pods": "10"}, {"cpu": "800m"},
                     _spec([(500, None)], []))
    assert not decision.allowed
    assert decision.message == (
        "quota exceeded for cpu: requested 500m, used 800m of 1, short by 300m")
    full = admit(LimitsEnforcement.NONE, False, {"cpu": "10", "pods": "1"}, {"pods": "1"},
                 _spec([(None, None)], []))
    assert not full.allowed
    assert "quota exceeded for pods" in full.message


def test_a_resource_neither_offered_nor_in_the_quota_is_refused() -> None:
    spec = {"containers": [{"name": "gpu", "resources": {"requests": {
        "nvidia.com/gpu": "1", "example.com/zero": "0"}}}]}
    decision = admit(LimitsEnforcement.NONE, False, {"cpu": "4", "pods": "10"}, {}, spec)
    assert not decision.allowed
    assert decision.message == ("nvidia.com/gpu is neither offered to this consumer nor in its "
                                "quota: requested 1, none available")


def test_the_limits_are_the_quota_and_the_offer_for_what_it_does_not_list() -> None:
    offered = {"cpu": "2", "memory": "4Gi", "pods": "55"}
    assert limits_for({"cpu": "1", "requests.storage": "10Gi"}, offered) == {
        "cpu": "1", "memory": "4Gi", "pods": "55", "requests.storage": "10Gi"}
    assert limits_for({}, offered) == offered  # an empty Quota: what the offer says
    assert limits_for(None, offered) == offered  # no Quota at all: the same, never unlimited


def test_a_consumer_without_a_quota_is_limited_by_its_offer() -> None:
    limits = limits_for(None, {"cpu": "2", "memory": "4Gi", "pods": "55"})
    decision = admit(LimitsEnforcement.NONE, False, limits, {"cpu": "1500m"},
                     _spec([(1000, 128)], []))
    assert not decision.allowed
    assert decision.message == ("quota exceeded for cpu: requested 1, used 1500m of 2, "
                                "short by 500m")


def test_claims_are_limited_by_what_the_limits_name_and_the_offer_names_no_storage() -> None:
    limits = limits_for(None, {"cpu": "2", "pods": "55"})
    assert admit_claim(False, limits, {}, {"requests.storage": "1Ti",
                                           "persistentvolumeclaims": "1"}).allowed
    capped = limits_for({"requests.storage": "10Gi"}, {"cpu": "2"})
    assert not admit_claim(False, capped, {"requests.storage": "8Gi"},
                           {"requests.storage": "4Gi"}).allowed


# --- quantities ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("1.5", Decimal("1.5")),
        ("2Gi", Decimal(2 * 2**30)),
        ("1e3", Decimal(1000)),
        ("500Mi", Decimal(500 * MI)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("+5", Decimal(5)),
        ("-1.5", Decimal("-1.5")),
        (".5", Decimal("0.5")),
        ("1E", Decimal(10**18)),
        ("1e-10", Decimal("1e-9")),
        ("-1e-10", Decimal("-1e-9")),
        (3, Decimal(3)),
        (0.25, Decimal("0.25")),
        (" 3 ", Decimal(3)),
    ],
)
def test_quantities_parse_like_apimachinery(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "1Kb", "abc", "1e", "1ki", "--1", "1e3.5", "inf"])
def test_malformed_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


decimals = st.decimals(
    min_value=Decimal("-1e15"), max_value=Decimal("1e15"), places=9, allow_nan=False
)


@EXAMPLES
@given(decimals, st.sampled_from(list(QuantityFormat)))
def test_canonical_form_parses_back_to_the_same_value(
    value: Decimal, quantity_format: QuantityFormat
) -> None:
    text = format_quantity(value, quantity_format)
    assert parse_quantity(text) == value
    assert "." not in text, "the canonical form has no fractional digits"


@EXAMPLES
@given(st.integers(0, 2**62), st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]))
def test_binary_quantities_keep_their_suffix_style(mantissa: int, suffix: str) -> None:
    quantity = parse(f"{mantissa}{suffix}")
    text = format_quantity(quantity.value, quantity.format)
    assert parse_quantity(text) == quantity.value
    if quantity.value >= 1024 and quantity.value < 2**63 - 1:
        assert text.endswith("i")


def test_quota_usage_is_written_in_the_style_of_each_limit() -> None:
    spec = {"resources": {"cpu": "4", "memory": "8Gi", "pods": "10", "odd": "not-a-quantity"}}
    usage = {"cpu": Decimal("1.5"), "memory": Decimal(512 * 1024 * 1024)}
    assert used_for(spec, usage) == {"cpu": "1500m", "memory": "512Mi", "pods": "0", "odd": "0"}
