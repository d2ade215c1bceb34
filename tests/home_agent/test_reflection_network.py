"""Service, EndpointSlice and Ingress reflection, one reconcile at a time, against the recording
fake of the remote API of the generic reflector's tests (watches played through the informers).
The end-to-end behaviour with real processes is in tests/e2e/test_reflection_network.py."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Hashable
from typing import Any

from home_agent.agent import HOME as HOME_SIDE
from home_agent.agent import REMOTE as REMOTE_SIDE
from home_agent.agent import Agent
from home_agent.assembly import agent_routes, reflection_for
from home_agent.config import parse_config
from home_agent.reflection.kinds import KINDS
from home_agent.reflection.manager import Reflection
from home_agent.reflection.reflector import Reflector
from home_agent.routes import declare_reflection
from shared.wellknown import ENDPOINTSLICE_MANAGED_BY_LABEL, SERVICE_NAME_LABEL
from tests.home_agent.test_reflection import (
    HOME,
    OURS,
    REMOTE,
    TWIN,
    FakeApi,
    FakeHome,
    agent_with,
)

VIRTUAL_NODE = f"liqo-{REMOTE}"
HOME_POD_CIDR, REMAPPED_HOME_POD_CIDR = "10.0.0.0/16", "100.65.0.0/16"
SKIP = {"liqo.io/skip-reflection": "true"}
ALLOW = {"liqo.io/allow-reflection": "true"}
SERVICE_PATH = f"/api/v1/namespaces/{TWIN}/services/web"
SLICE_PATH = f"/apis/discovery.k8s.io/v1/namespaces/{TWIN}/endpointslices/web-abc12"
INGRESS_PATH = f"/apis/networking.k8s.io/v1/namespaces/{TWIN}/ingresses/web"


def _reflection(**config: Any) -> tuple[Agent, Reflection, FakeApi]:
    remote = FakeApi()
    settings: dict[str, Any] = {
        "home_pod_cidr": HOME_POD_CIDR, "remapped_home_pod_cidr": REMAPPED_HOME_POD_CIDR,
        "reflection_workers": {"service": 1, "endpointslice": 1, "ingress": 1}, **config}
    agent = agent_with(remote, FakeHome(), **settings)
    reflection = reflection_for(agent, KINDS)
    declare_reflection(agent_routes(agent), reflection)
    return agent, reflection, remote


def _home(agent: Agent, plural: str, obj: dict[str, Any], event: str = "ADDED") -> None:
    agent.informers.dispatch(HOME_SIDE, plural, event, copy.deepcopy(obj))


def _remote(agent: Agent, plural: str, event: str, obj: dict[str, Any]) -> None:
    agent.informers.dispatch(REMOTE_SIDE, plural, event, obj)


def _reconcile(reflection: Reflection, plural: str, name: str = "web") -> None:
    asyncio.run(reflection.reflectors[plural].reconcile(("app", name)))


def _observe_remote(agent: Agent, remote: FakeApi, path: str,
                    **server_fills: Any) -> dict[str, Any]:
    """The remote API server's version of what we wrote (with what it fills in itself), as its
    watch shows it; returns it."""
    stored = remote.objects[path]
    stored["metadata"]["resourceVersion"] = "9"
    for field, value in server_fills.items():
        stored[field] = {**stored.get(field, {}), **value}
    plural = path.split("/")[-2]
    _remote(agent, plural, "ADDED", copy.deepcopy(stored))
    return stored


def _queued(reflector: Reflector) -> list[Hashable]:
    """The keys waiting in the reflector's queue (drained)."""
    end = ("", "end of queue")
    reflector.controller.queue.add(end)
    keys = []
    while (key := reflector.controller.queue.take()) != end:
        keys.append(key)
        reflector.controller.queue.done(key)
    reflector.controller.queue.done(end)
    return keys


def _service(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "app", "uid": "u1",
                         "annotations": annotations or {}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                     "selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080,
                                "protocol": "TCP"}], **spec}}


def _endpoint(pod: str, address: str, node: str) -> dict[str, Any]:
    return {"addresses": [address], "conditions": {"ready": True}, "nodeName": node,
            "targetRef": {"kind": "Pod", "namespace": "app", "name": pod}}


def _slice(annotations: dict[str, str] | None = None,
           labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-abc12", "namespace": "app", "annotations": annotations or {},
                         "labels": {SERVICE_NAME_LABEL: "web",
                                    ENDPOINTSLICE_MANAGED_BY_LABEL:
                                        "endpointslice-controller.k8s.io", **(labels or {})}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [_endpoint("home-pod", "10.0.1.5", "home-worker"),
                          _endpoint("offloaded-pod", "100.64.3.7", VIRTUAL_NODE)]}


# --- Services -------------------------------------------------------------------------------


def test_a_service_is_copied_without_its_allocations_and_what_the_remote_fills_is_no_drift(
        ) -> None:
    agent, reflection, remote = _reflection()
    _home(agent, "services", _service(type="NodePort", ports=[
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}]))
    _reconcile(reflection, "services")
    spec = remote.objects[SERVICE_PATH]["spec"]
    assert "clusterIP" not in spec and "clusterIPs" not in spec and "ipFamilies" not in spec
    assert "nodePort" not in spec["ports"][0]
    assert spec["selector"] == {"app": "web"} and spec["type"] == "NodePort"
    _observe_remote(agent, remote, SERVICE_PATH, spec={
        "clusterIP": "10.43.7.7", "clusterIPs": ["10.43.7.7"], "ipFamilies": ["IPv4"],
        "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
        "externalTrafficPolicy": "Cluster",
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP",
                   "nodePort": 31999}]})
    remote.calls.clear()
    _reconcile(reflection, "services")
    assert remote.writes() == []


def test_forced_node_ports_are_kept_and_the_headless_cluster_ip_too() -> None:
    agent, reflection, remote = _reflection()
    _home(agent, "services", _service(
        {"liqo.io/force-remote-node-port": "true"}, type="NodePort", ports=[
            {"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]))
    _reconcile(reflection, "services")
    assert remote.objects[SERVICE_PATH]["spec"]["ports"][0]["nodePort"] == 30080
    headless = _service(clusterIP="None", clusterIPs=["None"])
    headless["metadata"]["name"] = "db"
    _home(agent, "services", headless)
    _reconcile(reflection, "services", "db")
    assert remote.objects[SERVICE_PATH.replace("/web", "/db")]["spec"]["clusterIP"] == "None"


def test_the_home_api_servers_own_service_is_never_reflected() -> None:
    agent, reflection, remote = _reflection()
    kubernetes = _service()
    kubernetes["metadata"].update(name="kubernetes", namespace="default")
    agent.mirrors.namespace_maps.apply("MODIFIED", {
        "metadata": {"namespace": agent.tenant_namespace,
                     "name": agent.namespace_map_name},
        "spec": {"desiredMapping": {"default": TWIN}},
        "status": {"currentMapping": {"default": {"remoteNamespace": TWIN,
                                                  "phase": "Accepted"}}}})
    _home(agent, "services", kubernetes)
    asyncio.run(reflection.reflectors["services"].reconcile(("default", "kubernetes")))
    assert remote.calls == []


# --- EndpointSlices -------------------------------------------------------------------------


def test_a_slice_is_copied_with_only_the_endpoints_the_remote_cannot_see_remapped() -> None:
    agent, reflection, remote = _reflection()
    _home(agent, "services", _service())
    _home(agent, "endpointslices", _slice())
    _reconcile(reflection, "endpointslices", "web-abc12")
    copied = remote.objects[SLICE_PATH]
    assert [e["addresses"] for e in copied["endpoints"]] == [["100.65.1.5"]]
    assert copied["endpoints"][0]["targetRef"]["name"] == "home-pod"
    labels = copied["metadata"]["labels"]
    assert labels[ENDPOINTSLICE_MANAGED_BY_LABEL] == "endpointslice.reflection.liqo.io"
    assert labels[SERVICE_NAME_LABEL] == "web"
    assert OURS.items() <= labels.items()
    _observe_remote(agent, remote, SLICE_PATH)
    remote.calls.clear()
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert remote.writes() == []


def test_without_a_home_cidr_remapping_addresses_are_copied_as_they_are() -> None:
    agent, reflection, remote = _reflection(home_pod_cidr=None, remapped_home_pod_cidr=None)
    _home(agent, "endpointslices", _slice())
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert [e["addresses"] for e in remote.objects[SLICE_PATH]["endpoints"]] == [["10.0.1.5"]]


def test_slices_follow_their_service_and_are_requeued_when_its_decision_changes() -> None:
    agent, reflection, remote = _reflection()
    slices = reflection.reflectors["endpointslices"]
    _home(agent, "services", _service())
    _home(agent, "endpointslices", _slice())
    _reconcile(reflection, "endpointslices", "web-abc12")
    _observe_remote(agent, remote, SLICE_PATH)
    _queued(slices)

    _home(agent, "services", _service(SKIP), "MODIFIED")
    assert _queued(slices) == [("app", "web-abc12")]
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert SLICE_PATH not in remote.objects

    # A Service change that does not change the decision costs its slices nothing.
    _home(agent, "services", {**_service(SKIP), "status": {"loadBalancer": {}}}, "MODIFIED")
    assert _queued(slices) == []


def test_a_slice_annotated_itself_overrides_its_service() -> None:
    agent, reflection, remote = _reflection()
    _home(agent, "services", _service(SKIP))
    _home(agent, "endpointslices", _slice(ALLOW))
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert SLICE_PATH in remote.objects

    _home(agent, "services", _service())
    _home(agent, "endpointslices", _slice(SKIP), "MODIFIED")
    _observe_remote(agent, remote, SLICE_PATH)
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert SLICE_PATH not in remote.objects


def test_under_an_allow_list_for_services_slices_of_an_allowed_service_are_reflected() -> None:
    agent, reflection, remote = _reflection(reflection_types={"service": "AllowList"})
    _home(agent, "endpointslices", _slice())
    _home(agent, "services", _service())
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert SLICE_PATH not in remote.objects
    _home(agent, "services", _service(ALLOW), "MODIFIED")
    assert ("app", "web-abc12") in _queued(reflection.reflectors["endpointslices"])
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert SLICE_PATH in remote.objects


def test_a_home_slice_managed_by_reflection_is_not_sent_back() -> None:
    agent, reflection, remote = _reflection()
    _home(agent, "endpointslices", _slice(labels={
        ENDPOINTSLICE_MANAGED_BY_LABEL: "endpointslice.reflection.liqo.io"}))
    _reconcile(reflection, "endpointslices", "web-abc12")
    assert remote.calls == []


def test_the_remote_controllers_own_slices_are_never_touched() -> None:
    agent, reflection, remote = _reflection()
    own = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": "web-zz9", "namespace": TWIN,
                        "labels": {SERVICE_NAME_LABEL: "web"}},
           "addressType": "IPv4", "endpoints": []}
    _remote(agent, "endpointslices", "ADDED", own)
    _reconcile(reflection, "endpointslices", "web-zz9")
    assert remote.calls == []


# --- Ingresses and flags --------------------------------------------------------------------


def test_an_ingress_is_copied_with_its_class_cleared() -> None:
    agent, reflection, remote = _reflection()
    _home(agent, "ingresses", {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"ingressClassName": "home-nginx", "rules": [{"host": "web.example"}]}})
    _reconcile(reflection, "ingresses")
    spec = remote.objects[INGRESS_PATH]["spec"]
    assert "ingressClassName" not in spec and spec["rules"] == [{"host": "web.example"}]
    _observe_remote(agent, remote, INGRESS_PATH, spec={"ingressClassName": "remote-default"})
    remote.calls.clear()
    _reconcile(reflection, "ingresses")
    assert remote.writes() == []  # the remote default class is the remote's to set


def test_each_network_kind_has_its_flags_and_zero_workers_disable_it() -> None:
    config = parse_config(["--remote-kubeconfig", "k", "--cluster-id", HOME,
                           "--remote-cluster-id", REMOTE, "--service-reflection-workers", "0",
                           "--endpointslice-reflection-workers", "2",
                           "--ingress-reflection-type", "AllowList"])
    agent = Agent(config, FakeHome(), FakeApi())  # type: ignore[arg-type]
    reflection = reflection_for(agent, KINDS)
    assert "services" not in reflection.reflectors
    assert reflection.reflectors["endpointslices"].controller.workers == 2
    assert str(reflection.reflectors["ingresses"].policy) == "AllowList"


def test_a_foreign_remote_ingress_is_left_alone_and_reported_on_the_home_ingress() -> None:
    agent, reflection, remote = _reflection()
    home = agent.home
    posted: list[dict[str, Any]] = []

    async def record(path: str, body: dict[str, Any]) -> Any:
        posted.append(body)
        return body

    home.create = record  # type: ignore[method-assign]
    foreign = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"name": "web", "namespace": TWIN}, "spec": {"rules": []}}
    remote.objects[INGRESS_PATH] = copy.deepcopy(foreign)
    _remote(agent, "ingresses", "ADDED", foreign)
    _home(agent, "ingresses", {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                               "metadata": {"name": "web", "namespace": "app", "uid": "u"},
                               "spec": {"rules": [{"host": "web.example"}]}})
    _reconcile(reflection, "ingresses")
    assert remote.writes() == [] and remote.objects[INGRESS_PATH] == foreign
    assert [(e["reason"], e["involvedObject"]["apiVersion"], e["involvedObject"]["kind"])
            for e in posted] == [("FailedReflection", "networking.k8s.io/v1", "Ingress")]
