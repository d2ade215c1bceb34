"""charts/remote-enforcer: refuses bad values, runs the enforcer with flags it accepts, watches
ShadowPod writes, works with cert-manager, and sets up each consumer's tenant namespace, identity
and quota. The checks both charts pass (test_both_charts.py) read this chart's CASE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from annex_demo.charts import of_kind
from remote_enforcer.admission import WEBHOOK_PATH
from remote_enforcer.rbac import TWIN_NAMESPACE_RULES, enforcer_rules, leader_election_rules
from remote_enforcer.settings import parse
from remote_enforcer.webhooks import registrations
from shared.api.quota import QuotaSpec
from shared.wellknown import (
    CONSUMER_IDENTITY_ANNOTATION,
    CONSUMER_SERVICE_ACCOUNT,
    REMOTE_CLUSTER_ID_LABEL,
    TENANT_NAMESPACE_LABEL,
)
from tests.charts.helm import (
    NAMESPACE,
    ROOT,
    ChartCase,
    normalized_rules,
    only,
    render,
    schema_error,
)

CHART = ROOT / "charts" / "remote-enforcer"
CERT_MANAGER_KINDS = [("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")]
MINIMAL = {"clusterId": "provider-1"}
FULL = {
    "clusterId": "provider-1",
    "region": "eu-west", "provider": "acme", "storageClasses": ["fast", "slow"],
    "offer": {"mode": "fixed", "resources": {"cpu": "8", "memory": "16Gi", "pods": "110"},
              "extendedResources": ["nvidia.com/gpu", "hugepages-*"],
              "pools": [{"name": "gpu", "nodeSelector": {"nvidia.com/gpu.present": "true"}},
                        {"name": "zone-a", "nodeSelector": {
                            "topology.kubernetes.io/zone": "a", "tier": "general"}}]},
    "defaultQuota": {"limitsEnforcement": "Soft", "resources": {"cpu": "2", "memory": "4Gi"}},
    "consumers": [
        {"clusterId": "home-1"},
        {"clusterId": "home-2", "namespace": "tenant-two",
         "quota": {"limitsEnforcement": "Hard", "resources": {"cpu": "4"}, "cordoned": True,
                   "podPolicy": {"podSecurity": "restricted"}}},
    ],
}
CONSUMER_CLUSTER_ROLE = "annex-remote-enforcer-consumer"  # of the release "annex"
CASE = ChartCase(
    name="remote-enforcer", chart=CHART, minimal=MINIMAL, full=FULL,
    rules=enforcer_rules(CONSUMER_CLUSTER_ROLE),
    probe_port="health", webhook_kind="ValidatingWebhookConfiguration", webhook_path=WEBHOOK_PATH,
    renderings={"cert-manager": {**FULL, "certManager": {"enabled": True}},
                "cert-manager-issuer": {**FULL, "certManager": {"enabled": True, "issuerRef": {
                    "name": "corp-ca", "kind": "ClusterIssuer"}}}},
    external_kinds=CERT_MANAGER_KINDS)


@pytest.mark.parametrize(("values", "complaint"), [
    ({}, "/clusterId"),
    ({"clusterId": "Not_A_Label"}, "/clusterId"),
    ({**MINIMAL, "offer": {"mode": "sometimes"}}, "/offer/mode"),
    ({**MINIMAL, "offer": {"mode": "fixed"}}, "/offer/resources"),
    ({**MINIMAL, "offer": {"mode": "share", "percent": 150}}, "/offer/percent"),
    ({**MINIMAL, "offer": {"mode": "fixed", "resources": {"cpu": "lots"}}}, "/offer/resources/cpu"),
    ({**MINIMAL, "offer": {"extendedResources": ["gpu"]}}, "/offer/extendedResources/0"),
    ({**MINIMAL, "offer": {"pools": [{"name": "GPU", "nodeSelector": {"a": "b"}}]}},
     "/offer/pools/0/name"),
    ({**MINIMAL, "offer": {"pools": [{"name": "gpu", "nodeSelector": {}}]}},
     "/offer/pools/0/nodeSelector"),
    ({**MINIMAL, "consumers": [{"namespace": "x"}]}, "/consumers/0"),
    ({**MINIMAL, "consumers": [{"clusterId": "a", "quotas": {}}]}, "/consumers/0"),
    ({**MINIMAL, "defaultQuota": {"limitsEnforcement": "Strict"}},
     "/defaultQuota/limitsEnforcement"),
    ({**MINIMAL, "webhook": {"port": 70000}}, "/webhook/port"),
    ({**MINIMAL, "logFormat": "xml"}, "/logFormat"),
    ({**MINIMAL, "replicas": -1}, "/replicas"),
    ({**MINIMAL, "leaderElection": {"leaseDurationSeconds": 0}},
     "/leaderElection/leaseDurationSeconds"),
])
def test_the_schema_refuses_bad_values(values: dict[str, Any], complaint: str) -> None:
    error = schema_error(CHART, values)
    assert error is not None and complaint in error, error


def test_the_deployment_runs_the_enforcer_with_flags_it_accepts() -> None:
    manifests = render(CHART, FULL)
    [container] = only(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]

    settings = parse(container["args"])
    assert settings.cluster_id == "provider-1"
    assert settings.kubeconfig is None  # in-cluster
    assert settings.offer_mode == "fixed"
    assert dict(settings.offer_resources) == {"cpu": "8", "memory": "16Gi", "pods": "110"}
    assert settings.offer_extended_resources == ("nvidia.com/gpu", "hugepages-*")
    assert [(pool.name, pool.selector) for pool in settings.offer_pools] == [
        ("gpu", (("nvidia.com/gpu.present", "true"),)),
        ("zone-a", (("tier", "general"), ("topology.kubernetes.io/zone", "a")))]
    assert (settings.region, settings.provider) == ("eu-west", "acme")
    assert settings.storage_classes == ("fast", "slow")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(settings.webhook_cert or "").parent) in mounts


def test_the_webhooks_are_registered_as_the_enforcer_serves_them() -> None:
    """ShadowPods everywhere; claims, Services, EndpointSlices and Ingresses of twin namespaces:
    each path, rule and namespace selector as remote_enforcer.webhooks describes them (what
    the tests register too)."""
    manifests = render(CHART, MINIMAL)
    registered = only(manifests, "ValidatingWebhookConfiguration")["webhooks"]
    service = registered[0]["clientConfig"]["service"]
    described = registrations("enforcer.annex.liqo.io", {"service": {
        "name": service["name"], "namespace": NAMESPACE, "port": 443}})
    for webhook in registered:
        del webhook["clientConfig"]["caBundle"]
    assert registered == described
    assert [w["rules"][0]["resources"] for w in registered] == [
        ["shadowpods"], ["persistentvolumeclaims"], ["services"]]
    assert only(manifests, "Secret")  # the certificate, when cert-manager does not issue it


def test_the_enforcer_binds_the_consumer_cluster_role_and_holds_none_of_its_rules() -> None:
    manifests = render(CHART, MINIMAL)
    consumer = only(manifests, "ClusterRole", CONSUMER_CLUSTER_ROLE)
    assert normalized_rules(consumer["rules"]) == normalized_rules(TWIN_NAMESPACE_RULES)
    [container] = only(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert parse(container["args"]).consumer_cluster_role == CONSUMER_CLUSTER_ROLE
    enforcer = only(manifests, "ClusterRole", "annex-remote-enforcer")
    assert [rule for rule in enforcer["rules"] if "bind" in rule["verbs"]] == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
         "verbs": ["bind"], "resourceNames": [CONSUMER_CLUSTER_ROLE]}]
    held = {resource for rule in enforcer["rules"] for resource in rule["resources"]}
    assert not held & {"secrets", "configmaps", "services", "endpointslices", "ingresses",
                       "pods/exec", "pods/attach", "pods/portforward", "pods/log"}


def test_with_cert_manager_the_certificate_is_issued_and_injected() -> None:
    manifests = render(CHART, {**MINIMAL, "certManager": {"enabled": True}})
    assert of_kind(manifests, "Secret") == []
    certificate = only(manifests, "Certificate")
    configuration = only(manifests, "ValidatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/{certificate['metadata']['name']}")
    assert certificate["spec"]["secretName"] == only(manifests, "Deployment")["spec"][
        "template"]["spec"]["volumes"][0]["secret"]["secretName"]


# objectCounts unwritten: the Quota's defaults
# The chart's values hold the Quota model's closed defaults, whole.
DEFAULT_POLICIES = {name: getattr(QuotaSpec(consumer_cluster_id="x"), field).to_wire()
                    for name, field in (("podPolicy", "pod_policy"),
                                        ("servicePolicy", "service_policy"),
                                        ("namespacePolicy", "namespace_policy"))}


def test_each_consumer_gets_a_tenant_namespace_a_confined_identity_and_a_quota() -> None:
    manifests = render(CHART, FULL)
    namespaces = {n["metadata"]["name"]: n for n in of_kind(manifests, "Namespace")}
    assert set(namespaces) == {"annex-tenant-home-1", "tenant-two"}
    two = namespaces["tenant-two"]["metadata"]
    assert two["labels"][TENANT_NAMESPACE_LABEL] == "true"
    assert two["labels"][REMOTE_CLUSTER_ID_LABEL] == "home-2"
    assert two["annotations"][CONSUMER_IDENTITY_ANNOTATION] == (
        f"serviceaccount:{CONSUMER_SERVICE_ACCOUNT}")

    accounts = {(a["metadata"]["namespace"], a["metadata"]["name"])
                for a in of_kind(manifests, "ServiceAccount")}
    assert ("tenant-two", CONSUMER_SERVICE_ACCOUNT) in accounts
    roles = [r for r in of_kind(manifests, "Role") if r["metadata"]["namespace"] == "tenant-two"]
    [role] = roles
    assert {g for rule in role["rules"] for g in rule["apiGroups"]} <= {
        "virtualkubelet.liqo.io", "sharing.liqo.io", ""}
    assert all("*" not in rule["verbs"] for rule in role["rules"])

    quotas = {q["spec"]["consumerClusterId"]: q["spec"] for q in of_kind(manifests, "Quota")}
    assert quotas["home-1"] == {"consumerClusterId": "home-1", "limitsEnforcement": "Soft",
                                "cordoned": False, "resources": {"cpu": "2", "memory": "4Gi"},
                                **DEFAULT_POLICIES}
    assert quotas["home-2"] == {"consumerClusterId": "home-2", "limitsEnforcement": "Hard",
                                "cordoned": True, "resources": {"cpu": "4", "memory": "4Gi"},
                                **DEFAULT_POLICIES, "podPolicy": {
                                    **DEFAULT_POLICIES["podPolicy"],
                                    "podSecurity": "restricted"}}


def test_replicas_elect_a_leader_all_serve_the_webhooks_and_a_budget_keeps_one() -> None:
    manifests = render(CHART, {**FULL, "replicas": 3, "leaderElection": {
        "leaseDurationSeconds": 20, "renewDeadlineSeconds": 12, "retryPeriodSeconds": 3}})
    deployment = only(manifests, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    assert "strategy" not in spec  # rolling: a new replica is warm before an old one goes
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    settings = parse(container["args"])
    election = settings.leader_election
    assert election is not None
    assert (election.namespace, election.name) == (NAMESPACE, "annex-remote-enforcer")
    timings = election.timings
    assert (timings.lease_duration, timings.renew_deadline, timings.retry_period) == (20, 12, 3)
    # Where the others reach its webhook: its pod's address, which the kubelet puts in.
    assert settings.webhook_advertise_address == "$(POD_IP)"
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in (
        container["env"])
    selector = spec["selector"]["matchLabels"]
    service = only(manifests, "Service", "annex-remote-enforcer-webhook")
    assert service["spec"]["selector"] == selector  # every replica serves the webhooks
    assert only(manifests, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 1, "selector": {"matchLabels": selector}}
    [term] = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {"topologyKey": "kubernetes.io/hostname",
                                       "labelSelector": {"matchLabels": selector}}
    assert only(render(CHART, MINIMAL), "Deployment")["spec"]["replicas"] == 2  # the default


def test_a_single_replica_elects_itself_and_gets_no_budget_that_would_block_every_drain() -> None:
    manifests = render(CHART, {**MINIMAL, "replicas": 1})
    assert of_kind(manifests, "PodDisruptionBudget") == []
    [container] = only(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    # scaled up later, it has a Lease already
    assert parse(container["args"]).leader_election is not None


def test_on_the_host_network_the_replicas_must_be_on_different_nodes() -> None:
    """announce.mdns runs the pods on the host network: two of a node would want its ports."""
    manifests = render(CHART, {**MINIMAL, "announce": {
        "mdns": True, "apiServer": "https://192.168.1.20:6443"}})
    pod = only(manifests, "Deployment")["spec"]["template"]["spec"]
    [term] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    given = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    pod = only(render(CHART, {**MINIMAL, "affinity": given}), "Deployment")["spec"]["template"][
        "spec"]
    assert pod["affinity"] == given  # the values' own affinity replaces it


def test_the_replicas_may_hold_their_election_lease_only() -> None:
    manifests = render(CHART, MINIMAL)
    role = only(manifests, "Role", "annex-remote-enforcer-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    [container] = only(manifests, "Deployment")["spec"]["template"]["spec"]["containers"]
    election = parse(container["args"]).leader_election
    assert election is not None
    assert role["rules"] == leader_election_rules(election.name)
    binding = only(manifests, "RoleBinding", "annex-remote-enforcer-leader-election")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "annex-remote-enforcer",
                                    "namespace": NAMESPACE}]


def test_a_consumer_is_lent_the_pools_its_quota_names_and_only_declared_ones() -> None:
    lent = {**FULL, "consumers": [{"clusterId": "home-1", "quota": {"pools": ["zone-a"]}},
                                  {"clusterId": "home-2"}]}
    quotas = {q["spec"]["consumerClusterId"]: q["spec"]
              for q in of_kind(render(CHART, lent), "Quota")}
    assert quotas["home-1"]["pools"] == ["zone-a"]
    assert "pools" not in quotas["home-2"]  # every pool
    with pytest.raises(Exception, match=r"consumers\[home-1\]\.quota\.pools: tpu is not a pool "
                                        r"of offer\.pools \(gpu, zone-a\)"):
        render(CHART, {**FULL, "consumers": [{"clusterId": "home-1",
                                              "quota": {"pools": ["tpu"]}}]})
    with pytest.raises(Exception, match=r"gpu is not a pool of offer\.pools \(none\)"):
        render(CHART, {**MINIMAL, "defaultQuota": {"pools": ["gpu"]},
                       "consumers": [{"clusterId": "home-1"}]})
    assert "/consumers/0/quota/pools/0" in (schema_error(CHART, {
        **MINIMAL, "consumers": [{"clusterId": "a", "quota": {"pools": ["GPU"]}}]}) or "")
