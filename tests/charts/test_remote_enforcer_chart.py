"""charts/remote-enforcer: renders valid manifests, lints clean, refuses bad values, ships the
repository's CRDs, and grants the enforcer exactly the permissions its code uses."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from remote_enforcer.admission import WEBHOOK_PATH
from remote_enforcer.rbac import ENFORCER_RULES
from remote_enforcer.settings import parse
from shared.wellknown import (
    CONSUMER_IDENTITY_ANNOTATION,
    CONSUMER_SERVICE_ACCOUNT,
    REMOTE_CLUSTER_ID_LABEL,
    TENANT_NAMESPACE_LABEL,
)
from tests.charts.helm import (
    NAMESPACE,
    ROOT,
    chart_crds,
    lint_problems,
    of_kind,
    only,
    render,
    repository_crds,
    schema_error,
    validation_errors,
)

CHART = ROOT / "charts" / "remote-enforcer"
CERT_MANAGER_KINDS = [("cert-manager.io/v1", "Issuer"), ("cert-manager.io/v1", "Certificate")]
MINIMAL = {"clusterId": "provider-1"}
FULL = {
    "clusterId": "provider-1",
    "region": "eu-west", "provider": "acme", "storageClasses": ["fast", "slow"],
    "offer": {"mode": "fixed", "resources": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    "defaultQuota": {"limitsEnforcement": "Soft", "resources": {"cpu": "2", "memory": "4Gi"}},
    "consumers": [
        {"clusterId": "home-1"},
        {"clusterId": "home-2", "namespace": "tenant-two",
         "quota": {"limitsEnforcement": "Hard", "resources": {"cpu": "4"}, "cordoned": True}},
    ],
}


@pytest.mark.parametrize("values", [MINIMAL, FULL, {**FULL, "certManager": {"enabled": True}},
                                    {**FULL, "certManager": {"enabled": True, "issuerRef": {
                                        "name": "corp-ca", "kind": "ClusterIssuer"}}}],
                         ids=["minimal", "full", "cert-manager", "cert-manager-issuer"])
def test_every_rendered_manifest_is_valid(values: dict[str, Any]) -> None:
    manifests = render(CHART, values)
    assert manifests
    problems = {f"{m['kind']}/{m['metadata']['name']}": validation_errors(m, CERT_MANAGER_KINDS)
                for m in manifests}
    assert {name: errors for name, errors in problems.items() if errors} == {}


@pytest.mark.parametrize("values", [MINIMAL, FULL], ids=["minimal", "full"])
def test_the_chart_lints_clean(values: dict[str, Any]) -> None:
    assert lint_problems(CHART, values) == []


@pytest.mark.parametrize(("values", "complaint"), [
    ({}, "/clusterId"),
    ({"clusterId": "Not_A_Label"}, "/clusterId"),
    ({**MINIMAL, "offer": {"mode": "sometimes"}}, "/offer/mode"),
    ({**MINIMAL, "offer": {"mode": "fixed"}}, "/offer/resources"),
    ({**MINIMAL, "offer": {"mode": "share", "percent": 150}}, "/offer/percent"),
    ({**MINIMAL, "offer": {"mode": "fixed", "resources": {"cpu": "lots"}}}, "/offer/resources/cpu"),
    ({**MINIMAL, "consumers": [{"namespace": "x"}]}, "/consumers/0"),
    ({**MINIMAL, "consumers": [{"clusterId": "a", "quotas": {}}]}, "/consumers/0"),
    ({**MINIMAL, "defaultQuota": {"limitsEnforcement": "Strict"}},
     "/defaultQuota/limitsEnforcement"),
    ({**MINIMAL, "webhook": {"port": 70000}}, "/webhook/port"),
    ({**MINIMAL, "logFormat": "xml"}, "/logFormat"),
])
def test_the_schema_refuses_bad_values(values: dict[str, Any], complaint: str) -> None:
    error = schema_error(CHART, values)
    assert error is not None and complaint in error, error


def test_good_values_pass_the_schema() -> None:
    assert schema_error(CHART, MINIMAL) is None
    assert schema_error(CHART, FULL) is None


def test_the_chart_ships_exactly_the_repository_crds() -> None:
    # Refresh with: cp crds/*.yaml charts/remote-enforcer/crds/
    assert chart_crds(CHART) == repository_crds()


def _normalized(rules: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(sorted(r.get("apiGroups", []))), tuple(sorted(r.get("resources", []))),
                   tuple(sorted(r.get("verbs", []))), tuple(sorted(r.get("resourceNames", []))))
                  for r in rules)


def test_the_cluster_role_holds_exactly_what_the_enforcer_uses() -> None:
    manifests = render(CHART, MINIMAL)
    role = only(manifests, "ClusterRole")
    assert _normalized(role["rules"]) == _normalized(ENFORCER_RULES)
    binding = only(manifests, "ClusterRoleBinding")
    account = only(manifests, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "namespace": NAMESPACE,
                                    "name": account["metadata"]["name"]}]


def test_the_deployment_runs_locked_down_with_probes_and_flags_the_enforcer_accepts() -> None:
    manifests = render(CHART, FULL)
    deployment = only(manifests, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"]["limits"]

    settings = parse(container["args"])
    assert settings.cluster_id == "provider-1"
    assert settings.kubeconfig is None  # in-cluster
    assert settings.offer_mode == "fixed"
    assert dict(settings.offer_resources) == {"cpu": "8", "memory": "16Gi", "pods": "110"}
    assert (settings.region, settings.provider) == ("eu-west", "acme")
    assert settings.storage_classes == ("fast", "slow")
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(settings.webhook_cert or "").parent) in mounts


def test_the_webhook_reaches_the_enforcer_with_a_certificate_it_trusts() -> None:
    manifests = render(CHART, MINIMAL)
    [webhook] = only(manifests, "ValidatingWebhookConfiguration")["webhooks"]
    service = only(manifests, "Service")
    assert webhook["clientConfig"]["service"] == {
        "name": service["metadata"]["name"], "namespace": NAMESPACE, "path": WEBHOOK_PATH,
        "port": 443}
    assert webhook["rules"][0]["resources"] == ["shadowpods"]
    assert sorted(webhook["rules"][0]["operations"]) == ["CREATE", "UPDATE"]

    secret = only(manifests, "Secret")
    ca = x509.load_pem_x509_certificate(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    served = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    served.verify_directly_issued_by(ca)
    names = served.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in names


def test_with_cert_manager_the_certificate_is_issued_and_injected() -> None:
    manifests = render(CHART, {**MINIMAL, "certManager": {"enabled": True}})
    assert of_kind(manifests, "Secret") == []
    certificate = only(manifests, "Certificate")
    configuration = only(manifests, "ValidatingWebhookConfiguration")
    assert configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/{certificate['metadata']['name']}")
    assert certificate["spec"]["secretName"] == only(manifests, "Deployment")["spec"][
        "template"]["spec"]["volumes"][0]["secret"]["secretName"]


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
                                "cordoned": False, "resources": {"cpu": "2", "memory": "4Gi"}}
    assert quotas["home-2"] == {"consumerClusterId": "home-2", "limitsEnforcement": "Hard",
                                "cordoned": True, "resources": {"cpu": "4", "memory": "4Gi"}}
