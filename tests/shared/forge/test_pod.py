"""Pod translation properties over generated pods, garbage annotations included."""

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.forge.metadata import ReflectionConfig
from shared.forge.pod import ForgedPod, PodForgeConfig, remote_pod_spec, shadow_pod
from shared.forge.pod_tokens import (
    API_SERVER_SUPPORT_HOME,
    api_server_support,
    projected_service_account_tokens,
    service_account_token_secret_name,
)
from shared.forge.shadow_pod_patch import (
    added_ephemeral_containers,
    shadow_pod_ephemeral_patch,
    shadow_pod_patch,
)
from shared.wellknown import (
    ANTI_AFFINITY_LABELS_ANNOTATION,
    ANTI_AFFINITY_PRESET_ANNOTATION,
    API_SERVER_SUPPORT_ANNOTATION,
    API_SERVER_SUPPORT_REMOTE,
    DESTINATION_CLUSTER_LABEL,
    ORIGIN_CLUSTER_LABEL,
    REMOTE_RUNTIME_CLASS_NAME_ANNOTATION,
    REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION,
    VIRTUAL_NODE_TAINT_KEY,
)
from tests.shared.forge.objects import merge_patched

# Generating whole pods dominates the run time (about 5 ms each): 1500 keeps each test quick.
EXAMPLES = settings(max_examples=2000, deadline=None, database=None)
HOME_ONLY_FIELDS = (
    "nodeName",
    "nodeSelector",
    "schedulerName",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "overhead",
    "serviceAccountName",
    "serviceAccount",
)

names = st.text(alphabet="abcdefghij-0123", min_size=1, max_size=12)
label_keys = st.sampled_from(
    ["app", "tier", "pod-template-hash", "controller-revision-hash", "skipped.example.com/x",
     "statefulset.kubernetes.io/pod-name", "app.kubernetes.io/name"]
)
env_vars = st.one_of(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["MODE", "KUBERNETES_SERVICE_HOST", "KUBERNETES_PORT"]),
         "value": st.text(max_size=8)}
    ),
    st.fixed_dictionaries(
        {"name": st.just("SA"),
         "valueFrom": st.just({"fieldRef": {"fieldPath": "spec.serviceAccountName"}})}
    ),
    st.fixed_dictionaries(
        {"name": st.just("CA"),
         "valueFrom": st.just({"configMapKeyRef": {"name": "kube-root-ca.crt", "key": "ca.crt"}})}
    ),
)
containers = st.fixed_dictionaries(
    {"name": names, "image": st.sampled_from(["nginx:1.25", "nginx:1.26", "busybox"])},
    optional={
        "env": st.lists(env_vars, max_size=4),
        "ports": st.lists(
            st.fixed_dictionaries(
                {"containerPort": st.integers(1, 65535)},
                optional={"hostPort": st.integers(1, 65535)},
            ),
            max_size=2,
        ),
        "envFrom": st.just([{"configMapRef": {"name": "kube-root-ca.crt"}}]),
    },
)
tolerations = st.fixed_dictionaries(
    {"key": st.sampled_from([VIRTUAL_NODE_TAINT_KEY, "dedicated", "node.kubernetes.io/not-ready"])},
    optional={
        "operator": st.sampled_from(["Exists", "Equal"]),
        "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        "value": st.text(max_size=5),
    },
)
term = st.fixed_dictionaries(
    {"topologyKey": st.just("kubernetes.io/hostname"),
     "labelSelector": st.fixed_dictionaries({"matchLabels": st.dictionaries(label_keys, names)})}
)
virtual_node_expression = {"key": "liqo.io/type", "operator": "In", "values": ["virtual-node"]}
node_affinity = st.just(
    {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [virtual_node_expression]}
    ]}}
)
affinities = st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": node_affinity,
        "podAffinity": st.fixed_dictionaries({"requiredDuringSchedulingIgnoredDuringExecution":
                                              st.lists(term, max_size=2)}),
        "podAntiAffinity": st.fixed_dictionaries({"requiredDuringSchedulingIgnoredDuringExecution":
                                                  st.lists(term, max_size=2)}),
    },
)
service_account_volume = st.just(
    {"name": "kube-api-access-abcde", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]}}
)
volumes = st.one_of(
    service_account_volume,
    st.fixed_dictionaries({"name": names, "configMap": st.fixed_dictionaries(
        {"name": st.sampled_from(["kube-root-ca.crt", "app-config"])})}),
    st.fixed_dictionaries({"name": names, "emptyDir": st.just({})}),
)
annotation_values = st.one_of(
    st.sampled_from(["propagate", "soft", "hard", "", "Soft", "none"]), st.text(max_size=12)
)
anti_affinity_lists = st.one_of(
    st.lists(label_keys).map(",".join), st.text(max_size=30), st.just(" , ,,")
)
specs = st.fixed_dictionaries(
    {"containers": st.lists(containers, min_size=1, max_size=3)},
    optional={
        "initContainers": st.lists(containers, max_size=2),
        "ephemeralContainers": st.lists(containers, max_size=2),
        "tolerations": st.lists(tolerations, max_size=4),
        "affinity": affinities,
        "volumes": st.lists(volumes, max_size=3),
        "hostNetwork": st.booleans(),
        "hostIPC": st.booleans(),
        "hostPID": st.booleans(),
        "nodeName": names,
        "nodeSelector": st.dictionaries(label_keys, names, max_size=2),
        "schedulerName": names,
        "priority": st.integers(-10, 10**9),
        "priorityClassName": names,
        "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"]),
        "overhead": st.just({"cpu": "250m"}),
        "runtimeClassName": names,
        "serviceAccountName": names,
        "activeDeadlineSeconds": st.integers(1, 10**6),
        "restartPolicy": st.sampled_from(["Always", "OnFailure", "Never"]),
    },
)
pods = st.builds(
    lambda name, labels, annotations, spec: {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": labels,
                     "annotations": annotations},
        "spec": spec,
    },
    names,
    st.dictionaries(label_keys, names, max_size=5),
    st.fixed_dictionaries(
        {},
        optional={
            ANTI_AFFINITY_PRESET_ANNOTATION: annotation_values,
            ANTI_AFFINITY_LABELS_ANNOTATION: anti_affinity_lists,
            API_SERVER_SUPPORT_ANNOTATION: st.sampled_from(["disabled", "remote", "Remote", ""]),
            REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION: names,
            REMOTE_RUNTIME_CLASS_NAME_ANNOTATION: st.one_of(st.just(""), names),
            "note": st.text(max_size=10),
        },
    ),
    specs,
)
patches = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "nodeSelector": st.dictionaries(label_keys, names, max_size=2),
            "tolerations": st.lists(tolerations, max_size=2),
            "affinity": st.fixed_dictionaries({"nodeAffinity": node_affinity}),
            "runtimeClassName": names,
        },
    ),
)
configs = st.builds(
    lambda enabled, host, patch: PodForgeConfig.model_validate(
        {
            "reflection": ReflectionConfig(
                home_cluster_id="home",
                remote_cluster_id="remote",
                labels_not_reflected=frozenset({"skipped.example.com/x"}),
            ),
            "enable_apiserver_support": enabled,
            "home_apiserver_host": host,
            "offloading_patch": patch,
        }
    ),
    st.booleans(),
    st.sampled_from([None, "api.home.example.com", "fd00::1", "10.0.0.1"]),
    patches,
)


def _all_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("containers") or []) + list(spec.get("initContainers") or [])


def _support(pod: dict[str, Any], config: PodForgeConfig) -> str:
    return api_server_support(pod, config.enable_apiserver_support)[0]


@EXAMPLES
@given(pods, configs)
def test_translation_never_raises_and_never_leaks_home_fields(
    pod: dict[str, Any], config: PodForgeConfig
) -> None:
    original = copy.deepcopy(pod)
    forged = remote_pod_spec(pod, config)
    assert isinstance(forged, ForgedPod)
    spec = forged.spec
    assert pod == original, "the input pod is never modified"
    assert spec["hostNetwork"] is False
    assert spec["hostIPC"] is False
    assert spec["hostPID"] is False
    remote_api = _support(pod, config) == API_SERVER_SUPPORT_REMOTE
    assert spec["automountServiceAccountToken"] is remote_api
    assert all(t.get("key") != VIRTUAL_NODE_TAINT_KEY for t in spec.get("tolerations") or [])
    patch = config.offloading_patch
    annotations = pod["metadata"]["annotations"]
    for field in HOME_ONLY_FIELDS:
        if field == "nodeSelector" and patch is not None and patch.node_selector:
            assert spec[field] == patch.node_selector
        elif field == "serviceAccountName" and remote_api:
            assert spec[field] == (annotations.get(REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION)
                                   or pod["spec"].get("serviceAccountName") or "default")
        else:
            assert field not in spec
    affinity = spec.get("affinity") or {}
    assert "podAffinity" not in affinity
    patch_node_affinity = ((patch.affinity if patch else None) or {}).get("nodeAffinity")
    assert affinity.get("nodeAffinity") == patch_node_affinity
    assert spec.get("runtimeClassName") == (
        annotations.get(REMOTE_RUNTIME_CLASS_NAME_ANNOTATION)
        or (patch.runtime_class_name if patch else None))
    if not pod["spec"].get("hostNetwork"):
        host_ports = [
            p.get("hostPort") for c in _all_containers(pod["spec"]) for p in c.get("ports") or []
        ]
        assert host_ports == [
            p.get("hostPort") for c in _all_containers(spec) for p in c.get("ports") or []
        ]
    else:
        assert all("hostPort" not in p for c in _all_containers(spec) for p in c.get("ports") or [])
    assert remote_pod_spec(pod, config) == forged, "translation is deterministic"


@EXAMPLES
@given(pods, configs)
def test_service_account_token_and_apiserver_env(
    pod: dict[str, Any], config: PodForgeConfig
) -> None:
    spec = remote_pod_spec(pod, config).spec
    support = _support(pod, config)
    if support == API_SERVER_SUPPORT_REMOTE:
        # The provider's API server: its kubelet fills in token, root CA and environment.
        assert spec.get("volumes") == pod["spec"].get("volumes")
        for local, remote in zip(_all_containers(pod["spec"]), _all_containers(spec),
                                 strict=True):
            assert remote.get("env") == local.get("env")
            assert remote.get("envFrom") == local.get("envFrom")
        assert projected_service_account_tokens(pod) == []
        return
    sources = [
        source
        for volume in spec.get("volumes") or []
        for source in (volume.get("projected") or {}).get("sources") or []
    ]
    assert all("serviceAccountToken" not in source for source in sources)
    # Each token the remote pod mounts is one the token reflector is told to provide.
    secret_items = [
        (source["secret"]["name"], item["key"])
        for source in sources
        if "secret" in source
        for item in source["secret"]["items"]
    ]
    token_secret = service_account_token_secret_name(pod["metadata"]["name"])
    tokens = projected_service_account_tokens(pod)
    expected = [(token_secret, token.key) for token in tokens]
    token_items = [item for item in secret_items if item[1] != "namespace"]
    home_api = support == API_SERVER_SUPPORT_HOME
    assert token_items == (expected if home_api else [])
    # The namespace file reads the home namespace from the token Secret, when there is one.
    reflected = home_api and bool(tokens)
    namespace_items = [item for item in secret_items if item[1] == "namespace"]
    assert all(item == (token_secret, "namespace") for item in namespace_items)
    downward_namespace = [
        item for source in sources for item in (source.get("downwardAPI") or {}).get("items") or []
        if item["fieldRef"]["fieldPath"] == "metadata.namespace"
    ]
    assert not (reflected and downward_namespace)
    assert reflected or not namespace_items
    assert all(
        (source.get("configMap") or {}).get("name") != "kube-root-ca.crt" for source in sources
    )
    points_home = home_api and config.home_apiserver_host
    for container in _all_containers(spec):
        env = container.get("env") or []
        kubernetes = [v for v in env if v["name"].startswith("KUBERNETES_")]
        if points_home:
            # Set once each, so that no duplicate decides which value wins.
            assert len({v["name"] for v in kubernetes}) == len(kubernetes) == 7
            values = {v["name"]: v["value"] for v in kubernetes}
            assert values["KUBERNETES_SERVICE_HOST"] == config.home_apiserver_host
            assert values["KUBERNETES_SERVICE_PORT"] == str(config.home_apiserver_port)
        assert all("valueFrom" not in v for v in env if v["name"] == "SA")


@EXAMPLES
@given(pods, configs)
def test_an_unchanged_pod_needs_no_remote_write(
    pod: dict[str, Any], config: PodForgeConfig
) -> None:
    written = shadow_pod(pod, "shop-home", config)
    assert shadow_pod_patch(written, pod, config) is None


@EXAMPLES
@given(pods, pods, configs)
def test_one_shadow_pod_patch_brings_the_shadow_pod_to_the_home_pod(
    before: dict[str, Any], after: dict[str, Any], config: PodForgeConfig
) -> None:
    shadow = shadow_pod(before, "shop-home", config)
    shadow["metadata"]["resourceVersion"] = "7"
    unchanged = copy.deepcopy(shadow)
    patch = shadow_pod_patch(shadow, after, config)
    assert shadow == unchanged, "the patch is computed without touching its input"
    if patch is None:
        return
    assert patch["metadata"]["resourceVersion"] == "7"  # a concurrent writer is not overwritten
    written = merge_patched(shadow, patch)
    assert written["metadata"].get("labels") == shadow_pod(after, "shop-home", config)[
        "metadata"].get("labels")
    assert shadow_pod_patch(written, after, config) is None


@EXAMPLES
@given(pods, pods, configs)
def test_the_patched_spec_has_what_the_whole_forge_gives_a_running_pod(
    before: dict[str, Any], after: dict[str, Any], config: PodForgeConfig
) -> None:
    """The patch forges only what it compares: the result is what the whole forged spec of the
    home pod gives the fields a running pod accepts changes of."""
    shadow = shadow_pod(before, "shop-home", config)
    patch = shadow_pod_patch(shadow, after, config)
    written = merge_patched(shadow, patch) if patch is not None else shadow
    spec, forged = written["spec"]["pod"], shadow_pod(after, "shop-home", config)["spec"]["pod"]
    for key in ("containers", "initContainers"):
        for container, wanted in zip(spec.get(key) or [], forged.get(key) or [], strict=False):
            if container["name"] == wanted["name"]:
                assert container["image"] == wanted["image"]
    assert all(t in spec.get("tolerations", []) for t in forged.get("tolerations", []))
    # ephemeral containers are only ever added, in a write of their own
    assert spec.get("ephemeralContainers") == shadow["spec"]["pod"].get("ephemeralContainers")
    had = shadow["spec"]["pod"].get("ephemeralContainers") or []
    added = added_ephemeral_containers(written, after, config)
    ephemeral = shadow_pod_ephemeral_patch(written, added)
    names = {c["name"] for c in had}
    assert added == [c for c in forged.get("ephemeralContainers", []) if c["name"] not in names]
    assert (ephemeral is None) == (not added)
    if ephemeral is not None:
        assert ephemeral["spec"]["pod"]["ephemeralContainers"] == had + added
    deadlines = (spec.get("activeDeadlineSeconds"), forged.get("activeDeadlineSeconds"),
                 shadow["spec"]["pod"].get("activeDeadlineSeconds"))
    assert deadlines[0] == (deadlines[2] if deadlines[1] is None or deadlines[2] is not None
                            and deadlines[1] >= deadlines[2] else deadlines[1])


@EXAMPLES
@given(pods, configs, st.sampled_from(["nginx:1.25", "nginx:1.27", "busybox"]))
def test_image_changes_reach_the_remote_pod(
    pod: dict[str, Any], config: PodForgeConfig, image: str
) -> None:
    current = shadow_pod(pod, "shop-home", config)
    changed = copy.deepcopy(pod)
    for container in changed["spec"]["containers"]:
        container["image"] = image
    patch = shadow_pod_patch(current, changed, config)
    if all(c["image"] == image for c in current["spec"]["pod"]["containers"]):
        assert patch is None or "spec" not in patch
    else:
        assert patch is not None
        assert all(c["image"] == image for c in patch["spec"]["pod"]["containers"])


@EXAMPLES
@given(pods, configs)
def test_shadow_pods_carry_the_ownership_pair_and_not_the_skipped_labels(
    pod: dict[str, Any], config: PodForgeConfig
) -> None:
    labels = shadow_pod(pod, "shop-home", config)["metadata"]["labels"]
    assert labels[ORIGIN_CLUSTER_LABEL] == "home"
    assert labels[DESTINATION_CLUSTER_LABEL] == "remote"
    assert "skipped.example.com/x" not in labels
