"""Properties of the reflection forges (shared.forge.{configmap,secret,service,endpointslice,
ingress,event} and common), over generated objects. The rules themselves are golden cases."""

from __future__ import annotations

import copy
import string
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.api.offloading_patch import OffloadingPatch
from shared.forge.common import (
    ReflectionConfig,
    needs_update,
    reflection_config,
    remote_metadata,
    updated_remote,
)
from shared.forge.configmap import remote_configmap
from shared.forge.endpointslice import (
    EndpointDestination,
    is_in_destination,
    remote_endpointslice,
)
from shared.forge.event import (
    event_needs_update,
    home_copy_summary,
    home_event,
    is_reflectable_event,
    object_reference,
    remote_event_kept,
)
from shared.forge.ingress import remote_ingress
from shared.forge.secret import remote_secret
from shared.forge.service import remote_service
from shared.ipremap import CidrRemap
from shared.ownership import is_owned
from shared.wellknown import (
    ENDPOINTSLICE_MANAGED_BY_LABEL,
    FORCE_REMOTE_NODE_PORT_ANNOTATION,
    SERVICE_NAME_LABEL,
)

EXAMPLES = settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
HOME, REMOTE = "home", "remote"
REMOTE_NS = "shop-home"
BOOKKEEPING = (
    "uid",
    "resourceVersion",
    "generation",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "creationTimestamp",
    "deletionTimestamp",
)

# --- generators of valid-looking Kubernetes objects -------------------------------------------

# Drawing from a pool keeps generation cheap; the forges treat every name alike.
_word = st.sampled_from([f"{a}{n}" for a in string.ascii_lowercase for n in ("", "1", "x-2")])
_key = st.one_of(
    _word,
    st.builds(lambda prefix, name: f"{prefix}.io/{name}", _word, _word),
    st.sampled_from(
        [
            "app",
            SERVICE_NAME_LABEL,
            ENDPOINTSLICE_MANAGED_BY_LABEL,
            "kubectl.kubernetes.io/last-applied-configuration",
            "liqo.io/skip-reflection",
            FORCE_REMOTE_NODE_PORT_ANNOTATION,
        ]
    ),
)
_value = st.one_of(st.just(""), st.just("true"), _word)
_string_map = st.dictionaries(_key, _value, max_size=5)


@st.composite
def metadata(draw: st.DrawFn, kind_name: st.SearchStrategy[str] = _word) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": draw(kind_name), "namespace": draw(_word)}
    for field, strategy in (("labels", _string_map), ("annotations", _string_map)):
        if draw(st.booleans()):
            meta[field] = draw(strategy)
    if draw(st.booleans()):
        meta.update(
            uid=draw(_word),
            resourceVersion="1",
            generation=2,
            creationTimestamp="2026-01-01T00:00:00Z",
            managedFields=[{"manager": "kubectl"}],
            finalizers=["example.com/f"],
            ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}],
        )
    return meta


def configmaps() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.just("ConfigMap"),
            "metadata": metadata(st.one_of(_word, st.just("kube-root-ca.crt"))),
        },
        optional={"data": _string_map, "binaryData": _string_map, "immutable": st.booleans()},
    )


def secrets() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"apiVersion": st.just("v1"), "kind": st.just("Secret"), "metadata": metadata()},
        optional={
            "type": st.sampled_from(["Opaque", "kubernetes.io/tls", "kubernetes.io/basic-auth"]),
            "data": _string_map,
            "stringData": _string_map,
            "immutable": st.booleans(),
        },
    )


_port = st.fixed_dictionaries(
    {"port": st.integers(1, 65535)},
    optional={
        "name": _word,
        "protocol": st.sampled_from(["TCP", "UDP"]),
        "targetPort": st.one_of(st.integers(1, 65535), _word),
        "nodePort": st.integers(30000, 32767),
    },
)


def services() -> st.SearchStrategy[dict[str, Any]]:
    spec = st.fixed_dictionaries(
        {"ports": st.lists(_port, max_size=3)},
        optional={
            "type": st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]),
            "clusterIP": st.sampled_from(["None", "10.96.0.10", ""]),
            "selector": _string_map,
            "loadBalancerIP": st.just("203.0.113.1"),
            "healthCheckNodePort": st.integers(30000, 32767),
            "externalIPs": st.just(["198.51.100.2"]),
            "sessionAffinity": st.sampled_from(["None", "ClientIP"]),
        },
    )
    # clusterIPs, when set, starts with clusterIP (API validation).
    spec = spec.map(lambda s: {**s, "clusterIPs": [s["clusterIP"]]} if s.get("clusterIP") else s)
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.just("Service"),
            "metadata": metadata(),
            "spec": spec,
        },
        optional={"status": st.just({"loadBalancer": {"ingress": [{"ip": "203.0.113.1"}]}})},
    )


_NODES = ["home-1", "home-2", "liqo-remote", "liqo-other"]
_PODS = ["web-0", "web-1", "web-2", "web-3"]
_address = st.one_of(
    st.builds(lambda a, b: f"10.0.{a}.{b}", st.integers(0, 255), st.integers(0, 255)),
    st.just("192.0.2.7"),
)
_endpoint = st.fixed_dictionaries(
    {"addresses": st.lists(_address, min_size=1, max_size=2)},
    optional={
        "nodeName": st.sampled_from(_NODES),
        "zone": _word,
        "hints": st.just({"forZones": [{"name": "z"}]}),
        "conditions": st.fixed_dictionaries({}, optional={"ready": st.booleans()}),
        "targetRef": st.builds(
            lambda name: {"kind": "Pod", "namespace": "shop", "name": name}, st.sampled_from(_PODS)
        ),
    },
)


def endpointslices() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("discovery.k8s.io/v1"),
            "kind": st.just("EndpointSlice"),
            "metadata": metadata(),
            "addressType": st.just("IPv4"),
            "endpoints": st.lists(_endpoint, max_size=5),
        },
        optional={"ports": st.lists(_port, max_size=2)},
    )


destinations = st.builds(
    EndpointDestination,
    virtual_node_names=st.frozensets(st.sampled_from(_NODES), max_size=2),
    offloaded_pod_names=st.frozensets(st.sampled_from(_PODS), max_size=3),
)
remaps = st.one_of(st.none(), st.just(CidrRemap("10.0.0.0/16", "10.200.0.0/16")))


def ingresses() -> st.SearchStrategy[dict[str, Any]]:
    spec = st.fixed_dictionaries(
        {},
        optional={
            "ingressClassName": _word,
            "rules": st.lists(st.builds(lambda h: {"host": f"{h}.example.com"}, _word), max_size=2),
        },
    )
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("networking.k8s.io/v1"),
            "kind": st.just("Ingress"),
            "metadata": metadata(),
            "spec": spec,
        },
        optional={"status": st.just({"loadBalancer": {}})},
    )


_INVOLVED = [
    ("v1", "Pod"),
    ("v1", "Service"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("offloading.liqo.io/v1beta1", "ShadowPod"),
    ("apps/v1", "Deployment"),
]


def remote_events() -> st.SearchStrategy[dict[str, Any]]:
    involved = st.builds(
        lambda kind, name: {"apiVersion": kind[0], "kind": kind[1], "name": name, "uid": "r"},
        st.sampled_from(_INVOLVED),
        _word,
    )
    return st.fixed_dictionaries(
        {
            "apiVersion": st.just("v1"),
            "kind": st.just("Event"),
            "metadata": metadata(),
            "involvedObject": involved,
        },
        optional={
            "reason": _word,
            "message": st.text(max_size=30),
            "type": st.sampled_from(["Normal", "Warning"]),
            "count": st.integers(1, 1000),
            "source": st.fixed_dictionaries({}, optional={"component": _word, "host": _word}),
            "lastTimestamp": st.just("2026-11-21T20:05:00Z"),
        },
    )


def configs_skipping(obj: Mapping[str, Any]) -> st.SearchStrategy[ReflectionConfig]:
    """Configs whose skip lists name some of the keys `obj` really carries."""
    meta = obj.get("metadata") or {}
    label_keys = sorted(meta.get("labels") or {}) or ["none"]
    annotation_keys = sorted(meta.get("annotations") or {}) or ["none"]
    return st.builds(
        ReflectionConfig,
        home_cluster_id=st.just(HOME),
        remote_cluster_id=st.just(REMOTE),
        labels_not_reflected=st.frozensets(st.sampled_from(label_keys)),
        annotations_not_reflected=st.frozensets(st.sampled_from(annotation_keys)),
    )


# Every forge, as "home object + config → remote object".
Forge = Callable[[dict[str, Any], ReflectionConfig], dict[str, Any]]
FORGES: list[tuple[st.SearchStrategy[dict[str, Any]], Forge]] = [
    (configmaps(), lambda obj, config: remote_configmap(obj, REMOTE_NS, config)),
    (secrets(), lambda obj, config: remote_secret(obj, REMOTE_NS, config)),
    (services(), lambda obj, config: remote_service(obj, REMOTE_NS, config)),
    (ingresses(), lambda obj, config: remote_ingress(obj, REMOTE_NS, config)),
    (
        endpointslices(),
        lambda obj, config: remote_endpointslice(
            obj,
            REMOTE_NS,
            config,
            EndpointDestination(virtual_node_names=frozenset({"liqo-remote"})),
        ),
    ),
]


@st.composite
def forged(draw: st.DrawFn) -> tuple[dict[str, Any], ReflectionConfig, dict[str, Any], Forge]:
    """(home object, config, forged remote object, forge) for any kind; the input is checked
    unchanged."""
    objects, forge = draw(st.sampled_from(FORGES))
    local = draw(objects)
    config = draw(configs_skipping(local))
    before = copy.deepcopy(local)
    remote = forge(local, config)
    assert local == before, "forging mutated its input"
    return local, config, remote, forge


# Labels the forges force on every copy, whatever the skip lists say.
FORCED_LABELS = {
    "offloading.liqo.io/origin",
    "offloading.liqo.io/destination",
    ENDPOINTSLICE_MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
}


@EXAMPLES
@given(forged())
def test_forged_objects_are_ours_and_carry_nothing_the_home_cluster_keeps(case: Any) -> None:
    _, config, remote, _ = case
    assert is_owned(remote, HOME, REMOTE)
    meta = remote["metadata"]
    assert meta["namespace"] == REMOTE_NS
    assert not (set(meta.get("labels", {})) & (config.labels_not_reflected - FORCED_LABELS))
    assert not (set(meta.get("annotations", {})) & config.annotations_not_reflected)
    assert "kubectl.kubernetes.io/last-applied-configuration" not in meta.get("annotations", {})
    assert not set(meta) & set(BOOKKEEPING)
    assert "status" not in remote


def as_stored_remotely(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as the remote API server returns it after a create: bookkeeping added, and the
    defaults it fills in (allocations, protocols, the default ingress class) set."""
    stored = copy.deepcopy(obj)
    stored["metadata"].update(uid="remote-uid", resourceVersion="9")
    spec: dict[str, Any] = stored.get("spec") or {}
    if obj["kind"] == "Service":
        if spec.get("clusterIP") != "None":
            spec.update(clusterIP="10.100.0.1", clusterIPs=["10.100.0.1"])
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("ipFamilies", ["IPv4"])
        for port in spec["ports"]:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port["port"])
            if spec["type"] != "ClusterIP":
                port.setdefault("nodePort", 31000)
        stored["status"] = {"loadBalancer": {}}
    if obj["kind"] == "Ingress":
        spec.setdefault("ingressClassName", "remote-default")
    if obj["kind"] == "EndpointSlice":
        for port in stored.get("ports", []):
            port.setdefault("protocol", "TCP")
    return stored


@EXAMPLES
@given(forged())
def test_unchanged_objects_need_no_write_and_drift_is_overwritten(case: Any) -> None:
    local, config, remote, forge = case
    stored = as_stored_remotely(remote)
    assert not needs_update(stored, forge(local, config))
    stored["metadata"]["labels"]["drift"] = "yes"
    assert needs_update(stored, remote)
    body = updated_remote(stored, remote)
    assert body["metadata"]["resourceVersion"] == "9"
    assert not needs_update(body, remote)


@EXAMPLES
@given(services(), st.booleans())
def test_services_never_carry_home_allocations_unless_forced(service: Any, force: bool) -> None:
    annotations = service["metadata"].setdefault("annotations", {})
    annotations[FORCE_REMOTE_NODE_PORT_ANNOTATION] = "true" if force else "no"
    spec = remote_service(service, REMOTE_NS, reflection_config(HOME, REMOTE))["spec"]
    assert spec.get("clusterIP") in (None, "None")
    assert all(ip == "None" for ip in spec.get("clusterIPs", []))
    for field in ("loadBalancerIP", "healthCheckNodePort", "externalIPs"):
        assert field not in spec
    node_ports = [port.get("nodePort") for port in spec.get("ports", [])]
    local_node_ports = [port.get("nodePort") for port in service["spec"]["ports"]]
    assert node_ports == (local_node_ports if force else [None] * len(node_ports))


@EXAMPLES
@given(endpointslices(), destinations, remaps)
def test_endpoint_filtering_never_emits_an_endpoint_of_the_destination(
    local: Any, destination: EndpointDestination, remap: CidrRemap | None
) -> None:
    remote = remote_endpointslice(
        local, REMOTE_NS, reflection_config(HOME, REMOTE), destination, remap
    )
    kept = [e for e in local["endpoints"] if not is_in_destination(e, destination)]
    assert len(remote["endpoints"]) == len(kept)
    for home_endpoint, endpoint in zip(kept, remote["endpoints"], strict=True):
        assert not is_in_destination(home_endpoint, destination)
        assert endpoint.get("nodeName") is None and "zone" not in endpoint
        assert "hints" not in endpoint
        expected = [remap.remap(a) if remap else a for a in home_endpoint["addresses"]]
        assert endpoint["addresses"] == expected
    labels = remote["metadata"]["labels"]
    assert labels[ENDPOINTSLICE_MANAGED_BY_LABEL] == "endpointslice.reflection.liqo.io"


@EXAMPLES
@given(remote_events(), configs_skipping({}))
def test_home_events_are_ours_and_attached_to_the_home_object(event: Any, config: Any) -> None:
    home_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "home-uid"},
    }
    before = copy.deepcopy(event)
    home = home_event(event, object_reference(home_pod), config)
    assert event == before
    assert is_owned(home, HOME, REMOTE)
    assert home["metadata"]["namespace"] == "shop"
    assert home["involvedObject"]["uid"] == "home-uid"
    assert home.get("count") == event.get("count")
    assert len(home["metadata"]["name"]) <= 253
    assert home == home_event(event, object_reference(home_pod), config)  # deterministic
    assert is_reflectable_event(event) == (
        event["involvedObject"]["kind"] not in ("Deployment", "ShadowPod"))


def test_skip_lists_merge_the_global_flags_with_the_virtual_nodes_offloading_patch() -> None:
    patch = OffloadingPatch(labels_not_reflected=["b"], annotations_not_reflected=["y"])
    config = reflection_config(
        HOME,
        REMOTE,
        labels_not_reflected=["a"],
        annotations_not_reflected=["x"],
        offloading_patch=patch,
    )
    assert config.labels_not_reflected == {"a", "b"}
    assert config.annotations_not_reflected == {"x", "y"}
    meta = remote_metadata(
        {
            "metadata": {
                "name": "n",
                "labels": {"a": "1", "b": "2", "c": "3"},
                "annotations": {"x": "1", "y": "2", "z": "3"},
            }
        },
        REMOTE_NS,
        config,
    )
    assert set(meta["labels"]) == {
        "c",
        "offloading.liqo.io/origin",
        "offloading.liqo.io/destination",
    }
    assert meta["annotations"] == {"z": "3"}


@EXAMPLES
@given(remote_events(), configs_skipping({}),
       st.dictionaries(st.sampled_from(["eventTime", "action", "related", "series", "note"]),
                       st.sampled_from([None, "", {}, []])))
def test_a_home_copys_summary_decides_updates_as_the_whole_copy_does(
        event: Any, config: Any, server_empties: dict[str, Any]) -> None:
    home_pod = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "shop", "uid": "home-uid"}}
    desired = home_event(event, object_reference(home_pod), config)
    stored = {**copy.deepcopy(desired), **server_empties}
    stored["metadata"].update(uid="copy-uid", resourceVersion="7",
                              creationTimestamp="2026-11-21T20:00:00Z")
    summary = home_copy_summary(stored)
    assert summary["metadata"] == {key: stored["metadata"][key] for key in (
        "namespace", "name", "uid", "resourceVersion", "labels")}
    assert set(summary) == {"metadata", "digest"}  # nothing of the Event's content
    assert not event_needs_update(summary, desired)
    assert not needs_update(stored, desired)
    changed = {**desired, "count": (desired.get("count") or 0) + 1}
    assert event_needs_update(summary, changed) and needs_update(stored, changed)
    drifted = copy.deepcopy(stored)
    drifted["metadata"]["labels"]["drift"] = "yes"
    assert event_needs_update(home_copy_summary(drifted), desired)


@EXAMPLES
@given(remote_events(), configs_skipping({}))
def test_what_is_kept_of_a_remote_event_forges_the_same_home_copy(event: Any,
                                                                   config: Any) -> None:
    event["metadata"].update(uid="remote-uid", resourceVersion="12",
                             creationTimestamp="2026-11-21T20:00:00Z")
    event["involvedObject"]["resourceVersion"] = "7"
    kept = remote_event_kept(event)
    home_pod = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "shop", "uid": "home-uid"}}
    reference = object_reference(home_pod)
    assert home_event(kept, reference, config) == home_event(event, reference, config)
    assert is_reflectable_event(kept) == is_reflectable_event(event)
    assert "uid" not in kept["metadata"] and "resourceVersion" not in kept["metadata"]
    assert "resourceVersion" not in kept["involvedObject"]
