"""Bad input through the running system: objects a real home API server
accepts but that cannot be carried over as they are, generated with hypothesis and sent to the
home cluster while the agent and the enforcer run as processes:
- ConfigMaps just under kube-apiserver's 3 MiB request limit, whose copy grows past it with the
  labels reflection adds (the remote refuses it 413 RequestEntityTooLarge);
- pods whose ShadowPod, a custom resource that etcd holds as JSON, is over etcd's 1.5 MiB
  request limit while the pod, protobuf in the home etcd, is well under it (the remote refuses
  it 500 "etcdserver: request is too large", or over 2 MiB "... trying to send message larger
  than max", its etcd client's own limit);
- pods misusing the anti-affinity annotations (an unknown preset, labels they do not have):
  carried over without what cannot be honoured;
- namespaces asking for a twin name longer than a namespace name may be.
Each is refused or trimmed with a Warning Event on the home object (a condition too, for a
namespace), nothing is half-made remotely, and the agent carries on: its process lives, its
health probes answer, no watch breaks, and a plain pod created afterwards is still offloaded."""

from __future__ import annotations

import json
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
from tests.helpers import free_port, wait_for
from tests.home_agent.play import namespace_offloading, offload_namespace

EXAMPLES = settings(max_examples=12, suppress_health_check=list(HealthCheck), deadline=None)
OUTCOME = 30  # seconds for the agent to carry an object over or say why not
TOO_LARGE = re.compile(r"too large|larger than max")  # the API server's words, or its etcd's

LABEL_CHARS = string.ascii_lowercase + string.digits
dns_label = st.builds(
    lambda first, middle, last: first + middle + last,
    st.sampled_from(string.ascii_lowercase), st.text(LABEL_CHARS + "-", max_size=61),
    st.sampled_from(LABEL_CHARS)).filter(lambda name: len(name) <= 63)
"""Names up to the 63-character limit (RFC 1123 labels)."""

REQUEST_LIMIT = 3 * 1024 * 1024  # kube-apiserver's request body limit (MaxRequestBodyBytes)
ETCD_LIMIT = 1536 * 1024  # etcd's --max-request-bytes default
CONTROL = "\u0001"
"""A control character: six bytes once JSON-escaped (as every client and the API server write
it), one as a string's byte, so a body can near the request limit while the data stays under a
ConfigMap's 1 MiB and the protobuf etcd holds of a built-in kind stays small."""


def request_bytes(body: dict[str, Any]) -> int:
    """The size of the body the Python client sends for `body` (json.dumps, ASCII escapes)."""
    return len(json.dumps(body).encode())


def config_map_sized(name: str, keys: list[str], short: int) -> dict[str, Any]:
    """A ConfigMap whose create request is `short` bytes under the request limit, its data
    spread over `keys` (the last one fills up)."""
    body: dict[str, Any] = {"kind": "ConfigMap", "metadata": {"name": name},
                            "data": dict.fromkeys(keys, "")}
    for key in keys[:-1]:
        body["data"][key] = CONTROL * 1000
    missing = REQUEST_LIMIT - short - request_bytes(body)
    escaped, plain = divmod(missing, 6)
    body["data"][keys[-1]] = CONTROL * escaped + "x" * plain
    assert request_bytes(body) == REQUEST_LIMIT - short
    return body


@st.composite
def oversized_copies(draw: st.DrawFn) -> dict[str, Any]:
    """ConfigMaps the home API server takes (their request at most 64 bytes under its limit)
    whose copy, with the ownership labels and twin namespace reflection adds (well over
    100 bytes, while compact JSON saves a few separators), is over the remote's limit."""
    keys = draw(st.lists(st.from_regex(r"[-._a-zA-Z0-9]{1,40}", fullmatch=True), min_size=1,
                         max_size=4, unique=True))
    return config_map_sized(draw(dns_label), keys, draw(st.integers(1, 64)))


def shadow_too_large_pod(name: str, escaped: int, variables: int = 1) -> dict[str, Any]:
    """A pod whose environment holds `escaped` control characters over `variables` variables."""
    each, rest = divmod(escaped, variables)
    env = [{"name": f"BLOB_{index}", "value": CONTROL * (each + (rest if index == 0 else 0))}
           for index in range(variables)]
    return {"kind": "Pod", "metadata": {"name": name}, "env": env}


@st.composite
def oversized_shadow_pods(draw: st.DrawFn) -> dict[str, Any]:
    """Pods of 1.6 to 2.9 MB of JSON (under the request limit) and as many hundred kB as the
    home etcd holds them: their ShadowPod, JSON in the remote etcd, is over its limit."""
    escaped = draw(st.integers(ETCD_LIMIT // 6 + 8_000, (REQUEST_LIMIT - 64 * 1024) // 6))
    return shadow_too_large_pod(draw(dns_label), escaped, draw(st.integers(1, 4)))


annotation_values = st.text(max_size=300)
label_lists = st.lists(st.text(string.printable, max_size=20), max_size=5).map(",".join)


@st.composite
def misannotated_pods(draw: st.DrawFn) -> dict[str, Any]:
    """Pods misusing the anti-affinity annotations: an unknown preset, or a label list naming
    labels the pod does not have."""
    labels = draw(st.dictionaries(st.sampled_from(["app", "tier", "x"]),
                                  st.text(LABEL_CHARS, min_size=1, max_size=63), max_size=3))
    annotations = draw(st.dictionaries(st.sampled_from(["note", "example.com/x", "liqo.io/y"]),
                                       annotation_values, max_size=2))
    if draw(st.booleans()):
        annotations[ANTI_AFFINITY_PRESET_ANNOTATION] = draw(st.text(max_size=30).filter(
            lambda preset: preset not in ("soft", "hard", "propagate")))
    else:
        annotations[ANTI_AFFINITY_PRESET_ANNOTATION] = draw(st.sampled_from(["soft", "hard"]))
        absent = draw(st.text(LABEL_CHARS, min_size=1, max_size=20).filter(
            lambda key: key not in labels))
        annotations[ANTI_AFFINITY_LABELS_ANNOTATION] = ",".join([absent, *draw(label_lists)
                                                                 .split(",")])
    return {"kind": "Pod", "metadata": {"name": draw(dns_label), "annotations": annotations,
                                        "labels": labels}}


BIG_CONFIG_MAP = config_map_sized("big", ["big"], 1)
"""One byte under the request limit at home."""

SHADOW_TOO_LARGE_POD = shadow_too_large_pod("escaped-env", 300_000)
"""1.8 MB of JSON but 300 kB as the home etcd holds it."""

LONGEST_NAMED_POD = {"kind": "Pod", "metadata": {"name": "p" * 63, "labels": {"app": "a"},
                     "annotations": {ANTI_AFFINITY_PRESET_ANNOTATION: "sometimes",
                                     ANTI_AFFINITY_LABELS_ANNOTATION: ",,no such, app,=x"}}}


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
    """Send one generated object; False when its name was taken by an earlier case. Anything
    else the home API server refuses fails the test: every case is one it accepts."""
    try:
        if case["kind"] == "Pod":
            body = fleet.pod_body(case["metadata"]["name"], node)
            body["metadata"].update(case["metadata"])
            if "env" in case:
                body["spec"]["containers"][0]["env"] = case["env"]
            home.core.create_namespaced_pod(namespace, body)
        else:
            home.core.create_namespaced_config_map(namespace, case)
    except ApiException as error:
        if error.status == 409:
            return False
        raise
    return True


def warnings_on(home: ClusterHandle, namespace: str, kind: str, name: str) -> list[Any]:
    return [event for event in home.core.list_namespaced_event(namespace).items
            if event.involved_object.kind == kind and event.involved_object.name == name
            and event.type == "Warning"]


def carried_over(remote: ClusterHandle, twin: str, kind: str, name: str) -> bool:
    if kind == "Pod":
        return name in fleet.shadow_pods(remote, twin)
    try:
        remote.core.read_namespaced_config_map(name, twin)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def too_large(case: dict[str, Any]) -> bool:
    """A case whose copy the remote refuses for its size."""
    return case["kind"] == "ConfigMap" or "env" in case


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
    @given(case=st.one_of(oversized_copies(), oversized_shadow_pods(), misannotated_pods()))
    @example(case=BIG_CONFIG_MAP)
    @example(case=SHADOW_TOO_LARGE_POD)
    @example(case=LONGEST_NAMED_POD)
    def each(case: dict[str, Any]) -> None:
        kind, name = case["kind"], case["metadata"]["name"]
        if (kind, name) in seen or not create(home, namespace, node, case):
            return
        seen.add((kind, name))
        if too_large(case):
            said = wait_for(lambda: [e.message for e in warnings_on(home, namespace, kind, name)
                                     if TOO_LARGE.search(e.message)], timeout=OUTCOME,
                            message=f"{kind} {name}: a Warning Event says it is too large")
            assert not carried_over(remote, twin, kind, name), said  # nothing half-made
            if kind == "ConfigMap":  # its retries would send 3 MiB each
                home.core.delete_namespaced_config_map(name, namespace)
            return
        reported = misused_annotation(case["metadata"])
        assert reported, case
        wait_for(lambda: carried_over(remote, twin, kind, name), timeout=OUTCOME,
                 message=f"{name}: carried over without what cannot be honoured")
        wait_for(lambda: any(reported in e.message
                             for e in warnings_on(home, namespace, kind, name)),
                 timeout=OUTCOME, message=f"{name}: its {reported} reported")

    each()
    assert {kind for kind, _ in seen} == {"Pod", "ConfigMap"}, seen
    twin_names_too_long(home, running)
    assert running.agent.process.popen.poll() is None, "the agent exited"
    broken = re.findall(r".*watch .* failed.*", running.agent.process.output())
    assert broken == [], "a watch broke on the input"
    assert healthy(probes)
    fleet.create_pods(home, namespace, ["plain"], node)
    wait_for(lambda: "plain" in fleet.shadow_pods(remote, twin), timeout=OUTCOME,
             message="a plain pod is still offloaded")
