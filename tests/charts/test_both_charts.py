"""What both charts promise: they render valid manifests, lint clean, accept good values, ship
the repository's CRDs, grant exactly the permissions the component's code uses, run it locked
down with its probes, and reach its webhook with a certificate it serves. What is particular to
one chart stays in that chart's test file, next to its ChartCase."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from cryptography import x509

from annex_demo.charts import of_kind
from tests.charts import test_home_agent_chart, test_remote_enforcer_chart
from tests.charts.helm import (
    NAMESPACE,
    ChartCase,
    chart_crds,
    lint_problems,
    normalized_rules,
    only,
    render,
    repository_crds,
    schema_error,
    validation_errors,
)

CASES = [test_home_agent_chart.CASE, test_remote_enforcer_chart.CASE]
each_chart = pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])


def _minimal_and_full(extra: bool) -> list[Any]:
    return [pytest.param(case, values, id=f"{case.name}-{label}") for case in CASES
            for label, values in {"minimal": case.minimal, "full": case.full,
                                  **(case.renderings if extra else {})}.items()]


@pytest.mark.parametrize(("case", "values"), _minimal_and_full(extra=True))
def test_every_rendered_manifest_is_valid(case: ChartCase, values: Mapping[str, Any]) -> None:
    manifests = render(case.chart, values)
    assert manifests
    problems = {f"{m['kind']}/{m['metadata']['name']}": validation_errors(m, case.external_kinds)
                for m in manifests}
    assert {name: errors for name, errors in problems.items() if errors} == {}


@pytest.mark.parametrize(("case", "values"), _minimal_and_full(extra=False))
def test_the_chart_lints_clean(case: ChartCase, values: Mapping[str, Any]) -> None:
    assert lint_problems(case.chart, values) == []


@each_chart
def test_good_values_pass_the_schema(case: ChartCase) -> None:
    assert schema_error(case.chart, case.minimal) is None
    assert schema_error(case.chart, case.full) is None


@each_chart
def test_the_chart_ships_its_kinds_repository_crds_as_templates_kept_on_uninstall(
        case: ChartCase) -> None:
    # Refresh with: python scripts/generate_crds.py
    shipped = chart_crds(case.chart)
    assert shipped and shipped.items() <= repository_crds().items()
    rendered = [m for m in render(case.chart, case.minimal)
                if m["kind"] == "CustomResourceDefinition"]
    assert sorted(m["metadata"]["name"] for m in rendered) == sorted(
        yaml.safe_load(text)["metadata"]["name"] for text in shipped.values())
    for crd in rendered:
        metadata = crd["metadata"]
        assert metadata["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert metadata["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        source = yaml.safe_load(shipped[f"{crd['spec']['group']}_"
                                        f"{crd['spec']['names']['plural']}.yaml"])
        assert {**crd, "metadata": {"name": metadata["name"]}} == source


def test_the_two_charts_install_every_crd_once() -> None:
    home, provider = (chart_crds(c.chart) for c in CASES)
    assert not home.keys() & provider.keys()
    assert {**home, **provider} == repository_crds()


@each_chart
def test_the_cluster_role_holds_exactly_what_the_component_uses(case: ChartCase) -> None:
    manifests = render(case.chart, case.minimal)
    binding = only(manifests, "ClusterRoleBinding", case.cluster_role_binding)
    role = only(manifests, "ClusterRole", binding["roleRef"]["name"])
    assert normalized_rules(role["rules"]) == normalized_rules(case.rules)
    subject = case.cluster_role_subject or {
        "kind": "ServiceAccount", "namespace": NAMESPACE,
        "name": only(manifests, "ServiceAccount")["metadata"]["name"]}
    assert binding["subjects"] == [subject]


@each_chart
def test_every_deployment_runs_locked_down_with_its_probes(case: ChartCase) -> None:
    deployments = of_kind(render(case.chart, case.full), "Deployment")
    assert deployments
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz",
                                                         "port": case.probe_port}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz",
                                                          "port": case.probe_port}
        assert container["resources"]["limits"]


@each_chart
def test_the_webhook_reaches_the_component_with_a_certificate_it_serves(case: ChartCase) -> None:
    manifests = render(case.chart, case.full)
    webhooks = only(manifests, case.webhook_kind)["webhooks"]
    service = only(manifests, "Service", webhooks[0]["clientConfig"]["service"]["name"])
    assert case.webhook_path in [w["clientConfig"]["service"]["path"] for w in webhooks]
    for webhook in webhooks:  # every webhook of the chart calls the component
        assert webhook["clientConfig"]["service"] == {
            "name": service["metadata"]["name"], "namespace": NAMESPACE,
            "path": webhook["clientConfig"]["service"]["path"], "port": 443}

    secret = only(manifests, "Secret", f"{service['metadata']['name']}-tls")
    ca = x509.load_pem_x509_certificate(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    served = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    served.verify_directly_issued_by(ca)
    names = served.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in names
