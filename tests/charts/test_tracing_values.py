"""tracing.otlpEndpoint: every component of both charts (the agents the home controller makes
from its template included) traces to it; empty, none is given the flag."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from home_agent.config import parse_config
from remote_enforcer.settings import parse as parse_enforcer
from shared.forge.agent import AgentTemplate
from tests.charts import test_home_agent_chart, test_remote_enforcer_chart
from tests.charts.helm import only, render

ENDPOINT = "http://otel-collector.monitoring:4318"
COMPONENTS = ("home_agent", "home_controller", "remote_enforcer")
RENDERINGS = [
    pytest.param(test_home_agent_chart.CHART, {**test_home_agent_chart.FULL, "controller": {
        "enabled": True}}, id="home-agent-controller"),
    pytest.param(test_home_agent_chart.CHART, test_home_agent_chart.FULL, id="home-agent-remotes"),
    pytest.param(test_remote_enforcer_chart.CHART, test_remote_enforcer_chart.FULL,
                 id="remote-enforcer"),
]


def _component_args(manifests: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each component container's args, by Deployment and container."""
    found = {}
    for manifest in manifests:
        if manifest["kind"] != "Deployment":
            continue
        for container in manifest["spec"]["template"]["spec"]["containers"]:
            if container.get("command", [])[-1:] and container["command"][-1] in COMPONENTS:
                found[f"{manifest['metadata']['name']}/{container['name']}"] = container["args"]
    return found


def _templates_args(manifests: list[dict[str, Any]]) -> list[list[str]]:
    return [AgentTemplate.model_validate(json.loads(m["data"]["agent.json"])).args
            for m in manifests if m["kind"] == "ConfigMap"
            and m["metadata"]["name"].endswith("-agent-template")]


@pytest.mark.parametrize(("chart", "values"), RENDERINGS)
def test_every_component_traces_to_the_endpoint_and_none_without_one(
        chart: Any, values: Mapping[str, Any]) -> None:
    traced = render(chart, {**values, "tracing": {"otlpEndpoint": ENDPOINT}})
    components = _component_args(traced)
    assert components
    for args in [*components.values(), *_templates_args(traced)]:
        assert f"--otlp-endpoint={ENDPOINT}" in args
    untraced = render(chart, values)
    for args in [*_component_args(untraced).values(), *_templates_args(untraced)]:
        assert not [arg for arg in args if arg.startswith("--otlp-endpoint")]


def test_the_flag_the_charts_give_is_the_one_the_components_read() -> None:
    enforcer = only(render(test_remote_enforcer_chart.CHART, {
        **test_remote_enforcer_chart.FULL, "tracing": {"otlpEndpoint": ENDPOINT}}),
        "Deployment", "annex-remote-enforcer")
    assert parse_enforcer(enforcer["spec"]["template"]["spec"]["containers"][0][
        "args"]).otlp_endpoint == ENDPOINT
    agents = render(test_home_agent_chart.CHART, {**test_home_agent_chart.FULL,
                                                  "tracing": {"otlpEndpoint": ENDPOINT}})
    [agent] = [args for name, args in _component_args(agents).items() if "provider-1" in name]
    assert parse_config(agent).otlp_endpoint == ENDPOINT
