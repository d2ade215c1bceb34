"""Pod offloading: the home pod's spec as the remote pod's, in the ShadowPod that asks for it
(Liqo's pkg/virtualKubelet/forge/pods.go is the model). Beside it: where the pod may run
(tolerations, offloadingPatch, anti-affinity presets: `shared.forge.pod_placement`), which API
server the pod reaches and the tokens it projects (`shared.forge.pod_tokens`), the ShadowPod's
later changes (`shared.forge.shadow_pod_patch`), the remote status as the home pod's
(`shared.forge.pod_status`).

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from shared.api.offloading_patch import OffloadingPatch
from shared.api.shadowpod import SHADOWPOD
from shared.forge import pod_placement as placement
from shared.forge.configmap import remote_configmap_name
from shared.forge.json_copy import copied
from shared.forge.metadata import ReflectionConfig, annotations_of, remote_metadata, without_keys
from shared.forge.pod_tokens import (
    API_SERVER_SUPPORT_HOME,
    api_server_support,
    projected_service_account_tokens,
    service_account_token_key,
    service_account_token_secret_name,
)
from shared.wellknown import (
    API_SERVER_SUPPORT_REMOTE,
    REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION,
    TOKEN_SECRET_NAMESPACE_KEY,
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


def _remote_service_account(local_pod: Mapping[str, Any]) -> str:
    """The twin namespace's account a pod reaching the provider's API server runs as."""
    return (annotations_of(local_pod).get(REMOTE_SERVICE_ACCOUNT_NAME_ANNOTATION)
            or service_account_name(local_pod.get("spec") or {}))


def remote_containers(local_pod: Mapping[str, Any], key: str, support: str,
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
    spec["tolerations"] = placement.remote_pod_tolerations(local_spec, config.offloading_patch)
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
            spec[key] = remote_containers(local_pod, key, support, config)
    if ephemeral := remote_containers(local_pod, EPHEMERAL_CONTAINERS, support, config):
        spec[EPHEMERAL_CONTAINERS] = ephemeral
    if "volumes" in spec and not remote_api:
        token_secret = (support == API_SERVER_SUPPORT_HOME
                        and bool(projected_service_account_tokens(local_pod)))
        spec["volumes"] = _remote_volumes(local_spec.get("volumes") or [], pod_name, token_secret)

    placement.apply_offloading_patch(spec, config.offloading_patch)
    runtime_class = placement.remote_runtime_class(local_pod, config.offloading_patch)
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    labels = without_keys(metadata.get("labels"), config.reflection.labels_not_reflected)
    anti_affinity, anti_affinity_warnings = placement.pod_anti_affinity(local_pod, labels)
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
