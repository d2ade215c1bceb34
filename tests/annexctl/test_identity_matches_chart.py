"""The consumer identity annexctl creates is the one the remote-enforcer chart creates: both
come from shared.tenancy, and the chart's template is checked against it here."""

from __future__ import annotations

from typing import Any

from shared.api.quota import LimitsEnforcement
from shared.tenancy import consumer_identity, consumer_quota
from tests.charts.helm import ROOT, render

CONSUMER = "home-1"


Objects = list[dict[str, Any]]


def _chart_consumer_objects(consumer: dict[str, Any]) -> tuple[Objects, dict[str, str]]:
    manifests = render(ROOT / "charts" / "remote-enforcer",
                       {"clusterId": "provider-1", "consumers": [consumer]})
    kinds = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "Quota")
    objects = [m for m in manifests if m["kind"] in kinds
               and (m["kind"] == "Namespace" or m["metadata"].get("namespace", "").startswith(
                   "annex-tenant-") or m["metadata"].get("namespace") == consumer.get("namespace"))]
    release_labels = next(m for m in objects if m["kind"] == "ServiceAccount")["metadata"]["labels"]
    return objects, release_labels


def test_the_chart_creates_exactly_the_shared_consumer_identity_and_quota() -> None:
    objects, labels = _chart_consumer_objects(
        {"clusterId": CONSUMER, "quota": {"limitsEnforcement": "Hard", "resources": {"cpu": "8"}}})
    expected = [*consumer_identity(CONSUMER, labels=labels),
                consumer_quota(CONSUMER, limits_enforcement=LimitsEnforcement.HARD,
                               resources={"cpu": "8"}, labels=labels)]
    assert sorted(objects, key=str) == sorted(expected, key=str)


def test_a_chosen_tenant_namespace_is_used_by_both() -> None:
    objects, labels = _chart_consumer_objects({"clusterId": CONSUMER, "namespace": "tenant-x"})
    expected = [*consumer_identity(CONSUMER, "tenant-x", labels=labels),
                consumer_quota(CONSUMER, "tenant-x", labels=labels)]
    assert sorted(objects, key=str) == sorted(expected, key=str)
