"""charts/home-agent's home controller: on by default, a Deployment whose flags the controller
accepts (the agents' template mounted), locked down with its probes, and roles holding exactly
home_controller/rbac.py's rules; discovery off unless asked, mDNS on the host network."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography import x509

from annex_demo.charts import hooks, of_kind
from home_controller.rbac import NAMESPACE_RULES, cluster_rules
from home_controller.settings import parse
from tests.charts.helm import (
    NAMESPACE,
    lint_problems,
    normalized_rules,
    only,
    render,
    schema_error,
    validation_errors,
)
from tests.charts.test_home_agent_chart import CHART, MINIMAL

ENABLED = {**MINIMAL, "controller": {"enabled": True}}
DISCOVERING = {**MINIMAL, "controller": {"enabled": True, "discovery": {
    "mdns": {"enabled": True, "interfaces": ["192.168.1.10"]},
    "dns": {"domains": ["providers.example.org", "example.net"], "servers": ["10.0.0.53:53"],
            "intervalSeconds": 30}}}}


def controller_objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in render(CHART, values) if m["metadata"]["name"].endswith("-controller")]


def deployment_args(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    pod = only(controller_objects(values), "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["python", "-m", "home_controller"]
    return pod, container["args"]


def test_the_controller_is_on_by_default_and_off_on_request() -> None:
    assert only(controller_objects(MINIMAL), "Deployment")
    assert controller_objects({**MINIMAL, "controller": {"enabled": False}}) == []


def test_it_makes_the_agents_from_the_template_the_chart_mounts() -> None:
    manifests = render(CHART, ENABLED)
    pod, args = deployment_args(ENABLED)
    settings = parse(args)
    assert settings.agent_template == "/etc/annex/agent/agent.json"
    assert settings.drain_timeout_seconds == 300
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "agent-template"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "agent-template"]
    template = only(manifests, "ConfigMap", volume["configMap"]["name"])
    assert f"{mount['mountPath']}/{next(iter(template['data']))}" == settings.agent_template
    # A changed template restarts the controller (it reads it at start).
    changed = {**ENABLED, "workers": 3}
    annotation = "checksum/agent-template"
    assert only(controller_objects(changed), "Deployment")["spec"]["template"]["metadata"][
        "annotations"][annotation] != only(controller_objects(ENABLED), "Deployment")["spec"][
        "template"]["metadata"]["annotations"][annotation]


@pytest.mark.parametrize("values", [ENABLED, DISCOVERING], ids=["enabled", "discovering"])
def test_its_manifests_are_valid_and_lint_clean(values: dict[str, Any]) -> None:
    problems = {f"{m['kind']}/{m['metadata']['name']}": validation_errors(m)
                for m in controller_objects(values)}
    assert {name: errors for name, errors in problems.items() if errors} == {}
    assert lint_problems(CHART, values) == []
    assert schema_error(CHART, values) is None


def test_discovery_is_off_unless_asked_and_the_flags_parse() -> None:
    pod, args = deployment_args(ENABLED)
    settings = parse(args)
    assert settings.namespace == NAMESPACE
    assert not settings.discover_mdns and settings.discover_dns_domains == ()
    assert "hostNetwork" not in pod


def test_the_discovery_values_reach_the_flags_and_mdns_uses_the_host_network() -> None:
    pod, args = deployment_args(DISCOVERING)
    settings = parse(args)
    assert settings.discover_mdns and settings.mdns_interfaces == ("192.168.1.10",)
    assert settings.discover_dns_domains == ("providers.example.org", "example.net")
    assert settings.dns_servers == ("10.0.0.53:53",) and settings.dns_interval_seconds == 30
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"


def test_the_agents_webhook_service_does_not_select_it() -> None:
    pod_labels = only(controller_objects(ENABLED), "Deployment")["spec"]["template"][
        "metadata"]["labels"]
    selector = only(render(CHART, ENABLED), "Service", "annex-home-agent-webhook")["spec"][
        "selector"]
    assert not selector.items() <= pod_labels.items()


def test_it_serves_the_agents_admission_webhook_the_chart_registers() -> None:
    """The agents' NodeRestriction: served by the controller (its Service selects the
    controller's pod, with the certificate the configuration trusts), sent only the release
    namespace's accounts but the controller's, refusing what it cannot check."""
    manifests = render(CHART, ENABLED)
    pod, args = deployment_args(ENABLED)
    settings = parse(args)
    [configuration] = of_kind(manifests, "ValidatingWebhookConfiguration")
    [webhook] = configuration["webhooks"]
    service = webhook["clientConfig"]["service"]
    assert service["path"] == "/validate-agents" and webhook["failurePolicy"] == "Fail"
    selector = only(manifests, "Service", service["name"])["spec"]["selector"]
    template_labels = only(controller_objects(ENABLED), "Deployment")["spec"]["template"][
        "metadata"]["labels"]
    assert selector.items() <= template_labels.items()
    [port] = [p for p in pod["containers"][0]["ports"] if p["name"] == "webhook"]
    assert settings.webhook_address == f"0.0.0.0:{port['containerPort']}"
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "webhook-tls"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "webhook-tls"]
    secret = only(manifests, "Secret", volume["secret"]["secretName"])
    assert settings.webhook_cert == f"{mount['mountPath']}/tls.crt"
    assert secret["data"]["ca.crt"] == webhook["clientConfig"]["caBundle"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    served = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    served.verify_directly_issued_by(ca)
    assert f"{service['name']}.{NAMESPACE}.svc" in served.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    [condition] = webhook["matchConditions"]
    controller = only(controller_objects(ENABLED), "ServiceAccount")["metadata"]["name"]
    uninstall = only(hooks(CHART, "pre-delete", ENABLED), "ServiceAccount")["metadata"]["name"]
    assert f"'system:serviceaccount:{NAMESPACE}:'" in condition["expression"]
    assert (f"!(request.userInfo.username in ['system:serviceaccount:{NAMESPACE}:{controller}', "
            f"'system:serviceaccount:{NAMESPACE}:{uninstall}'])") in condition["expression"]
    off = {**MINIMAL, "controller": {"enabled": True, "agentAdmission": {"enabled": False}}}
    assert of_kind(render(CHART, off), "ValidatingWebhookConfiguration") == []
    assert parse(deployment_args(off)[1]).webhook_address == ""


def test_it_runs_locked_down_with_its_probes() -> None:
    pod, _ = deployment_args(ENABLED)
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"]["limits"]


def test_its_roles_hold_exactly_what_the_controller_uses() -> None:
    objects = controller_objects(ENABLED)
    account = only(objects, "ServiceAccount")["metadata"]["name"]
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    for role_kind, binding_kind, rules in (
            ("ClusterRole", "ClusterRoleBinding",
             cluster_rules("annex-home-agent-offloaded-namespaces")),
            ("Role", "RoleBinding", NAMESPACE_RULES)):
        role, binding = only(objects, role_kind), only(objects, binding_kind)
        assert normalized_rules(role["rules"]) == normalized_rules(rules)
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == subject
    assert of_kind(objects, "Role")[0]["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize(("controller", "complaint"), [
    ({"enabled": "yes"}, "/controller/enabled"),
    ({"discovery": {"dns": {"domains": ["not a domain"]}}}, "/controller/discovery/dns"),
    ({"discovery": {"dns": {"intervalSeconds": 0}}}, "/controller/discovery/dns"),
    ({"discovery": {"bonjour": {}}}, "/controller/discovery"),
])
def test_the_schema_refuses_bad_controller_values(controller: dict[str, Any],
                                                  complaint: str) -> None:
    error = schema_error(CHART, {**MINIMAL, "controller": controller})
    assert error is not None and complaint in error


def test_two_replicas_elect_a_leader_kept_apart_and_a_drain_keeps_one() -> None:
    objects = controller_objects(ENABLED)
    deployment = only(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert "strategy" not in deployment["spec"]  # rolling: a new replica is warm first
    pod, args = deployment_args(ENABLED)
    election = parse(args).leader_election
    assert election is not None
    assert (election.namespace, election.name) == (NAMESPACE, "annex-home-controller")
    assert (election.timings.lease_duration, election.timings.renew_deadline,
            election.timings.retry_period) == (15, 10, 2)
    selector = deployment["spec"]["selector"]["matchLabels"]
    [term] = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {"topologyKey": "kubernetes.io/hostname",
                                       "labelSelector": {"matchLabels": selector}}
    assert only(objects, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 1, "selector": {"matchLabels": selector}}
    single = controller_objects({**ENABLED, "controller": {"enabled": True, "replicas": 1}})
    assert of_kind(single, "PodDisruptionBudget") == []  # it would block every drain
    mdns = {**ENABLED, "controller": {"enabled": True,
                                      "discovery": {"mdns": {"enabled": True}}}}
    pod, _ = deployment_args(mdns)  # on the host network: never two on a node
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
