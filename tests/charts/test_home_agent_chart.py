"""charts/home-agent: refuses bad values, runs one agent and one VirtualNode per remote with flags
the agent accepts, and points the pod webhook at offloaded namespaces. The checks both charts
pass (test_both_charts.py) read this chart's CASE."""

from __future__ import annotations

import json
from typing import Any

import pytest

from annex_demo.charts import hooks, of_kind
from home_agent.config import TOKEN_REFLECTION, parse_config
from home_agent.rbac import (
    APISERVER_ADDRESS_RULES,
    HOME_AGENT_RULES,
    LEADER_ELECTION_RULES,
    NODE_LEASE_RULES,
    SECRET_READ_RULE,
    TOKEN_REQUEST_RULE,
    offloaded_namespace_rules,
    own_object_rules,
)
from home_agent.webhook import MUTATE_POD_PATH
from shared.forge.agent import RELEASE_NAME_SUFFIXES, AgentTemplate, agent_name_refusal
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL, SCHEDULING_ENABLED_LABEL
from tests.charts.helm import NAMESPACE, ROOT, ChartCase, only, render, schema_error

CHART = ROOT / "charts" / "home-agent"
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"
MINIMAL = {"clusterId": "home-1"}
CHART_AGENTS = {"controller": {"enabled": False}}
"""Without the home controller the chart renders each remote's agent itself: what most tests
here check (with it, the controller makes the same objects: tests/shared/forge/test_agent.py)."""
FULL = {
    "clusterId": "home-1",
    **CHART_AGENTS,
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
AGENTS = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
          "name": f"system:serviceaccounts:{NAMESPACE}"}
"""What every agent of the release shares is bound to the release namespace's accounts."""
CASE = ChartCase(name="home-agent", chart=CHART, minimal={**MINIMAL, **CHART_AGENTS}, full=FULL,
                 rules=HOME_AGENT_RULES, probe_port="metrics",
                 cluster_role_subject=AGENTS, cluster_role_binding="annex-home-agent",
                 webhook_kind="MutatingWebhookConfiguration", webhook_path=MUTATE_POD_PATH,
                 renderings={"remotes with the controller": {**FULL, "controller": {
                     "enabled": True}}})


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
    ({**MINIMAL, "reflection": {"secret": {"type": "Everything"}}}, "/reflection/secret/type"),
    ({**MINIMAL, "reflection": {"pod": {"workers": 1}}}, "/reflection"),
    ({**MINIMAL, "reflection": {"event": {"type": "AllowList"}}}, "/reflection/event"),
    ({**MINIMAL, "reflection": {"ingress": {"workers": -1}}}, "/reflection/ingress/workers"),
    ({**MINIMAL, "reflection": {"skip": {"labels": ["a,b"]}}}, "/reflection/skip/labels/0"),
    ({**MINIMAL, "homePodCidr": "everything"}, "/homePodCidr"),
    ({**MINIMAL, "replicas": 0}, "/replicas"),
    ({**MINIMAL, "leaderElection": {"leaseDurationSeconds": 0}},
     "/leaderElection/leaseDurationSeconds"),
    ({**MINIMAL, "redisUrl": "cache:6379"}, "/redisUrl"),
    ({**MINIMAL, "tokenRefreshFraction": 0}, "/tokenRefreshFraction"),
    ({**MINIMAL, "tokenRefreshFraction": 1.5}, "/tokenRefreshFraction"),
    ({**MINIMAL, "remotes": [{"clusterId": "p", "kubeconfig": KUBECONFIG,
                              "remappedHomePodCidr": "x"}]}, "/remotes/0"),
])
def test_the_schema_refuses_bad_values(values: dict[str, Any], complaint: str) -> None:
    error = schema_error(CHART, values)
    assert error is not None and complaint in error, error


def test_one_agent_per_remote_with_flags_the_agent_accepts() -> None:
    manifests = render(CHART, FULL)
    deployments = {d["metadata"]["labels"]["liqo.io/remote-cluster-id"]: d
                   for d in of_kind(manifests, "Deployment")}
    assert set(deployments) == {"provider-1", "provider-2"}
    [container] = deployments["provider-1"]["spec"]["template"]["spec"]["containers"]

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


def test_each_agent_runs_two_replicas_electing_a_leader_with_a_disruption_budget() -> None:
    manifests = render(CHART, {**FULL, "leaderElection": {
        "leaseDurationSeconds": 20, "renewDeadlineSeconds": 12, "retryPeriodSeconds": 3}})
    budgets = {b["metadata"]["labels"]["liqo.io/remote-cluster-id"]: b
               for b in of_kind(manifests, "PodDisruptionBudget")}
    for deployment in of_kind(manifests, "Deployment"):
        remote = deployment["metadata"]["labels"]["liqo.io/remote-cluster-id"]
        spec = deployment["spec"]
        assert spec["replicas"] == 2
        assert "strategy" not in spec  # rolling: a new replica is warm before an old one goes
        [container] = spec["template"]["spec"]["containers"]
        election = parse_config(container["args"]).leader_election
        assert election is not None
        assert (election.namespace, election.name) == (NAMESPACE, f"annex-home-agent-{remote}")
        timings = election.timings
        assert (timings.lease_duration, timings.renew_deadline, timings.retry_period) == (
            20, 12, 3)
        budget = budgets[remote]
        assert budget["spec"]["minAvailable"] == 1
        assert budget["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
        anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
        [term] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == (
            spec["selector"]["matchLabels"])
    assert set(budgets) == {"provider-1", "provider-2"}


def test_a_single_replica_gets_no_disruption_budget_that_would_block_every_drain() -> None:
    manifests = render(CHART, {**FULL, "replicas": 1})
    assert of_kind(manifests, "PodDisruptionBudget") == []
    assert {d["spec"]["replicas"] for d in of_kind(manifests, "Deployment")} == {1}


def test_the_agents_may_hold_their_election_leases_in_the_release_namespace() -> None:
    manifests = render(CHART, MINIMAL)
    role = only(manifests, "Role", "annex-home-agent-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == LEADER_ELECTION_RULES
    binding = only(manifests, "RoleBinding", "annex-home-agent-leader-election")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [AGENTS]


def test_the_agents_may_write_leases_in_kube_node_lease_only() -> None:
    """Their virtual nodes' heartbeats; no cluster-wide Lease rule (kube-system's leader
    Leases), only the election Lease's Role in the release namespace besides."""
    manifests = render(CHART, MINIMAL)
    role = only(manifests, "Role", "annex-home-agent-node-lease")
    assert role["metadata"]["namespace"] == "kube-node-lease"
    assert role["rules"] == NODE_LEASE_RULES
    binding = only(manifests, "RoleBinding", "annex-home-agent-node-lease")
    assert binding["metadata"]["namespace"] == "kube-node-lease"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [AGENTS]
    cluster_role = only(manifests, "ClusterRole", "annex-home-agent")
    assert not [rule for rule in cluster_role["rules"] if "leases" in rule["resources"]]


@pytest.mark.parametrize(("values", "secrets", "tokens"), [
    ({}, True, True),
    ({"enableApiserverSupport": False}, True, False),
    ({"reflection": {"serviceaccount": {"workers": 0}}}, True, False),
    ({"reflection": {"secret": {"workers": 0}}}, False, True),
])
def test_the_agents_read_secrets_and_request_tokens_only_when_they_reflect_them(
        values: dict[str, Any], secrets: bool, tokens: bool) -> None:
    role = only(render(CHART, {**MINIMAL, **values}), "ClusterRole",
                "annex-home-agent-offloaded-namespaces")
    assert (SECRET_READ_RULE in role["rules"]) is secrets
    assert (TOKEN_REQUEST_RULE in role["rules"]) is tokens
    assert role["rules"] == offloaded_namespace_rules(reflects_secrets=secrets,
                                                      reflects_tokens=tokens)


def test_the_agents_read_no_secret_configmap_or_claim_cluster_wide() -> None:
    """Their ClusterRole is a virtual kubelet's; what they reflect they read in the offloaded
    namespaces only, where the controller binds the offloaded-namespace role for the agents a
    NamespaceOffloading selects (home_controller/namespace_grants.py)."""
    manifests = render(CHART, MINIMAL)
    agents = only(manifests, "ClusterRole", "annex-home-agent")
    assert agents["rules"] == HOME_AGENT_RULES
    read = {resource for rule in agents["rules"] if "list" in rule["verbs"]
            for resource in rule["resources"]}
    assert not read & {"secrets", "configmaps", "services", "endpointslices", "ingresses",
                       "persistentvolumeclaims", "events"}
    assert TOKEN_REQUEST_RULE not in agents["rules"]
    role = only(manifests, "ClusterRole", "annex-home-agent-offloaded-namespaces")
    assert not [b for b in of_kind(manifests, "ClusterRoleBinding")
                if b["roleRef"]["name"] == role["metadata"]["name"]]
    template = only(manifests, "ConfigMap", "annex-home-agent-agent-template")
    assert json.loads(template["data"]["agent.json"])["namespaceRole"] == (
        role["metadata"]["name"])


def test_without_the_controller_the_agents_hold_the_offloaded_namespace_rights_everywhere(
        ) -> None:
    """Nobody grants them namespace by namespace then (docs/security.md says to run the
    controller)."""
    manifests = render(CHART, {**MINIMAL, **CHART_AGENTS})
    role = only(manifests, "ClusterRole", "annex-home-agent-offloaded-namespaces")
    binding = only(manifests, "ClusterRoleBinding", "annex-home-agent-offloaded-namespaces")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [AGENTS]


def test_the_agents_read_the_home_api_server_address_in_default_only() -> None:
    manifests = render(CHART, MINIMAL)
    role = only(manifests, "Role", "annex-home-agent-apiserver-address")
    assert role["metadata"]["namespace"] == "default"
    assert role["rules"] == APISERVER_ADDRESS_RULES
    binding = only(manifests, "RoleBinding", "annex-home-agent-apiserver-address")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [AGENTS]
    off = render(CHART, {**MINIMAL, "enableApiserverSupport": False})
    assert not [r for r in of_kind(off, "Role")
                if r["metadata"]["name"] == "annex-home-agent-apiserver-address"]


def test_each_agent_runs_as_its_own_service_account() -> None:
    manifests = render(CHART, FULL)
    accounts = {a["metadata"]["name"] for a in of_kind(manifests, "ServiceAccount")}
    used = [d["spec"]["template"]["spec"]["serviceAccountName"]
            for d in of_kind(manifests, "Deployment")]
    assert sorted(used) == sorted(accounts) and len(set(used)) == len(FULL["remotes"])


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


def test_each_agent_may_write_its_own_kubeconfig_secret_and_no_other() -> None:
    manifests = render(CHART, FULL)
    roles = {r["metadata"]["name"]: r for r in of_kind(manifests, "Role")}
    bindings = of_kind(manifests, "RoleBinding")
    for node in of_kind(manifests, "VirtualNode"):
        secret = node["spec"]["kubeconfigSecretRef"]["name"]
        [deployment] = [d for d in of_kind(manifests, "Deployment") if d["metadata"]["labels"][
            "liqo.io/remote-cluster-id"] == node["spec"]["clusterId"]]
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        [binding] = [b for b in bindings if {"kind": "ServiceAccount", "name": account,
                                             "namespace": node["metadata"]["namespace"]}
                     in b["subjects"] and roles[b["roleRef"]["name"]]["rules"][0].get(
                         "resourceNames") == [secret]]
        role = roles[binding["roleRef"]["name"]]
        assert role["metadata"]["namespace"] == node["metadata"]["namespace"]
        assert role["rules"] == own_object_rules(secret, account)


def test_the_pod_webhook_sees_offloaded_pod_creations_with_tls_every_agent_mounts() -> None:
    manifests = render(CHART, FULL)
    [webhook] = only(manifests, "MutatingWebhookConfiguration")["webhooks"]
    assert webhook["rules"][0]["resources"] == ["pods"]
    assert webhook["rules"][0]["operations"] == ["CREATE"]
    assert webhook["namespaceSelector"] == {"matchLabels": {SCHEDULING_ENABLED_LABEL: "true"}}

    secret = only(manifests, "Secret", f"{webhook['clientConfig']['service']['name']}-tls")
    for deployment in of_kind(manifests, "Deployment"):
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        assert {"name": "webhook-tls", "secret": {"secretName": secret["metadata"]["name"]}} in (
            volumes)


def _agent_config(values: dict[str, Any], remote: int = 0) -> Any:
    deployments = of_kind(render(CHART, values), "Deployment")
    return parse_config(deployments[remote]["spec"]["template"]["spec"]["containers"][0]["args"])


REMOTE = {"clusterId": "provider-1", "kubeconfigSecret": "provider-1-kubeconfig"}


def test_the_reflection_values_reach_the_agent_flags() -> None:
    """Liqo's Helm values: reflection.<kind>.type / .workers and reflection.skip.*."""
    defaults = _agent_config({**MINIMAL, **CHART_AGENTS, "remotes": [REMOTE]})
    # The token reflection as fast as the pods' workers: every such pod waits for its token.
    assert {kind: workers for kind, workers in defaults.reflection_workers.items()
            if workers != 3} == {TOKEN_REFLECTION: 10}
    assert set(defaults.reflection_types.values()) == {"DenyList"}
    assert (defaults.labels_not_reflected, defaults.annotations_not_reflected) == ((), ())

    config = _agent_config({**MINIMAL, **CHART_AGENTS, "remotes": [REMOTE], "reflection": {
        "secret": {"type": "AllowList", "workers": 0}, "ingress": {"workers": 7},
        "event": {"workers": 0}, "serviceaccount": {"workers": 5},
        "skip": {"labels": ["cloud.example/zone", "team"],
                 "annotations": ["cloud.example/lb"]}}})
    assert config.reflection_types["secret"] == "AllowList"
    assert config.reflection_types["configmap"] == "DenyList"
    assert {kind: config.reflection_workers[kind]
            for kind in ("secret", "ingress", "event", "serviceaccount", "configmap")} == {
        "secret": 0, "ingress": 7, "event": 0, "serviceaccount": 5, "configmap": 3}
    assert config.labels_not_reflected == ("cloud.example/zone", "team")
    assert config.annotations_not_reflected == ("cloud.example/lb",)


def test_the_home_pod_cidr_remap_redis_and_token_refresh_reach_the_agent_flags() -> None:
    defaults = _agent_config({**MINIMAL, **CHART_AGENTS, "remotes": [REMOTE]})
    assert (defaults.home_pod_cidr, defaults.remapped_home_pod_cidr) == (None, None)
    assert defaults.redis_url is None and defaults.token_refresh_fraction == 0.8

    config = _agent_config({**MINIMAL, **CHART_AGENTS, "homePodCidr": "10.244.0.0/16",
                            "redisUrl": "redis://cache.annex-system:6379/0",
                            "tokenRefreshFraction": 0.5,
                            "remotes": [{**REMOTE, "remappedHomePodCidr": "10.80.0.0/16"}]})
    assert (config.home_pod_cidr, config.remapped_home_pod_cidr) == ("10.244.0.0/16",
                                                                     "10.80.0.0/16")
    assert config.redis_url == "redis://cache.annex-system:6379/0"
    assert config.token_refresh_fraction == 0.5


def test_a_remapped_home_pod_cidr_without_the_home_pod_cidr_is_refused() -> None:
    with pytest.raises(Exception, match="remappedHomePodCidr needs homePodCidr"):
        render(CHART, {**MINIMAL, "remotes": [{**REMOTE, "remappedHomePodCidr": "10.80.0.0/16"}]})


def test_each_remote_may_set_how_long_pods_tolerate_its_virtual_node_being_down() -> None:
    remotes = [{"clusterId": "forever", "kubeconfigSecret": "s1"},
               {"clusterId": "at-once", "kubeconfigSecret": "s2", "notReadyTolerationSeconds": 0},
               {"clusterId": "long", "kubeconfigSecret": "s3",
                "notReadyTolerationSeconds": 2_000_000}]
    nodes = {v["spec"]["clusterId"]: v["spec"]
             for v in of_kind(render(CHART, {**MINIMAL, "remotes": remotes}), "VirtualNode")}
    assert "notReadyTolerationSeconds" not in nodes["forever"]  # unset: the whole cut
    assert nodes["at-once"]["notReadyTolerationSeconds"] == 0
    assert nodes["long"]["notReadyTolerationSeconds"] == 2_000_000  # an integer, not 2e+06
    for bad in (-1, "10m"):
        error = schema_error(CHART, {**MINIMAL, "remotes": [
            {"clusterId": "p", "kubeconfigSecret": "s", "notReadyTolerationSeconds": bad}]})
        assert error is not None and "/remotes/0" in error, error


def test_the_agent_may_not_read_crds() -> None:
    """It watches no CRDs (no operator framework): a permission it does not use is not granted.
    The e2e tests run the agent with exactly this ClusterRole."""
    role = only(render(CHART, MINIMAL), "ClusterRole", "annex-home-agent")
    assert not [rule for rule in role["rules"] if "apiextensions.k8s.io" in rule["apiGroups"]]


EVERY_OBJECT = {
    **MINIMAL, "enableApiserverSupport": True,
    "metrics": {"secure": True, "serviceMonitor": {"enabled": True},
                "podMonitor": {"enabled": True}, "dashboard": {"enabled": True}},
    "remotes": [REMOTE]}
"""Values that render every object of the release's own (with the controller, the default)."""


def test_every_name_of_the_release_own_objects_is_one_no_cluster_id_may_take() -> None:
    """An agent is `<full name>-<cluster id>`: the rule refuses each cluster id that would make
    it one of the release's own objects (the controller's account, the hook's, ...)."""
    fullname = "annex-home-agent"
    manifests = [*render(CHART, EVERY_OBJECT), *hooks(CHART, "pre-delete", EVERY_OBJECT,
                                                       namespace=NAMESPACE)]
    template = AgentTemplate.model_validate(json.loads(only(manifests, "ConfigMap", (
        f"{fullname}-agent-template"))["data"]["agent.json"]))
    assert template.name_prefix == fullname
    suffixes = {m["metadata"]["name"].removeprefix(f"{fullname}-") for m in manifests
                if m["metadata"]["name"].startswith(f"{fullname}-")
                and REMOTE_CLUSTER_ID_LABEL not in (m["metadata"].get("labels") or {})}
    assert suffixes == RELEASE_NAME_SUFFIXES
    assert all(agent_name_refusal(template, suffix) for suffix in suffixes)


def test_a_remote_whose_cluster_id_would_name_a_release_object_or_another_agent_is_refused(
        ) -> None:
    """Each refused at once, as the home controller refuses such a VirtualNode."""
    refused = [*sorted(RELEASE_NAME_SUFFIXES), "provider-1-kubeconfig", "p" * 46]
    with pytest.raises(Exception) as raised:
        render(CHART, {**MINIMAL, "remotes": [{**REMOTE, "clusterId": cluster_id}
                                              for cluster_id in [*refused, "provider-2"]]})
    message = str(raised.value)
    assert all(f"remotes[].clusterId {cluster_id} " in message for cluster_id in refused)
    assert "annex-home-agent-controller, a name of the release's own objects" in message
    assert "of the agent of cluster provider-1" in message and "at most 62" in message
    assert "provider-2" not in message
    assert of_kind(render(CHART, {**MINIMAL, "remotes": [{**REMOTE, "clusterId": "p" * 45}]}),
                   "VirtualNode")
