"""shared.forge.foreign_cluster: the phase, the status written only on change, what goes with
its announcement, the VirtualNode of an accepted provider, the offer summary."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.api.foreign_cluster import DiscoverySource, ForeignCluster, PeeringPhase
from shared.dnssd import Announcement
from shared.forge import foreign_cluster as rules

SINCE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
NOW = datetime(2026, 1, 2, 4, 0, 0, tzinfo=UTC)
SEEN = rules.Sighting(DiscoverySource.MDNS, "p1._annex._tcp.local.",
                      Announcement("p1", "https://10.0.0.1:6443"), SINCE)


def foreign(**changes: Any) -> ForeignCluster:
    obj = rules.discovered(SEEN)
    obj.update(changes)
    return ForeignCluster.model_validate(obj)


def with_status(fc: ForeignCluster, status: dict[str, Any] | None) -> ForeignCluster:
    return ForeignCluster.model_validate({**fc.to_wire(), "status": status or {}})


def test_a_discovered_cluster_is_named_after_its_id_and_not_accepted() -> None:
    fc = foreign()
    assert fc.metadata.name == "p1" and fc.spec.cluster_id == "p1"
    assert fc.spec.api_server_url == "https://10.0.0.1:6443" and fc.spec.accepted is False
    assert fc.metadata.labels == {rules.DISCOVERED_BY_LABEL: "mDNS"}


def test_the_phase_moves_only_with_consent_and_a_virtual_node() -> None:
    assert rules.phase(False, None) is PeeringPhase.DISCOVERED
    assert rules.phase(True, None) is PeeringPhase.AUTHENTICATED
    assert rules.phase(True, "ns/p1") is PeeringPhase.PEERED


def test_the_status_is_written_once_and_a_refresh_writes_nothing() -> None:
    fc = foreign()
    status = rules.status(fc, [SEEN], credentials=False, virtual_node=None, offer=None, now=NOW)
    assert status == {"phase": "Discovered", "virtualNode": None, "offer": None,
                      "conditions": [], "discovery": {
                          "source": "mDNS", "instance": "p1._annex._tcp.local.",
                          "announced": True, "announcedSince": "2026-01-02T03:04:05Z"}}
    written = with_status(fc, status)
    assert rules.status(written, [SEEN], credentials=False, virtual_node=None, offer=None,
                        now=NOW) is None
    # A restarted controller sees the same announcement afresh: still nothing to write.
    again = rules.Sighting(SEEN.source, SEEN.instance, SEEN.announcement, NOW)
    assert rules.status(written, [again], credentials=False, virtual_node=None, offer=None,
                        now=NOW) is None


def test_a_cluster_nobody_acted_on_goes_with_its_announcement_any_other_stays() -> None:
    fc = with_status(foreign(), {"phase": "Discovered"})
    assert rules.forgotten(fc, []) and not rules.forgotten(fc, [SEEN])
    accepted = with_status(foreign(spec={"clusterId": "p1", "accepted": True}),
                           {"phase": "Discovered"})
    assert not rules.forgotten(accepted, [])
    assert not rules.forgotten(with_status(foreign(), {"phase": "Authenticated"}), [])
    by_hand = foreign(metadata={"name": "p1"})
    assert not rules.forgotten(by_hand, [])
    gone = rules.status(with_status(fc, rules.status(fc, [SEEN], credentials=True,
                                                     virtual_node=None, offer=None, now=NOW)),
                        [], credentials=True, virtual_node=None, offer=None, now=NOW)
    assert gone is not None and gone["discovery"]["announced"] is False


def test_accepting_waits_for_consent_then_names_the_virtual_node() -> None:
    fc = foreign(spec={"clusterId": "p1", "accepted": True})
    waiting = rules.status(fc, [SEEN], credentials=False, virtual_node=None, offer=None,
                           now=NOW)
    assert waiting is not None and waiting["phase"] == "Discovered"
    assert [c["reason"] for c in waiting["conditions"]] == ["WaitingForConsent"]
    peered = rules.status(fc, [SEEN], credentials=True, virtual_node="annex-system/p1",
                          offer=None, now=NOW)
    assert peered is not None and peered["phase"] == "Peered"
    assert peered["conditions"][0]["status"] == "True"
    assert rules.virtual_node(fc, "annex-system", "p1-kubeconfig")["spec"] == {
        "clusterId": "p1", "kubeconfigSecretRef": {"name": "p1-kubeconfig"}}


def test_the_offer_summary() -> None:
    assert rules.offer_summary(None) is None
    assert rules.offer_summary({"cpu": "4", "memory": "8Gi", "pods": "110", "x": "1"}) == {
        "resources": {"cpu": "4", "memory": "8Gi", "pods": "110", "x": "1"},
        "summary": "cpu=4 memory=8Gi pods=110"}
    assert rules.offer_summary({"cpu": "4", "memory": "8Gi", "pods": "110", "nvidia.com/gpu": "2",
                                "hugepages-2Mi": "1Gi"})["summary"] == (  # type: ignore[index]
        "cpu=4 memory=8Gi pods=110 hugepages-2Mi=1Gi nvidia.com/gpu=2")
    assert rules.offer_summary({})["summary"] == "none"  # type: ignore[index]
    assert rules.offer_summary({"cpu": "0", "memory": "8Gi"})["summary"] == "none"  # type: ignore[index]
    assert rules.offer_is_empty({"pods": "0"}) and not rules.offer_is_empty({"cpu": "500m"})


def test_the_virtual_node_is_cordoned_while_the_offer_is_empty_and_only_our_cordon_lifted() -> None:
    node: dict[str, Any] = {"metadata": {"name": "liqo-p1"}, "spec": {}}
    assert rules.cordon_patch(node, None) is None  # the offer is not known yet
    assert rules.cordon_patch(node, {"cpu": "4", "pods": "10"}) is None
    cordon = rules.cordon_patch(node, {"cpu": "0", "pods": "10"})
    assert cordon == {"metadata": {"annotations": {rules.CORDONED_FOR_EMPTY_OFFER: "true"}},
                      "spec": {"unschedulable": True}}
    ours = {"metadata": {"annotations": {rules.CORDONED_FOR_EMPTY_OFFER: "true"}},
            "spec": {"unschedulable": True}}
    assert rules.cordon_patch(ours, {}) is None
    assert rules.cordon_patch(ours, {"cpu": "1", "memory": "1Gi", "pods": "1"}) == {
        "metadata": {"annotations": {rules.CORDONED_FOR_EMPTY_OFFER: None}},
        "spec": {"unschedulable": None}}
    users = {"metadata": {}, "spec": {"unschedulable": True}}
    assert rules.cordon_patch(users, {}) is None
    assert rules.cordon_patch(users, {"cpu": "1"}) is None


def test_an_absence_from_a_source_that_is_not_looking_changes_nothing() -> None:
    fc = foreign()
    written = with_status(fc, rules.status(fc, [SEEN], credentials=False, virtual_node=None,
                                           offer=None, now=NOW))
    assert rules.discovered_by(written) is DiscoverySource.MDNS
    assert rules.status(written, [], credentials=False, virtual_node=None, offer=None,
                        now=NOW, looking=False) is None
    gone = rules.status(written, [], credentials=False, virtual_node=None, offer=None, now=NOW)
    assert gone is not None and gone["discovery"]["announced"] is False


def test_a_virtual_node_name_held_by_another_cluster_is_said_on_the_condition() -> None:
    fc = foreign(spec={"clusterId": "p1", "accepted": True})
    refused = rules.status(fc, [SEEN], credentials=True, virtual_node=None, offer=None, now=NOW,
                           refused="VirtualNode annex-system/p1 exists for cluster other")
    assert refused is not None and refused["phase"] == "Authenticated"
    (condition,) = refused["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "VirtualNodeNameTaken")
    assert "other" in condition["message"]


def test_a_provider_known_without_discovery() -> None:
    fc = ForeignCluster.model_validate(rules.known("p2", "https://p2:6443", accepted=True))
    assert (fc.metadata.name, fc.spec.api_server_url, fc.spec.accepted) == (
        "p2", "https://p2:6443", True)
    assert rules.discovered_by(fc) is None and not rules.forgotten(fc, [])
    assert "apiServerUrl" not in rules.known("p3", None, accepted=False)["spec"]
