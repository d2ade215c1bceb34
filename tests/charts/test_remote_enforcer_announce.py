"""charts/remote-enforcer's mDNS announcement: off by default; on, flags the enforcer accepts,
the pod on the host network; the schema asks for the API server to announce."""

from __future__ import annotations

from typing import Any

import pytest

from remote_enforcer.settings import parse
from tests.charts.helm import lint_problems, only, render, schema_error, validation_errors
from tests.charts.test_remote_enforcer_chart import CHART, MINIMAL

ANNOUNCING = {**MINIMAL, "announce": {"mdns": True, "apiServer": "https://192.168.1.20:6443",
                                      "interfaces": ["192.168.1.20"]}}


def enforcer_pod(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    pod = only(render(CHART, values), "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    return pod, container["args"]


def test_announcing_is_off_by_default() -> None:
    pod, args = enforcer_pod(MINIMAL)
    assert not parse(args).announce_mdns and "hostNetwork" not in pod


def test_the_announcement_values_reach_the_flags_on_the_host_network() -> None:
    pod, args = enforcer_pod(ANNOUNCING)
    settings = parse(args)
    assert settings.announce_mdns
    assert settings.announce_api_server == "https://192.168.1.20:6443"
    assert settings.mdns_interfaces == ("192.168.1.20",)
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    deployment = only(render(CHART, ANNOUNCING), "Deployment")
    assert validation_errors(deployment) == []
    assert lint_problems(CHART, ANNOUNCING) == []


@pytest.mark.parametrize("announce", [{"mdns": True}, {"mdns": True, "apiServer": ""},
                                      {"apiServer": "ftp://x"}, {"txt": "x"}])
def test_the_schema_refuses_an_announcement_without_an_api_server(
        announce: dict[str, Any]) -> None:
    error = schema_error(CHART, {**MINIMAL, "announce": announce})
    assert error is not None and "/announce" in error
