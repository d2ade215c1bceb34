"""What the forge tests share: generators of valid-looking Kubernetes objects (for the reflection
forges' properties, tests/shared/forge/test_{metadata,compare,service,endpointslice,event}.py),
of every reflection forge's output and of JSON values, and the API server's JSON merge patch (to
check that what a forge says to write converges)."""

from __future__ import annotations

import copy
import string
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from shared.forge.configmap import remote_configmap
from shared.forge.endpointslice import EndpointDestination, remote_endpointslice
from shared.forge.ingress import remote_ingress
from shared.forge.metadata import ReflectionConfig
from shared.forge.secret import remote_secret
from shared.forge.service import remote_service
from shared.ipremap import CidrRemap
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


def merge_patched(target: Any, patch: Any) -> Any:
    """`target` with the JSON merge patch `patch` applied (RFC 7386), as the API server does:
    objects merge, a null removes the key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patched(result.get(key), value)
    return result


# Every reflection forge, as "home object + config → remote object".
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



JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)
"""What a decoded JSON object holds (integers within 64 bits and finite floats, as JSON decoders
and the API server carry them)."""
