"""Pod offloading: the home pod's spec as the remote pod's, and the remote status as the home
pod's (Liqo's pkg/virtualKubelet/forge/pods.go is the model).

Home to remote, the spec is an allow-list copy. Scheduling fields name home nodes, classes and
priorities and are dropped; host namespaces are forced off; the virtual-node toleration is
removed (so the pod cannot land on a virtual node of the provider in turn), and so are the
home tolerations of the not-ready/unreachable taints (they are about the virtual node's health,
see `shared.forge.offloading_strategy`; a remote pod tolerating a dead provider node for ever
would never be replaced there); the VirtualNode's
offloadingPatch adds the remote scheduling constraints; anti-affinity presets build the remote
anti-affinity; the service-account token comes from a Secret the token reflector keeps fresh,
and the containers are pointed at the home API server.

Decisions beyond Liqo:
- An anti-affinity preset and the patch's node affinity are combined (Liqo's preset replaces the
  whole affinity, losing the patch's node affinity).
- A soft/hard preset whose label selection is empty is not applied and reported: an empty
  selector would repel every pod of the namespace.
- Every reference to `kube-root-ca.crt` (plain and projected volumes, env) follows the rename
  of the reflected ConfigMap, not only projected volumes.
- hostPorts that the home apiserver defaulted from hostNetwork are cleared with hostNetwork.
- A projected volume's `metadata.namespace` downwardAPI items (the `namespace` file of the
  service-account volume) read the home namespace from the token Secret (its `namespace` key):
  the remote kubelet would write the twin namespace there. Only for pods that project a token
  (no token, no token Secret to read from).
- The home pod's runtimeClassName names a home RuntimeClass and is dropped like the overhead it
  brought: the remote pod's is the pod's `liqo.io/remote-runtime-class-name` annotation, else the
  offloadingPatch's (Liqo also falls back to the home pod's own class).

Per-pod annotations, with Liqo's names and meaning:
- `liqo.io/api-server-support`: unset, the remote pod reaches the home API server (the agent's
  default, `enable_apiserver_support`: reflected tokens, KUBERNETES_SERVICE_* pointing home);
  `disabled`, no API server is set up for it (no token reflected, its projected tokens left
  out, no environment rewritten), as the agent's `enable_apiserver_support` off does for every
  pod; `remote`, the remote pod reaches the provider's API server as a ServiceAccount of its
  twin namespace (`liqo.io/remote-service-account-name`, else the home pod's account's name):
  its projected volumes, root CA and environment stay as the home pod has them, for the remote
  kubelet and API server to fill in. Another value is reported and ignored.
- `liqo.io/remote-runtime-class-name`: above.

Functions never mutate their arguments; nothing here raises on a pod the apiserver accepted:
what cannot be honoured is returned as a warning for the agent to report as an Event.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from shared.api.offloading_patch import OffloadingPatch
from shared.api.shadowpod import SHADOWPOD
from shared.forge.configmap import remote_configmap_name
from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, remote_metadata, without_keys
from shared.forge.namespace import shortened
from shared.forge.offloading_strategy import is_node_health_toleration
from shared.ipremap import CidrRemap, remap_address
from shared.rfc3339 import rfc3339
from shared.wellknown import (
    ANTI_AFFINITY_LABELS_ANNOTATION,
    ANTI_AFFINITY_PRESET_ANNOTATION,
    API_SERVER_SUPPORT_ANNOTATION,
    API_SERVER_SUPPORT_DISABLED,
    API_SERVER_SUPPORT_REMOTE,
    HOSTNAME_LABEL,
    LABELS_NOT_PROPAGATED_FROM_POD,
    OFFLOADING_BACKOFF_REASON,
    POD_CREATED_CONDITION,
    REMOTE_CREATION_FAILED_CONDITION,
    REMOTE_RUNTIME_CLASS_NAME_ANNOTATION,
    REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION,
    TOKEN_SECRET_NAMESPACE_KEY,
    TRACEPARENT_ANNOTATION,
    VIRTUAL_NODE_TAINT_KEY,
)

# The PodSpec fields copied verbatim. Everything else is dropped or forged.
COPIED_SPEC_FIELDS: tuple[str, ...] = (
    "containers",
    "initContainers",
    "volumes",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "dnsConfig",
    "hostAliases",
    "hostname",
    "subdomain",
    "imagePullSecrets",
    "securityContext",
    "readinessGates",
    "enableServiceLinks",
    "shareProcessNamespace",
    "setHostnameAsFQDN",
    "topologySpreadConstraints",
)
FORCED_OFF_SPEC_FIELDS: tuple[str, ...] = ("hostNetwork", "hostIPC", "hostPID")
EPHEMERAL_CONTAINERS = "ephemeralContainers"
"""Added to a running pod (`kubectl debug`): forged as its containers are, and added to the
ShadowPod as a running pod accepts them (through its ephemeralcontainers subresource)."""

SERVICE_ACCOUNT_NAME_FIELD = "spec.serviceAccountName"
NAMESPACE_FIELD = "metadata.namespace"
DEFAULT_SERVICE_ACCOUNT = "default"

API_SERVER_SUPPORT_HOME = "home"
"""The default: the remote pod reaches the home API server (not an annotation value)."""
API_SERVER_SUPPORT_VALUES = (API_SERVER_SUPPORT_DISABLED, API_SERVER_SUPPORT_REMOTE)

ANTI_AFFINITY_PROPAGATE = "propagate"
ANTI_AFFINITY_SOFT = "soft"
ANTI_AFFINITY_HARD = "hard"


class PodForgeConfig(BaseModel):
    """How pods are translated for one remote cluster.

    `reflection` carries the cluster ids and the label/annotation skip lists (global flags merged
    with the VirtualNode's, see `shared.forge.metadata.reflection_config`). `home_apiserver_host`
    and `home_apiserver_port` are where offloaded pods reach the home API server; without a host
    the containers keep the remote cluster's KUBERNETES_SERVICE_* variables.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    reflection: ReflectionConfig
    home_apiserver_host: str | None = None
    home_apiserver_port: int = 443
    enable_apiserver_support: bool = True
    offloading_patch: OffloadingPatch | None = None


@dataclass(frozen=True)
class ForgedPod:
    """A remote PodSpec and what could not be honoured in it (for Events on the home pod)."""

    spec: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


# --- names the token reflector shares ----------------------------------------------------------


def service_account_token_secret_name(pod_name: str) -> str:
    """The remote Secret holding an offloaded pod's home service-account tokens (Liqo's name,
    shortened with a hash if it would exceed a Secret name's 253 characters)."""
    return shortened(f"{pod_name}-token", max_length=253)


@functools.lru_cache(maxsize=1024)
def service_account_token_key(volume_name: str, path: str) -> str:
    """The key, in that Secret, of the token projected into `volume_name` at `path` (Liqo's
    TokenAPI key: a pod may project several tokens, each with its own audience). Remembered:
    the pods of a cluster project a few (volume, path) pairs, each looked up several times a
    pod change."""
    return f"{volume_name}-{hashlib.sha256(path.encode()).hexdigest()[:6]}"


@dataclass(frozen=True)
class ProjectedToken:
    """A service-account token the home pod projects, to be requested from the home cluster
    (TokenRequest bound to the pod) and stored under `key` in the pod's token Secret."""

    key: str
    path: str
    audience: str | None
    expiration_seconds: int


DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600
"""The apiserver's default expirationSeconds for a projected token."""


def _annotations(local_pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (local_pod.get("metadata") or {}).get("annotations") or {}


def api_server_support(local_pod: Mapping[str, Any], enabled: bool) -> tuple[str, str | None]:
    """Which API server the remote pod reaches: API_SERVER_SUPPORT_HOME,
    API_SERVER_SUPPORT_DISABLED or API_SERVER_SUPPORT_REMOTE, as the pod's annotation says,
    else as the agent's default (`enabled`: home); and a warning for a value it does not know
    (then ignored, as Liqo ignores it)."""
    default = API_SERVER_SUPPORT_HOME if enabled else API_SERVER_SUPPORT_DISABLED
    value = _annotations(local_pod).get(API_SERVER_SUPPORT_ANNOTATION)
    if value is None:
        return default, None
    if value in API_SERVER_SUPPORT_VALUES:
        return value, None
    return default, (f"unknown {API_SERVER_SUPPORT_ANNOTATION} value {value!r} ignored "
                     f"(expected {API_SERVER_SUPPORT_DISABLED} or {API_SERVER_SUPPORT_REMOTE})")


def projected_service_account_tokens(local_pod: Mapping[str, Any]) -> list[ProjectedToken]:
    """Every token the pod's projected volumes ask for of the home cluster: what the token
    reflector must keep in `service_account_token_secret_name(pod name)` for the remote pod's
    Secret projections. None when the pod's `liqo.io/api-server-support` is `disabled` (no
    token) or `remote` (the remote kubelet makes the provider's)."""
    if _annotations(local_pod).get(API_SERVER_SUPPORT_ANNOTATION) in API_SERVER_SUPPORT_VALUES:
        return []
    tokens = []
    for volume in (local_pod.get("spec") or {}).get("volumes") or []:
        for source in (volume.get("projected") or {}).get("sources") or []:
            token = source.get("serviceAccountToken")
            if isinstance(token, dict):
                path = str(token.get("path", ""))
                tokens.append(
                    ProjectedToken(
                        key=service_account_token_key(str(volume.get("name", "")), path),
                        path=path,
                        audience=token.get("audience"),
                        expiration_seconds=int(
                            token.get("expirationSeconds") or DEFAULT_TOKEN_EXPIRATION_SECONDS
                        ),
                    )
                )
    return tokens


def required_objects(local_pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of each ConfigMap and Secret the pod cannot start without: those its
    volumes mount (plain or projected) and its containers' environment reads (`valueFrom`,
    `envFrom`), unless `optional`. A kubelet that does not find one holds the pod: a volume in
    ContainerCreating (FailedMount, tried again after a backoff doubling from 0.5 s up to about
    2 min), an environment in CreateContainerConfigError (tried again at the pod's next sync,
    10 to 15 s later). Each once, volumes first."""
    found: dict[tuple[str, str], None] = {}

    def add(kind: str, source: Any, field: str = "name") -> None:
        if isinstance(source, Mapping) and not source.get("optional") and source.get(field):
            found[(kind, str(source[field]))] = None

    spec = local_pod.get("spec") or {}
    for volume in spec.get("volumes") or []:
        add("Secret", volume.get("secret"), "secretName")
        add("ConfigMap", volume.get("configMap"))
        for source in (volume.get("projected") or {}).get("sources") or []:
            add("Secret", source.get("secret"))
            add("ConfigMap", source.get("configMap"))
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            add("ConfigMap", source.get("configMapKeyRef"))
            add("Secret", source.get("secretKeyRef"))
        for source in container.get("envFrom") or []:
            add("ConfigMap", source.get("configMapRef"))
            add("Secret", source.get("secretRef"))
    return list(found)


# --- home to remote: the spec ------------------------------------------------------------------


def remote_tolerations(tolerations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pod's tolerations without the virtual-node one: tolerating it remotely would let the
    pod be offloaded again from the provider to a third cluster."""
    return [copied(dict(t)) for t in tolerations if t.get("key") != VIRTUAL_NODE_TAINT_KEY]


def service_account_name(local_spec: Mapping[str, Any]) -> str:
    """The pod's service account (the one its tokens are requested for)."""
    return str(
        local_spec.get("serviceAccountName")
        or local_spec.get("serviceAccount")
        or DEFAULT_SERVICE_ACCOUNT
    )


def _renamed_configmap_refs(container: dict[str, Any]) -> None:
    """The container's environment reads the reflected root CA (`remote_configmap_name`)."""
    for env in container.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("configMapKeyRef")
        if isinstance(ref, dict) and "name" in ref:
            ref["name"] = remote_configmap_name(ref["name"])
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef")
        if isinstance(ref, dict) and "name" in ref:
            ref["name"] = remote_configmap_name(ref["name"])


def _home_apiserver_env(host: str, port: int) -> list[dict[str, Any]]:
    """What the kubelet would inject for the `kubernetes` Service, pointing at the home one."""
    address = f"[{host}]" if ":" in host else host  # net.JoinHostPort brackets IPv6
    url = f"tcp://{address}:{port}"
    return [
        {"name": "KUBERNETES_SERVICE_HOST", "value": host},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(port)},
        {"name": "KUBERNETES_PORT", "value": url},
        {"name": f"KUBERNETES_PORT_{port}_TCP", "value": url},
        {"name": f"KUBERNETES_PORT_{port}_TCP_PROTO", "value": "tcp"},
        {"name": f"KUBERNETES_PORT_{port}_TCP_ADDR", "value": host},
        {"name": f"KUBERNETES_PORT_{port}_TCP_PORT", "value": str(port)},
    ]


def _remote_container(
    container: Mapping[str, Any],
    service_account: str | None,
    apiserver_env: list[dict[str, Any]],
    clear_host_ports: bool,
) -> dict[str, Any]:
    """`service_account`: the home account's name, for the environment that reads the pod's
    (None: the remote pod runs as an account of its own, which the environment then reads,
    as it reads the remote cluster's root CA)."""
    remote = copied(dict(container))
    if service_account is not None:
        _renamed_configmap_refs(remote)
    replaced = {variable["name"] for variable in apiserver_env}
    env = []
    for variable in remote.get("env") or []:
        field_ref = (variable.get("valueFrom") or {}).get("fieldRef") or {}
        if service_account is not None and field_ref.get("fieldPath") == SERVICE_ACCOUNT_NAME_FIELD:
            # The remote pod runs under no home service account: hard-code the home one's name.
            variable = {"name": variable.get("name"), "value": service_account}
        if variable.get("name") in replaced:
            continue  # set below, so that no duplicate decides which value wins
        env.append(variable)
    env.extend(copied(apiserver_env))
    if env:
        remote["env"] = env
    if clear_host_ports:
        # hostNetwork pods get hostPort defaulted to containerPort; without hostNetwork they
        # would needlessly claim the remote node's ports.
        for port in remote.get("ports") or []:
            port.pop("hostPort", None)
    return remote


def _is_namespace_item(item: Mapping[str, Any]) -> bool:
    return bool((item.get("fieldRef") or {}).get("fieldPath") == NAMESPACE_FIELD)


def _home_namespace_sources(
    source: dict[str, Any], token_secret: str
) -> list[dict[str, Any]]:
    """A downwardAPI source whose `metadata.namespace` items would show the twin namespace: those
    items read the home namespace from the token Secret instead (its `namespace` key)."""
    items = source["downwardAPI"].get("items") or []
    moved = [item for item in items if _is_namespace_item(item)]
    if not moved:
        return [source]
    kept = [item for item in items if not _is_namespace_item(item)]
    secret_items = []
    for item in moved:
        secret_item = {"key": TOKEN_SECRET_NAMESPACE_KEY, "path": item.get("path", "")}
        if "mode" in item:
            secret_item["mode"] = item["mode"]
        secret_items.append(secret_item)
    sources = [{"secret": {"name": token_secret, "items": secret_items}}]
    if kept:
        sources.insert(0, {**source, "downwardAPI": {**source["downwardAPI"], "items": kept}})
    return sources


def _remote_projected_sources(
    volume_name: str, sources: Iterable[Mapping[str, Any]], pod_name: str, token_secret: bool
) -> list[dict[str, Any]]:
    """`token_secret`: the token reflector keeps the pod's token Secret (the pod projects tokens
    and token support is on), so tokens and the home namespace are read from it."""
    secret_name = service_account_token_secret_name(pod_name)
    remote_sources = []
    for local_source in sources:
        source = copied(dict(local_source))
        if isinstance(source.get("configMap"), dict) and "name" in source["configMap"]:
            source["configMap"]["name"] = remote_configmap_name(source["configMap"]["name"])
        if token_secret and isinstance(source.get("downwardAPI"), dict):
            remote_sources.extend(_home_namespace_sources(source, secret_name))
            continue
        token = source.get("serviceAccountToken")
        if isinstance(token, dict):
            if not token_secret:
                continue  # the token is not reflected: the rest of the volume still mounts
            path = str(token.get("path", ""))
            source = {
                "secret": {
                    "name": secret_name,
                    "items": [{"key": service_account_token_key(volume_name, path), "path": path}],
                }
            }
        remote_sources.append(source)
    return remote_sources


def _remote_volumes(
    volumes: Iterable[Mapping[str, Any]], pod_name: str, token_secret: bool
) -> list[dict[str, Any]]:
    remote_volumes = []
    for local_volume in volumes:
        volume = copied(dict(local_volume))
        if isinstance(volume.get("configMap"), dict) and "name" in volume["configMap"]:
            volume["configMap"]["name"] = remote_configmap_name(volume["configMap"]["name"])
        projected = volume.get("projected")
        if isinstance(projected, dict):
            projected["sources"] = _remote_projected_sources(
                str(volume.get("name", "")), projected.get("sources") or [], pod_name, token_secret
            )
        remote_volumes.append(volume)
    return remote_volumes


def anti_affinity_labels(
    labels: Mapping[str, str], selected_keys: str | None
) -> tuple[dict[str, str], list[str]]:
    """The labels a soft/hard preset selects on, and warnings about the selection.

    Without `liqo.io/anti-affinity-labels`: the pod's labels minus those that differ between
    replicas (pod-template-hash, controller-revision-hash, statefulset pod-name). With it: only
    the comma-separated keys it lists; blanks are ignored, keys the pod does not have reported.
    """
    if selected_keys is None:
        return without_keys(labels, LABELS_NOT_PROPAGATED_FROM_POD), []
    warnings = []
    chosen: dict[str, str] = {}
    for key in (part.strip() for part in selected_keys.split(",")):
        if not key:
            continue
        if key in labels:
            chosen[key] = labels[key]
        else:  # also what a malformed key comes to: the apiserver let no such label through
            warnings.append(f"{ANTI_AFFINITY_LABELS_ANNOTATION}: the pod has no label {key!r}")
    return chosen, warnings


def _pod_anti_affinity(
    local_pod: Mapping[str, Any], labels: Mapping[str, str]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The remote podAntiAffinity the pod's preset annotation asks for, and warnings."""
    annotations = (local_pod.get("metadata") or {}).get("annotations") or {}
    preset = annotations.get(ANTI_AFFINITY_PRESET_ANNOTATION)
    if preset is None:
        return None, []
    if preset == ANTI_AFFINITY_PROPAGATE:
        affinity = (local_pod.get("spec") or {}).get("affinity") or {}
        anti_affinity = affinity.get("podAntiAffinity")
        return (copied(anti_affinity) if anti_affinity else None), []
    if preset not in (ANTI_AFFINITY_SOFT, ANTI_AFFINITY_HARD):
        return None, [
            f"unknown {ANTI_AFFINITY_PRESET_ANNOTATION} value {preset!r} ignored "
            f"(expected {ANTI_AFFINITY_PROPAGATE}, {ANTI_AFFINITY_SOFT} or {ANTI_AFFINITY_HARD})"
        ]
    selected, warnings = anti_affinity_labels(
        labels, annotations.get(ANTI_AFFINITY_LABELS_ANNOTATION)
    )
    if not selected:
        warnings.append(
            f"{ANTI_AFFINITY_PRESET_ANNOTATION}={preset} not applied: no pod label to select on"
        )
        return None, warnings
    term = {"topologyKey": HOSTNAME_LABEL, "labelSelector": {"matchLabels": selected}}
    if preset == ANTI_AFFINITY_SOFT:
        return {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": term}
            ]
        }, warnings
    return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}, warnings


def _remote_pod_tolerations(
    local_spec: Mapping[str, Any], patch: OffloadingPatch | None
) -> list[dict[str, Any]]:
    """The remote pod's tolerations: the home pod's (`remote_tolerations`) but the node-health
    ones, then the offloadingPatch's it lacks.

    Not-ready/unreachable tolerations are about the virtual node (the pod webhook sets them, or
    DefaultTolerationSeconds): the remote API server gives the remote pod its own defaults."""
    tolerations = remote_tolerations(
        t for t in local_spec.get("tolerations") or [] if not is_node_health_toleration(t))
    # Filtered too: whoever writes the patch, remote pods never tolerate virtual nodes.
    for toleration in remote_tolerations(patch.tolerations if patch is not None else ()):
        if toleration not in tolerations:
            tolerations.append(toleration)
    return tolerations


def _apply_offloading_patch(spec: dict[str, Any], patch: OffloadingPatch | None) -> None:
    """The patch's scheduling constraints (its tolerations: `_remote_pod_tolerations`)."""
    if patch is None:
        return
    if patch.node_selector:
        spec["nodeSelector"] = dict(patch.node_selector)
    node_affinity = (patch.affinity or {}).get("nodeAffinity")
    if node_affinity:
        spec.setdefault("affinity", {})["nodeAffinity"] = copied(node_affinity)


def remote_runtime_class(local_pod: Mapping[str, Any], patch: OffloadingPatch | None
                         ) -> str | None:
    """The remote pod's runtimeClassName: the pod's `liqo.io/remote-runtime-class-name`, else
    the offloadingPatch's, else none. The provider's podPolicy.allowedRuntimeClasses decides
    whether the pod may use it."""
    return (_annotations(local_pod).get(REMOTE_RUNTIME_CLASS_NAME_ANNOTATION)
            or (patch.runtime_class_name if patch is not None else None) or None)


def _remote_service_account(local_pod: Mapping[str, Any]) -> str:
    """The twin namespace's account a pod reaching the provider's API server runs as."""
    return (_annotations(local_pod).get(REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION)
            or service_account_name(local_pod.get("spec") or {}))


def _remote_containers(local_pod: Mapping[str, Any], key: str, support: str,
                       config: PodForgeConfig) -> list[dict[str, Any]]:
    """The pod's containers of `key` (containers, initContainers, ephemeralContainers) as the
    remote pod runs them (`_remote_container`), for its `api_server_support`."""
    local_spec: Mapping[str, Any] = local_pod.get("spec") or {}
    apiserver_env = (
        _home_apiserver_env(config.home_apiserver_host, config.home_apiserver_port)
        if support == API_SERVER_SUPPORT_HOME and config.home_apiserver_host
        else []
    )
    account = (None if support == API_SERVER_SUPPORT_REMOTE
               else service_account_name(local_spec))
    return [_remote_container(container, account, apiserver_env,
                              clear_host_ports=bool(local_spec.get("hostNetwork")))
            for container in local_spec.get(key) or []]


def remote_pod_spec(local_pod: Mapping[str, Any], config: PodForgeConfig) -> ForgedPod:
    """The remote pod's spec for `local_pod` (a home Pod as a dict), with warnings."""
    local_spec: Mapping[str, Any] = local_pod.get("spec") or {}
    metadata: Mapping[str, Any] = local_pod.get("metadata") or {}
    pod_name = str(metadata.get("name", ""))
    spec: dict[str, Any] = {
        key: copied(local_spec[key]) for key in COPIED_SPEC_FIELDS if key in local_spec
    }
    spec.update(dict.fromkeys(FORCED_OFF_SPEC_FIELDS, False))
    spec["tolerations"] = _remote_pod_tolerations(local_spec, config.offloading_patch)
    support, support_warning = api_server_support(local_pod, config.enable_apiserver_support)
    warnings = [support_warning] if support_warning else []
    remote_api = support == API_SERVER_SUPPORT_REMOTE
    if remote_api:
        # Liqo's `remote`: the remote pod is the provider's pod of an account there; the
        # ServiceAccount admission of the provider mounts its token if the pod does not.
        spec["serviceAccountName"] = _remote_service_account(local_pod)
        spec["automountServiceAccountToken"] = True
    else:
        # The home service account does not exist remotely; its token comes through a Secret.
        spec["automountServiceAccountToken"] = False

    for key in ("containers", "initContainers"):
        if key in spec:
            spec[key] = _remote_containers(local_pod, key, support, config)
    if ephemeral := _remote_containers(local_pod, EPHEMERAL_CONTAINERS, support, config):
        spec[EPHEMERAL_CONTAINERS] = ephemeral
    if "volumes" in spec and not remote_api:
        token_secret = (support == API_SERVER_SUPPORT_HOME
                        and bool(projected_service_account_tokens(local_pod)))
        spec["volumes"] = _remote_volumes(local_spec.get("volumes") or [], pod_name, token_secret)

    _apply_offloading_patch(spec, config.offloading_patch)
    runtime_class = remote_runtime_class(local_pod, config.offloading_patch)
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    labels = without_keys(metadata.get("labels"), config.reflection.labels_not_reflected)
    anti_affinity, anti_affinity_warnings = _pod_anti_affinity(local_pod, labels)
    warnings.extend(anti_affinity_warnings)
    if anti_affinity is not None:
        spec.setdefault("affinity", {})["podAntiAffinity"] = anti_affinity
    if not spec["tolerations"]:
        del spec["tolerations"]
    return ForgedPod(spec=spec, warnings=warnings)


def shadow_pod(
    local_pod: Mapping[str, Any], remote_namespace: str, config: PodForgeConfig
) -> dict[str, Any]:
    """The ShadowPod asking the remote enforcer for `local_pod`: same name, twin namespace, the
    pod's labels and annotations minus the skip lists, the ownership labels, the remote spec.
    (The spec's warnings come with `shadow_pod_with_warnings`.)"""
    return shadow_pod_with_warnings(local_pod, remote_namespace, config)[0]


def shadow_pod_with_warnings(
    local_pod: Mapping[str, Any], remote_namespace: str, config: PodForgeConfig
) -> tuple[dict[str, Any], list[str]]:
    """`shadow_pod`, and what could not be honoured in its spec (`remote_pod_spec`'s warnings,
    for Events on the home pod), from one forge."""
    forged = remote_pod_spec(local_pod, config)
    return {
        "apiVersion": SHADOWPOD.api_version,
        "kind": SHADOWPOD.kind,
        "metadata": remote_metadata(local_pod, remote_namespace, config.reflection),
        "spec": {"pod": forged.spec},
    }, forged.warnings


def _active_deadline_update(current: Any, desired: Any) -> Any:
    """activeDeadlineSeconds may be set or lowered on a running pod, never raised or unset."""
    if desired is None:
        return current
    if current is None or desired < current:
        return desired
    return current


_IMAGED_CONTAINERS = ("containers", "initContainers")


def _updatable_spec(local_spec: Mapping[str, Any], config: PodForgeConfig) -> dict[str, Any]:
    """The fields of `remote_pod_spec` whose changes a running pod accepts, without forging
    the rest: the containers' names and images (the forge keeps both), activeDeadlineSeconds
    (copied) and the tolerations (ephemeral containers: `shadow_pod_ephemeral_patch`)."""
    updatable: dict[str, Any] = {
        key: [{"name": c.get("name"), "image": c.get("image")} for c in local_spec.get(key) or []]
        for key in _IMAGED_CONTAINERS
    }
    updatable["activeDeadlineSeconds"] = local_spec.get("activeDeadlineSeconds")
    updatable["tolerations"] = _remote_pod_tolerations(local_spec, config.offloading_patch)
    return updatable


def _accepted_changes(
    current_remote_spec: Mapping[str, Any], desired: Mapping[str, Any]
) -> dict[str, Any] | None:
    """`current_remote_spec` with the changes of the forged spec `desired` (or its
    `_updatable_spec`) that a running pod accepts, or None when there are none. Copied only
    when something changes: this runs at each status change of every offloaded pod."""
    images: list[tuple[str, int, Any]] = []
    for key in _IMAGED_CONTAINERS:
        # A pod's containers cannot be added or removed, so they pair up by position.
        pairs = zip(current_remote_spec.get(key) or [], desired.get(key) or [], strict=False)
        for index, (container, wanted) in enumerate(pairs):
            image = wanted.get("image")
            if (container.get("name") == wanted.get("name") and image is not None
                    and container.get("image") != image):
                images.append((key, index, image))
    current_deadline = current_remote_spec.get("activeDeadlineSeconds")
    deadline = _active_deadline_update(current_deadline, desired.get("activeDeadlineSeconds"))
    current_tolerations = list(current_remote_spec.get("tolerations") or [])
    added = [t for t in desired.get("tolerations") or [] if t not in current_tolerations]
    if not images and deadline == current_deadline and not added:
        return None
    updated = copied(dict(current_remote_spec))
    for key, index, image in images:
        updated[key][index]["image"] = image
    if deadline is not None:
        updated["activeDeadlineSeconds"] = deadline
    if added:
        updated["tolerations"] = current_tolerations + copied(added)
    return None if updated == current_remote_spec else updated


def added_ephemeral_containers(current: Mapping[str, Any], local_pod: Mapping[str, Any],
                               config: PodForgeConfig) -> list[dict[str, Any]]:
    """The home pod's ephemeral containers (`kubectl debug`) the ShadowPod `current` lacks, by
    name, forged as the pod's containers are."""
    if not (local_pod.get("spec") or {}).get(EPHEMERAL_CONTAINERS):
        return []  # most pods: nothing forged
    present = {c.get("name") for c in
               ((current.get("spec") or {}).get("pod") or {}).get(EPHEMERAL_CONTAINERS) or []}
    support = api_server_support(local_pod, config.enable_apiserver_support)[0]
    return [c for c in _remote_containers(local_pod, EPHEMERAL_CONTAINERS, support, config)
            if c.get("name") not in present]


def shadow_pod_ephemeral_patch(current: Mapping[str, Any],
                               added: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The merge patch adding the ephemeral containers `added` to the ShadowPod `current`
    (after those it has: the API server lets none be changed or removed), guarded by its
    resourceVersion; None when there are none. Its own write: a container the provider's
    policy refuses must not hold back the pod's other changes."""
    metadata = current.get("metadata") or {}
    if not added or metadata.get("deletionTimestamp"):
        return None
    have = ((current.get("spec") or {}).get("pod") or {}).get(EPHEMERAL_CONTAINERS) or []
    return {"metadata": {"resourceVersion": metadata.get("resourceVersion")},
            "spec": {"pod": {EPHEMERAL_CONTAINERS: [*copied(list(have)), *copied(added)]}}}


def _map_patch(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, Any]:
    """The merge patch turning the labels (or annotations) `current` into `wanted`."""
    patch: dict[str, Any] = {k: v for k, v in wanted.items() if current.get(k) != v}
    patch.update({k: None for k in current if k not in wanted})
    return patch


def shadow_pod_patch(
    current: Mapping[str, Any], local_pod: Mapping[str, Any], config: PodForgeConfig
) -> dict[str, Any] | None:
    """The merge patch bringing the ShadowPod `current` to the home pod: the labels and
    annotations `shadow_pod` gives it (keys it no longer gives removed) and the spec changes a
    running pod accepts (container images, activeDeadlineSeconds lowered or set, tolerations
    added: the API server refuses other changes to a pod, which a new pod picks up), guarded
    by `current`'s resourceVersion. Ephemeral containers: `shadow_pod_ephemeral_patch`.
    None when there is nothing to write, or while the ShadowPod is being deleted."""
    metadata = current.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return None
    # What `shadow_pod` would give it, but only the parts compared: forging the whole spec at
    # each status change of every pod was most of the pods' reconciles.
    desired_metadata = remote_metadata(local_pod, str(metadata.get("namespace", "")),
                                       config.reflection)
    patch: dict[str, Any] = {}
    spec = _accepted_changes((current.get("spec") or {}).get("pod") or {},
                             _updatable_spec(local_pod.get("spec") or {}, config))
    if spec is not None:
        patch["spec"] = {"pod": spec}
    for key in ("labels", "annotations"):
        current_map = metadata.get(key) or {}
        if TRACEPARENT_ANNOTATION in current_map:  # the agent's trace, not the pod's annotation
            current_map = {k: v for k, v in current_map.items() if k != TRACEPARENT_ANNOTATION}
        change = _map_patch(current_map, desired_metadata.get(key) or {})
        if change:
            patch.setdefault("metadata", {})[key] = change
    if not patch:
        return None
    patch.setdefault("metadata", {})["resourceVersion"] = metadata.get("resourceVersion")
    return patch


# --- remote to home: the status ----------------------------------------------------------------


class StatusForgeConfig(BaseModel):
    """How remote pod status reads at home: `node_ip` is the agent's own IP (the virtual node's
    address); `pod_cidr` → `remapped_pod_cidr` is the remapping the network fabric applies to the
    provider's pod CIDR when it overlaps (both or neither)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_ip: str
    pod_cidr: str | None = None
    remapped_pod_cidr: str | None = None

    @model_validator(mode="after")
    def _remap_is_complete(self) -> StatusForgeConfig:
        if (self.pod_cidr is None) != (self.remapped_pod_cidr is None):
            raise ValueError("pod_cidr and remapped_pod_cidr go together")
        self.pod_ip_remap  # noqa: B018 -- validates the CIDRs (ValueError)
        return self

    @property
    def pod_ip_remap(self) -> CidrRemap | None:
        if self.pod_cidr is None or self.remapped_pod_cidr is None:
            return None
        return CidrRemap(self.pod_cidr, self.remapped_pod_cidr)


def local_pod_status(
    remote_status: Mapping[str, Any], carried_restarts: Mapping[str, int],
    config: StatusForgeConfig
) -> dict[str, Any]:
    """The home pod's status from the remote pod's.

    - podIP and every podIPs entry are remapped from the remote pod CIDR (addresses outside it,
      e.g. of the other IP family, stay as they are);
    - hostIP/hostIPs are the agent's IP: the pod runs "on" the virtual node;
    - each container's restartCount is the remote count plus what the enforcer carried over
      from the remote pods it replaced (ShadowPod.status.carriedRestarts: their restarts, plus
      one per replacement). A recreated pod starts again from 0 restarts; the carried figure
      keeps the home count from going down. Both terms are read from the remote side every
      time, so the result is a function of remote state only: an agent restart recomputes the
      same number and never counts a recreation twice.
    """
    status = copied(dict(remote_status))
    remap = config.pod_ip_remap
    if status.get("podIP"):
        status["podIP"] = remap_address(str(status["podIP"]), remap)
    if status.get("podIPs"):
        status["podIPs"] = [
            {**entry, "ip": remap_address(str(entry.get("ip", "")), remap)}
            for entry in status["podIPs"]
        ]
    status["hostIP"] = config.node_ip
    status["hostIPs"] = [{"ip": config.node_ip}]
    for container in status.get("containerStatuses") or []:
        container["restartCount"] = (int(container.get("restartCount") or 0)
                                     + int(carried_restarts.get(str(container.get("name")), 0)))
    return status


def offloading_backoff_status(local_pod: Mapping[str, Any], now: datetime,
                              message: str | None = None,
                              reason: str = OFFLOADING_BACKOFF_REASON) -> dict[str, Any]:
    """The status of a pod bound to the virtual node that is held back: Pending with `reason`
    (OffloadingBackOff) and `message` (by default: its namespace is not offloaded),
    its true conditions turned false with the same reason, no container ready (Liqo's
    LocalRejectedPodStatus)."""
    metadata = local_pod.get("metadata") or {}
    status = copied(dict(local_pod.get("status") or {}))
    message = message or (
        f"namespace {metadata.get('namespace', '')!r} is not offloaded to this virtual node's "
        f"cluster: create a NamespaceOffloading there, or keep the pod off virtual nodes"
    )
    status.update(phase="Pending", reason=reason, message=message)
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True":
            condition.update(status="False", reason=reason, lastTransitionTime=rfc3339(now))
    for container in status.get("containerStatuses") or []:
        container["ready"] = False
    return status


QUOTA_NOT_COUNTED_REASON = "QuotaNotCountedYet"
_QUOTA_STATUS_UNKNOWN = "status unknown for quota"
"""kube-apiserver's quota admission refusing an object its quota controller has not counted
yet (the quota's status lacks the resource)."""


def shadow_pod_refusal(reason: str, message: str) -> tuple[str, str]:
    """The reason and message a refused ShadowPod creation is reported with: the API server's,
    but a quota whose status does not count ShadowPods yet says so and that it passes. On a
    fresh install kube-controller-manager's quota controller finds the ShadowPod kind at its
    next discovery (every 30 s) and counts it in the quota at the quota's next
    recalculation: a change of a kind the quota counts in that namespace, or the full resync
    (--resource-quota-sync-period, 5 min by default)."""
    if _QUOTA_STATUS_UNKNOWN not in message:
        return reason, message
    return QUOTA_NOT_COUNTED_REASON, (
        f"the provider's quota controller has not counted this kind in the namespace's quota "
        f"yet, which clears by itself (it discovers a newly installed kind within 30 s, then "
        f"recounts the quota at its next resync); retried with backoff meanwhile: {message}")


def remote_creation_failed_condition(reason: str, message: str, now: datetime) -> dict[str, Any]:
    """The home pod condition saying the remote pod could not be created (quota denied, invalid
    spec, ...), so the pod is not left silently Pending."""
    return {
        "type": REMOTE_CREATION_FAILED_CONDITION,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now),
    }


def remote_pod_refused_condition(shadow_status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The home pod's RemoteCreationFailed condition while the remote API server refuses the
    ShadowPod's pod (quota, Pod Security, RuntimeClass, invalid spec: the enforcer records it as
    the ShadowPod's `PodCreated` False), or None. Its time is the ShadowPod condition's, so the
    same refusal reported again reads the same."""
    for condition in shadow_status.get("conditions") or []:
        if condition.get("type") == POD_CREATED_CONDITION and condition.get("status") == "False":
            return {
                "type": REMOTE_CREATION_FAILED_CONDITION,
                "status": "True",
                "reason": condition.get("reason") or "CreationFailed",
                "message": f"the remote pod cannot be created: {condition.get('message', '')}",
                "lastTransitionTime": condition.get("lastTransitionTime"),
            }
    return None


def with_condition(status: Mapping[str, Any], condition: Mapping[str, Any]) -> dict[str, Any]:
    """`status` with `condition` set in place of any of the same type. An unchanged status keeps
    its lastTransitionTime, so re-reporting the same failure is not a transition; fields
    `condition` does not name keep theirs (the API server answers every pod condition with a
    `lastProbeTime`, null when unset: without it each report would differ from the last)."""
    updated = copied(dict(status))
    conditions = updated.get("conditions") or []
    new = copied(dict(condition))
    for index, existing in enumerate(conditions):
        if existing.get("type") == new.get("type"):
            if existing.get("status") == new.get("status"):
                new["lastTransitionTime"] = existing.get("lastTransitionTime")
            conditions[index] = {**existing, **new}
            break
    else:
        conditions.append(new)
    updated["conditions"] = conditions
    return updated


_TRANSIENT_STATUS_FIELDS = ("reason", "message")
"""Status fields a previous state (OffloadingBackOff) may have set and the remote status lacks."""


def status_from_shadow(
    local_status: Mapping[str, Any], shadow_status: Mapping[str, Any], config: StatusForgeConfig
) -> dict[str, Any] | None:
    """The home pod's status as its ShadowPod's status tells it (over `local_status`, see
    `merged_status`): the remote pod's status (`local_pod_status`; the reason and message a
    back-off left cleared), and a remote pod the remote API server refuses as the
    RemoteCreationFailed condition (`remote_pod_refused_condition`). None while it tells
    neither."""
    remote_status = shadow_status.get("podStatus")
    refused = remote_pod_refused_condition(shadow_status)
    if not remote_status and refused is None:
        return None
    if remote_status:
        status = local_pod_status(remote_status, shadow_status.get("carriedRestarts") or {},
                                  config)
        for key in _TRANSIENT_STATUS_FIELDS:
            status.setdefault(key, None)
    else:
        status = copied(dict(local_status))
    return status if refused is None else with_condition(status, refused)


StatusField = tuple[str, ...]
"""A status field by its keys from the top of the status; "*" stands for every item of a list
(("containerStatuses", "*", "user"))."""


def unkept_status_fields(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> set[StatusField]:
    """The fields of a status written that the API server's answer (`stored`) lacks: fields its
    schema does not have or a feature gate turns off, which it drops from every write
    (status.hostIPs before Kubernetes 1.28, and on 1.28 unless its alpha PodHostIPs gate is
    on; the container status fields a newer remote kubelet reports). Only fields sent with
    a value count: an empty one is what the API's omitempty leaves out, not a field the
    server lacks."""
    unkept: set[StatusField] = set()

    def walk(sent_value: Any, stored_value: Any, at: StatusField) -> None:
        if isinstance(sent_value, Mapping) and isinstance(stored_value, Mapping):
            for key, value in sent_value.items():
                if key not in stored_value:
                    if value:
                        unkept.add((*at, key))
                else:
                    walk(value, stored_value[key], (*at, key))
        elif isinstance(sent_value, list) and isinstance(stored_value, list):
            for sent_item, stored_item in zip(sent_value, stored_value, strict=False):
                walk(sent_item, stored_item, (*at, "*"))

    walk(sent, stored, ())
    return unkept


def _without_field(value: Any, path: StatusField) -> Any:
    head, rest = path[0], path[1:]
    if head == "*":
        return [_without_field(item, rest) for item in value] if isinstance(value, list) else value
    if not isinstance(value, Mapping) or head not in value:
        return value
    if not rest:
        return {key: item for key, item in value.items() if key != head}
    return {**value, head: _without_field(value[head], rest)}


def merged_status(current: Mapping[str, Any], wanted: Mapping[str, Any],
                  unkept: Iterable[StatusField] = ()) -> dict[str, Any] | None:
    """The pod status `wanted` merged over `current` (a None value removes the field), or None
    when that is `current`: nothing to write. The fields the server does not keep (`unkept`,
    see `unkept_status_fields`) are left out of `wanted`: `current` never has them, and a
    status that kept them would differ from it at every comparison."""
    for path in unkept:
        wanted = _without_field(wanted, path)
    merged = {k: v for k, v in {**current, **wanted}.items() if v is not None}
    return None if merged == current else merged

