"""Both charts' metrics pieces: the metrics Services, the optional ServiceMonitor and PodMonitor
(they pick what the chart runs, on ports it names), metrics.secure (the flag, the reader
ClusterRole, the review rights, the scraper's token), and the Grafana dashboards, whose every
PromQL query names only metrics the components export."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from annex.metrics import Family, ServedRequests, declared_families, registry
from home_agent.kubelet.server import KUBELET_REQUESTS, route_of
from home_agent.metrics import Metrics as AgentMetrics
from home_controller.metrics import collectors as controller_collectors
from remote_enforcer.metrics import Metrics as EnforcerMetrics
from tests.charts import test_home_agent_chart as home_chart
from tests.charts import test_remote_enforcer_chart as enforcer_chart
from tests.charts.helm import RELEASE, render, schema_error, validation_errors

MONITORING = (("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1",
                                                               "PodMonitor"))
CHARTS = {"home-agent": (home_chart.CHART, home_chart.FULL),
          "home-agent-with-controller": (home_chart.CHART,
                                         {**home_chart.FULL, "controller": {"enabled": True}}),
          "remote-enforcer": (enforcer_chart.CHART, enforcer_chart.MINIMAL)}
"""The home chart renders its remotes' agents, or its controller makes them (from its agent
template)."""
DASHBOARDS = {"home-agent": "home.json", "home-agent-with-controller": "home.json",
              "remote-enforcer": "enforcer.json"}
each_chart = pytest.mark.parametrize("chart", sorted(CHARTS))


def rendered(chart: str, metrics: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    path, values = CHARTS[chart]
    values = {**values, "metrics": {**values.get("metrics", {}), **(metrics or {})}}
    assert schema_error(path, values) is None
    manifests = render(path, values)
    problems = {f"{m['kind']}/{m['metadata']['name']}": validation_errors(m, MONITORING)
                for m in manifests}
    assert not {name: found for name, found in problems.items() if found}
    return manifests


def of_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def pod_templates(manifests: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The pods the chart runs, and those the home controller makes from its agent template."""
    for deployment in of_kind(manifests, "Deployment"):
        yield deployment["spec"]["template"]
    for config_map in of_kind(manifests, "ConfigMap"):
        if config_map["metadata"]["name"].endswith("-agent-template"):
            agent = json.loads(next(iter(config_map["data"].values())))
            yield {"metadata": {"labels": agent["selectorLabels"]},
                   "spec": {"containers": [{"args": agent["args"], "ports": [
                       {"name": "metrics"}, {"name": "webhook"}, {"name": "kubelet"}]}]}}


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    matched = all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())
    for expression in selector.get("matchExpressions") or ():
        assert expression["operator"] == "In"
        matched = matched and labels.get(expression["key"]) in expression["values"]
    return matched


def container_args(manifests: list[dict[str, Any]]) -> list[list[str]]:
    return [container.get("args") or [] for template in pod_templates(manifests)
            for container in template["spec"]["containers"]]


@each_chart
def test_a_metrics_service_fronts_every_component_and_no_monitor_by_default(chart: str) -> None:
    manifests = rendered(chart)
    services = [s for s in of_kind(manifests, "Service")
                if s["metadata"]["labels"].get("app.kubernetes.io/component") == "metrics"]
    templates = list(pod_templates(manifests))
    for template in templates:
        ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        fronting = [s for s in services if selects({"matchLabels": s["spec"]["selector"]},
                                                   template["metadata"]["labels"])]
        assert len(fronting) == 1, template["metadata"]["labels"]
        assert fronting[0]["spec"]["ports"][0]["targetPort"] in ports
    assert all(any(selects({"matchLabels": s["spec"]["selector"]}, t["metadata"]["labels"])
                   for t in templates) for s in services)
    assert not [m for m in manifests if m["kind"] in ("ServiceMonitor", "PodMonitor")]
    assert not [m for m in manifests if m["metadata"]["name"].endswith("-metrics-reader")]
    assert not [m for m in of_kind(manifests, "ConfigMap")
                if "grafana_dashboard" in m["metadata"].get("labels", {})]
    assert not [args for args in container_args(manifests) if "--metrics-secure" in args]


@each_chart
def test_the_monitors_pick_the_metrics_services_and_the_pods_on_named_ports(chart: str) -> None:
    manifests = rendered(chart, {
        "serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "kps"}},
        "podMonitor": {"enabled": True, "interval": "20s"}})
    monitor = of_kind(manifests, "ServiceMonitor")[0]
    assert monitor["metadata"]["labels"]["release"] == "kps"
    endpoint = monitor["spec"]["endpoints"][0]
    assert (endpoint["interval"], endpoint["path"], "bearerTokenFile" in endpoint) == (
        "15s", "/metrics", False)
    picked = [s for s in of_kind(manifests, "Service")
              if selects(monitor["spec"]["selector"], s["metadata"]["labels"])]
    assert picked and all(endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}
                          for s in picked)
    pods = of_kind(manifests, "PodMonitor")[0]
    ports = {e["port"] for e in pods["spec"]["podMetricsEndpoints"]}
    for template in pod_templates(manifests):
        assert selects(pods["spec"]["selector"], template["metadata"]["labels"])
        named = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert ports & named, template["metadata"]["labels"]
    assert {e["interval"] for e in pods["spec"]["podMetricsEndpoints"]} == {"20s"}


@each_chart
def test_secure_metrics_ask_for_a_token_with_the_reader_role(chart: str) -> None:
    reader = {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}
    manifests = rendered(chart, {
        "secure": True, "readers": [reader], "serviceMonitor": {"enabled": True},
        "podMonitor": {"enabled": True, "bearerTokenSecret": {"name": "scraper", "key": "t"}}})
    for args in container_args(manifests):
        assert "--metrics-secure" in args
    role = next(m for m in of_kind(manifests, "ClusterRole")
                if m["metadata"]["name"] == f"{RELEASE}-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = next(m for m in of_kind(manifests, "ClusterRoleBinding")
                   if m["metadata"]["name"] == f"{RELEASE}-metrics-reader")
    assert binding["subjects"] == [reader]
    # The component reviews the token and the right: it may create both reviews.
    accounts = {t["spec"].get("serviceAccountName") for t in pod_templates(manifests)}
    reviewers = set()
    roles = {m["metadata"]["name"]: m for m in of_kind(manifests, "ClusterRole")}
    for bound in of_kind(manifests, "ClusterRoleBinding"):
        resources = {r for rule in roles[bound["roleRef"]["name"]]["rules"]
                     for r in rule.get("resources", ())}
        if {"tokenreviews", "subjectaccessreviews"} <= resources:
            reviewers |= {s["name"] for s in bound["subjects"] if s["kind"] == "ServiceAccount"}
            reviewers |= {"agents" for s in bound["subjects"] if s["kind"] == "Group"}
    if chart.startswith("home-agent"):  # the agents' rights are their Group's
        accounts = {a for a in accounts if a and a.endswith("-controller")} | {"agents"}
    assert accounts <= reviewers
    endpoint = of_kind(manifests, "ServiceMonitor")[0]["spec"]["endpoints"][0]
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    for endpoint in of_kind(manifests, "PodMonitor")[0]["spec"]["podMetricsEndpoints"]:
        assert endpoint["bearerTokenSecret"] == {"name": "scraper", "key": "t"}


def exported_names() -> set[str]:
    """The series every component exports: its collectors' declared families, and the
    process' and Python's families from a real scrape."""
    agent = AgentMetrics()
    agent.elector = SimpleNamespace(name="agent", transitions=0)  # type: ignore[assignment]
    agent.served = [ServedRequests(), ServedRequests(KUBELET_REQUESTS, route_of)]
    enforcer = EnforcerMetrics()
    enforcer.gauges["shadowpods_counted"] = ("counted", lambda: 0.0)  # as the operator sets it
    fake_agent: Any = SimpleNamespace(remote_cluster_id="r")
    families: list[Family] = declared_families([
        *agent.collectors(fake_agent), *enforcer.collectors(), *controller_collectors([])])
    scraped = generate_latest(registry("test", [])).decode()
    return ({name for family in families for name in family.series_names()}
            | {sample.name for family in text_string_to_metric_families(scraped)
               for sample in family.samples})


PROMQL_WORDS = {"sum", "max", "min", "avg", "count", "rate", "irate", "increase", "changes",
                "delta", "histogram_quantile", "by", "without", "on", "ignoring", "and", "or",
                "unless", "offset", "bool", "le", "topk", "bottomk", "clamp_min", "abs"}


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression selects: its identifiers but functions, keywords,
    label matchers, grouping labels and durations."""
    stripped = re.sub(r'"[^"]*"', "", expression)
    stripped = re.sub(r"\{[^}]*\}", "", stripped)
    stripped = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", stripped)
    stripped = re.sub(r"\[[^\]]*\]", "", stripped)
    names = set(re.findall(r"(?<![\w:.])[A-Za-z_:][\w:]*(?![\w:])(?!\s*\()", stripped))
    return {name for name in names if name not in PROMQL_WORDS
            and not re.fullmatch(r"[0-9.]+|e[0-9]*", name)}


def test_metric_names_are_read_from_promql() -> None:
    assert metric_names('histogram_quantile(0.99, sum by (host, le) (rate('
                        'x_seconds_bucket{code!~"2.."}[5m]))) / y_total') == {
        "x_seconds_bucket", "y_total"}


@each_chart
def test_the_dashboard_ships_as_a_configmap_and_queries_only_exported_metrics(
        chart: str) -> None:
    manifests = rendered(chart, {"dashboard": {"enabled": True, "namespace": "grafana",
                                               "labels": {"grafana_dashboard": "1"}}})
    config_map = next(m for m in of_kind(manifests, "ConfigMap")
                      if m["metadata"]["labels"].get("grafana_dashboard") == "1")
    assert config_map["metadata"]["namespace"] == "grafana"
    dashboard = json.loads(config_map["data"][DASHBOARDS[chart]])
    expressions = [target["expr"] for panel in dashboard["panels"]
                   for target in panel.get("targets", ())]
    assert len(expressions) >= 10
    exported = exported_names()
    unknown = {name for expression in expressions for name in metric_names(expression)} - exported
    assert not unknown, f"the {chart} dashboard queries metrics nobody exports: {unknown}"
