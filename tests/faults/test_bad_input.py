"""Bad input through the running system (DESIGN.md 8, issue 8): hypothesis-generated pods,
ConfigMaps and Services, with unknown anti-affinity presets, malformed label lists, odd
annotations and names up to the 63-character limit, and namespaces whose twin name is too
long, sent to the home cluster while the agent and the enforcer run as processes. Every object
is one a real home API server accepts (under its 3 MiB request limit, ConfigMaps under their
1 MiB of data); some cannot be carried over as they are: a pod whose ShadowPod (a custom
resource, which etcd holds as JSON) grows past etcd's 1.5 MiB request limit, a twin namespace
name too long for a namespace. Each is either carried over or refused with a Warning Event on
the home object (a condition too, for a namespace); and the agent stays up: its process lives,
its health probes answer and a plain pod created afterwards is still offloaded."""

from __future__ import annotations

import re
import string
from typing import Any

import pytest
import urllib3
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from shared.wellknown import ANTI_AFFINITY_LABELS_ANNOTATION, ANTI_AFFINITY_PRESET_ANNOTATION
from tests.conftest import ClusterHandle
from tests.faults import fleet
from tests.faults.conftest import System
from tests.helpers import wait_for
from tests.home_agent.play import namespace_offloading, offload_namespace
from tests.remote_enforcer.conftest import free_port

EXAMPLES = settings(max_examples=12, suppress_health_check=list(HealthCheck))
OUTCOME = 30  # seconds for the agent to carry an object over or say why not

LABEL_CHARS = string.ascii_lowercase + string.digits
dns_label = st.builds(
    lambda first, middle, last: first + middle + last,
    st.sampled_from(string.ascii_lowercase), st.text(LABEL_CHARS + "-", max_size=61),
    st.sampled_from(LABEL_CHARS)).filter(lambda name: len(name) <= 63)
"""Names up to the 63-character limit (RFC 1123 labels)."""

REQUEST_LIMIT = 3 * 1024 * 1024  # kube-apiserver's request body limit
BIG_CONFIG_MAP = {"kind": "ConfigMap", "metadata": {"name": "big"},
                  "data": {"big": "\u0001" * ((REQUEST_LIMIT - 16 * 1024) // 6)}}
"""Control characters JSON escapes to six bytes each: just under the request limit in the
create and in every watch event, a sixth of that as etcd holds it."""

SHADOW_TOO_LARGE_POD = {"kind": "Pod", "metadata": {"name": "escaped-env"},
                        "env": [{"name": "BLOB", "value": "\u0001" * 300_000}]}
"""1.8 MB of JSON but 300 kB as the home etcd holds it: accepted at home, while its ShadowPod,
a custom resource, is JSON in the remote etcd and over its 1.5 MiB limit."""

LONGEST_NAMED_POD = {"kind": "Pod", "metadata": {"name": "p" * 63, "labels": {"app": "a"},
                     "annotations": {ANTI_AFFINITY_PRESET_ANNOTATION: "sometimes",
                                     ANTI_AFFINITY_LABELS_ANNOTATION: ",,no such, app,=x"}}}

annotation_values = st.text(max_size=300)
label_lists = st.lists(st.text(string.printable, max_size=20), max_size=5).map(",".join)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    annotations = draw(st.dictionaries(st.sampled_from(["note", "example.com/x", "liqo.io/y"]),
                                       annotation_values, max_size=2))
    annotations[ANTI_AFFINITY_PRESET_ANNOTATION] = draw(
        st.one_of(st.sampled_from(["soft", "hard", "propagate"]), st.text(max_size=30)))
    if draw(st.booleans()):
        annotations[ANTI_AFFINITY_LABELS_ANNOTATION] = draw(label_lists)
    return {"kind": "Pod", "metadata": {
        "name": draw(dns_label), "annotations": annotations,
        "labels": draw(st.dictionaries(st.sampled_from(["app", "tier", "x"]),
                                       st.text(LABEL_CHARS, min_size=1, max_size=63),
                                       max_size=3))}}


@st.composite
def config_maps(draw: st.DrawFn) -> dict[str, Any]:
    data = draw(st.dictionaries(st.from_regex(r"[-._a-zA-Z0-9]{1,40}", fullmatch=True),
                                st.text(max_size=200), max_size=4))
    if draw(st.booleans()):  # close to the 1 MiB of data a ConfigMap may hold
        data["big"] = "x" * draw(st.integers(1024 * 1024 - 16 * 1024, 1024 * 1024 - 8192))
    return {"kind": "ConfigMap", "data": data, "metadata": {
        "name": draw(dns_label),
        "annotations": draw(st.dictionaries(st.sampled_from(["note", "liqo.io/z"]),
                                            annotation_values, max_size=2))}}


@st.composite
def services(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]))
    spec: dict[str, Any] = {"type": kind}
    if kind == "ExternalName":
        spec["externalName"] = draw(dns_label) + ".example.com"
    else:
        numbers = draw(st.lists(st.integers(1, 65535), min_size=1, max_size=3, unique=True))
        spec["ports"] = [{"name": f"p{index}", "port": number,
                          "protocol": draw(st.sampled_from(["TCP", "UDP"]))}
                         for index, number in enumerate(numbers)]
        if kind == "NodePort" and draw(st.booleans()):
            spec["ports"][0]["nodePort"] = draw(st.integers(30000, 32767))
        spec["selector"] = {"app": draw(st.text(LABEL_CHARS, min_size=1, max_size=10))}
    return {"kind": "Service", "spec": spec, "metadata": {"name": draw(dns_label)[:63]}}


def misused_annotation(metadata: dict[str, Any]) -> str | None:
    """The anti-affinity annotation a pod misuses, which a Warning Event must name: an unknown
    preset, or a label list naming labels the pod does not have."""
    annotations, labels = metadata.get("annotations") or {}, metadata.get("labels") or {}
    preset = annotations.get(ANTI_AFFINITY_PRESET_ANNOTATION)
    if preset is None:
        return None
    if preset not in ("soft", "hard", "propagate"):
        return ANTI_AFFINITY_PRESET_ANNOTATION
    listed = annotations.get(ANTI_AFFINITY_LABELS_ANNOTATION)
    if preset != "propagate" and listed is not None and any(
            key.strip() and key.strip() not in labels for key in listed.split(",")):
        return ANTI_AFFINITY_LABELS_ANNOTATION
    return None


def create(home: ClusterHandle, namespace: str, node: str, case: dict[str, Any]) -> bool:
    """Send one generated object; False when the home API server refuses it (not our input)."""
    try:
        if case["kind"] == "Pod":
            body = fleet.pod_body(case["metadata"]["name"], node)
            body["metadata"].update(case["metadata"])
            if "env" in case:
                body["spec"]["containers"][0]["env"] = case["env"]
            home.core.create_namespaced_pod(namespace, body)
        elif case["kind"] == "ConfigMap":
            home.core.create_namespaced_config_map(namespace, case)
        else:
            home.core.create_namespaced_service(namespace, case)
    except ApiException as error:
        if error.status in (409, 422):
            return False
        raise
    return True


def warnings_on(home: ClusterHandle, namespace: str, kind: str, name: str) -> list[Any]:
    return [event for event in home.core.list_namespaced_event(namespace).items
            if event.involved_object.kind == kind and event.involved_object.name == name
            and event.type == "Warning"]


def carried_over(remote: ClusterHandle, twin: str, kind: str, name: str) -> bool:
    try:
        if kind == "Pod":
            return name in fleet.shadow_pods(remote, twin)
        if kind == "ConfigMap":
            remote.core.read_namespaced_config_map(name, twin)
        else:
            remote.core.read_namespaced_service(name, twin)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def twin_names_too_long(home: ClusterHandle, running: System) -> None:
    """Namespaces asking for a twin name longer than a namespace name may be: the
    NamespaceOffloading says so in a condition and a Warning Event."""
    remote_id = running.agent.remote_id

    @settings(max_examples=3, suppress_health_check=list(HealthCheck))
    @given(twin=st.text(string.ascii_lowercase, min_size=64, max_size=80))
    def each(twin: str) -> None:
        namespace = f"{running.namespace}-long"[:50] + f"-{len(twin)}"
        try:
            home.core.create_namespace({"metadata": {"name": namespace}})
        except ApiException as error:
            if error.status == 409:
                return  # this length was tried
            raise
        offload_namespace(home, namespace, namespaceMappingStrategy="SelectedName",
                          remoteNamespaceName=twin)

        def refusal() -> dict[str, Any] | None:
            status = namespace_offloading(home, namespace).get("status") or {}
            conditions = (status.get("remoteNamespacesConditions") or {}).get(remote_id) or []
            return next((c for c in conditions if c.get("status") == "False"), None)

        condition = wait_for(refusal, timeout=OUTCOME, message=f"{namespace}: a condition")
        assert "63" in condition["message"] or "long" in condition["message"], condition
        wait_for(lambda: warnings_on(home, namespace, "NamespaceOffloading", "offloading"),
                 timeout=OUTCOME, message=f"{namespace}: a Warning Event")
        home.core.delete_namespace(namespace)

    each()


def healthy(port: int) -> bool:
    answer = urllib3.request("GET", f"http://127.0.0.1:{port}/healthz", timeout=5.0,
                             retries=False)
    return answer.status == 200


# The simulated clusters serve from a thread of this process and draw from the global `random`
# while hypothesis generates, which it takes for a strategy using `random`.
@pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies")
def test_bad_input_is_refused_with_events_and_the_agent_carries_on(
        home: ClusterHandle, remote: ClusterHandle, system: Any) -> None:
    probes = free_port()
    running = system("--metrics-address", f"127.0.0.1:{probes}")
    assert isinstance(running, System)
    namespace, twin, node = running.namespace, running.twin, running.agent.node_name
    seen: set[tuple[str, str]] = set()

    @EXAMPLES
    @given(case=st.one_of(pods(), config_maps(), services()))
    @example(case=BIG_CONFIG_MAP)
    @example(case=SHADOW_TOO_LARGE_POD)
    @example(case=LONGEST_NAMED_POD)
    def each(case: dict[str, Any]) -> None:
        kind, name = case["kind"], case["metadata"]["name"]
        if (kind, name) in seen or not create(home, namespace, node, case):
            return
        seen.add((kind, name))
        wait_for(lambda: carried_over(remote, twin, kind, name)
                 or warnings_on(home, namespace, kind, name), timeout=OUTCOME,
                 message=f"{kind} {name}: carried over, or a Warning Event says why not")
        if kind == "Pod":
            reported = misused_annotation(case["metadata"])
            if reported:
                wait_for(lambda: any(reported in e.message
                                     for e in warnings_on(home, namespace, kind, name)),
                         timeout=OUTCOME, message=f"{name}: its {reported} reported")

    each()
    assert seen, "the home API server took none of the generated objects"
    # a ShadowPod the remote cannot take is not half-made: the home pod says why
    assert not carried_over(remote, twin, "Pod", "escaped-env")
    assert warnings_on(home, namespace, "Pod", "escaped-env")
    twin_names_too_long(home, running)
    assert running.agent.process.popen.poll() is None, "the agent exited"
    broken = re.findall(r".*watch .* failed.*", running.agent.process.output())
    assert broken == [], "a watch broke on the input"
    assert healthy(probes)
    fleet.create_pods(home, namespace, ["plain"], node)
    wait_for(lambda: "plain" in fleet.shadow_pods(remote, twin), timeout=OUTCOME,
             message="a plain pod is still offloaded")
