"""charts/home-agent: renders valid manifests, lints clean, refuses bad values, ships the
repository's CRDs, grants the agent exactly the permissions its code uses, and runs one agent
and one VirtualNode per remote with flags the agent accepts."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography import x509

from home_agent.config import parse_config
from home_agent.offloading import OFFLOADED_NAMESPACE_LABEL
from home_agent.rbac import HOME_AGENT_RULES
from home_agent.webhook import MUTATE_POD_PATH
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

CHART = ROOT / "charts" / "home-agent"
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"
MINIMAL = {"clusterId": "home-1"}
FULL = {
    "clusterId": "home-1",
    "homeApiServer": {"host": "api.home.example", "port": 6443},
    "remotes": [
        {"clusterId": "provider-1", "kubeconfig": KUBECONFIG,
         "remotePodCidr": "10.0.0.0/16", "remappedPodCidr": "10.200.0.0/16",
         "labels": {"team": "blue"},
         "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
         "resources": {"cpu": "8", "memory": "16Gi"},
         "offloadingPatch": {"nodeSelector": {"pool": "offload"}}},
        {"clusterId": "provider-2", "kubeconfigSecret": "provider-2-kubeconfig",
         "tenantNamespace": "tenant-home-1", "nodeName": "big-provider"},
    ],
}


@pytest.mark.parametrize("values", [MINIMAL, FULL], ids=["minimal", "full"])
def test_every_rendered_manifest_is_valid(values: dict[str, Any]) -> None:
    manifests = render(CHART, values)
    assert manifests
    problems = {f"{m['kind']}/{m['metadata']['name']}": validation_errors(m) for m in manifests}
    assert {name: errors for name, errors in problems.items() if errors} == {}


@pytest.mark.parametrize("values", [MINIMAL, FULL], ids=["minimal", "full"])
def test_the_chart_lints_clean(values: dict[str, Any]) -> None:
    assert lint_problems(CHART, values) == []


@pytest.mark.parametrize(("values", "complaint"), [
    ({}, "/clusterId"),
    ({"clusterId": "Not_A_Label"}, "/clusterId"),
    ({**MINIMAL, "remotes": [{"kubeconfig": KUBECONFIG}]}, "/remotes/0"),
    ({**MINIMAL, "remotes": [{"clusterId": "p"}]}, "/remotes/0"),
    ({**MINIMAL, "remotes": [{"clusterId": "p", "kubeconfig": KUBECONFIG,
                              "kubeconfigSecret": "s"}]}, "/remotes/0"),
    ({**MINIMAL, "remotes": [{"clusterId": "p", "kubeconfig": KUBECONFIG,
                              "remotePodCidr": "10.0.0.0/16"}]}, "/remotes/0"),
    ({**MINIMAL, "remotes": [{"clusterId": "p", "kubeconfig": KUBECONFIG,
                              "taints": [{"key": "a", "effect": "Sometimes"}]}]},
     "/remotes/0/taints/0/effect"),
    ({**MINIMAL, "webhook": {"failurePolicy": "Maybe"}}, "/webhook/failurePolicy"),
    ({**MINIMAL, "healthCheck": {"failureThreshold": 0}}, "/healthCheck/failureThreshold"),
    ({**MINIMAL, "logFormat": "xml"}, "/logFormat"),
])
def test_the_schema_refuses_bad_values(values: dict[str, Any], complaint: str) -> None:
    error = schema_error(CHART, values)
    assert error is not None and complaint in error, error


def test_good_values_pass_the_schema() -> None:
    assert schema_error(CHART, MINIMAL) is None
    assert schema_error(CHART, FULL) is None


def test_the_chart_ships_exactly_the_repository_crds() -> None:
    # Refresh with: cp crds/*.yaml charts/home-agent/crds/
    assert chart_crds(CHART) == repository_crds()


def _normalized(rules: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(sorted(r.get("apiGroups", []))), tuple(sorted(r.get("resources", []))),
                   tuple(sorted(r.get("verbs", []))), tuple(sorted(r.get("resourceNames", []))))
                  for r in rules)


def test_the_cluster_role_holds_exactly_what_the_agent_uses() -> None:
    manifests = render(CHART, MINIMAL)
    role = only(manifests, "ClusterRole")
    assert _normalized(role["rules"]) == _normalized(HOME_AGENT_RULES)
    binding = only(manifests, "ClusterRoleBinding")
    account = only(manifests, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "namespace": NAMESPACE,
                                    "name": account["metadata"]["name"]}]


def test_one_locked_down_agent_per_remote_with_flags_the_agent_accepts() -> None:
    manifests = render(CHART, FULL)
    deployments = {d["metadata"]["labels"]["liqo.io/remote-cluster-id"]: d
                   for d in of_kind(manifests, "Deployment")}
    assert set(deployments) == {"provider-1", "provider-2"}
    pod = deployments["provider-1"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["resources"]["limits"]

    config = parse_config(container["args"])
    assert config.home_kubeconfig is None  # in-cluster
    assert (config.home_cluster_id, config.remote_cluster_id) == ("home-1", "provider-1")
    assert (config.remote_pod_cidr, config.remapped_pod_cidr) == ("10.0.0.0/16",
                                                                  "10.200.0.0/16")
    assert (config.home_apiserver_host, config.home_apiserver_port) == ("api.home.example", 6443)
    assert config.agent_ip == "$(POD_IP)"  # expanded by the kubelet from the env below
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in (
        container["env"])
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(config.remote_kubeconfig).rsplit("/", 1)[0] in mounts
    assert str(config.webhook_cert).rsplit("/", 1)[0] in mounts

    two = parse_config(deployments["provider-2"]["spec"]["template"]["spec"]["containers"][0][
        "args"])
    assert (two.tenant_namespace, two.node_name) == ("tenant-home-1", "big-provider")


def test_each_remote_gets_a_virtual_node_and_its_kubeconfig_secret() -> None:
    manifests = render(CHART, FULL)
    nodes = {v["spec"]["clusterId"]: v["spec"] for v in of_kind(manifests, "VirtualNode")}
    assert nodes["provider-1"]["labels"] == {"team": "blue"}
    assert nodes["provider-1"]["resources"] == {"cpu": "8", "memory": "16Gi"}
    assert nodes["provider-1"]["offloadingPatch"] == {"nodeSelector": {"pool": "offload"}}
    assert nodes["provider-2"]["nodeName"] == "big-provider"
    secrets = {s["metadata"]["name"]: s for s in of_kind(manifests, "Secret")
               if s["type"] == "Opaque"}
    inline = secrets[nodes["provider-1"]["kubeconfigSecretRef"]["name"]]
    assert inline["stringData"]["kubeconfig"] == KUBECONFIG
    assert nodes["provider-2"]["kubeconfigSecretRef"]["name"] == "provider-2-kubeconfig"
    assert "provider-2-kubeconfig" not in secrets  # the user's own Secret


def test_the_pod_webhook_reaches_the_agents_with_a_certificate_they_serve() -> None:
    manifests = render(CHART, FULL)
    [webhook] = only(manifests, "MutatingWebhookConfiguration")["webhooks"]
    service = only(manifests, "Service")
    assert webhook["clientConfig"]["service"] == {
        "name": service["metadata"]["name"], "namespace": NAMESPACE, "path": MUTATE_POD_PATH,
        "port": 443}
    assert webhook["rules"][0]["resources"] == ["pods"]
    assert webhook["rules"][0]["operations"] == ["CREATE"]
    assert webhook["namespaceSelector"] == {"matchLabels": {OFFLOADED_NAMESPACE_LABEL: "true"}}

    secret = only(manifests, "Secret", f"{service['metadata']['name']}-tls")
    ca = x509.load_pem_x509_certificate(base64.b64decode(webhook["clientConfig"]["caBundle"]))
    served = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    served.verify_directly_issued_by(ca)
    names = served.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in names
    for deployment in of_kind(manifests, "Deployment"):
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        assert {"name": "webhook-tls", "secret": {"secretName": secret["metadata"]["name"]}} in (
            volumes)
