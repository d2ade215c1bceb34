"""The test plays the remote enforcer (and the user) where the agent-only tests need it,
through the public API only."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shared.api.namespace_map import NAMESPACE_MAP
from shared.api.namespace_offloading import NAMESPACE_OFFLOADING
from shared.api.shadowpod import SHADOWPOD
from shared.ownership import ownership_labels
from tests.conftest import ClusterHandle
from tests.helpers import wait_for
from tests.home_agent.agentproc import ensure_namespace
from tests.home_agent.conftest import RunningAgent


def custom(handle: ClusterHandle) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(handle.api_client)


def offload_namespace(home: ClusterHandle, namespace: str, **spec: Any) -> None:
    d = NAMESPACE_OFFLOADING
    custom(home).create_namespaced_custom_object(d.group, d.version, namespace, d.plural, {
        "apiVersion": d.api_version, "kind": d.kind,
        "metadata": {"name": "offloading", "namespace": namespace}, "spec": spec})


def namespace_offloading(home: ClusterHandle, namespace: str) -> dict[str, Any]:
    d = NAMESPACE_OFFLOADING
    return custom(home).get_namespaced_custom_object(  # type: ignore[no-any-return]
        d.group, d.version, namespace, d.plural, "offloading")


def namespace_map(remote: ClusterHandle, agent: RunningAgent) -> dict[str, Any]:
    d = NAMESPACE_MAP
    return custom(remote).get_namespaced_custom_object(  # type: ignore[no-any-return]
        d.group, d.version, agent.tenant_namespace, d.plural, agent.home_id)


def desired_mapping(remote: ClusterHandle, agent: RunningAgent) -> dict[str, str]:
    try:
        return dict((namespace_map(remote, agent).get("spec") or {}).get("desiredMapping") or {})
    except ApiException:
        return {}


def set_current_mapping(remote: ClusterHandle, agent: RunningAgent, home_namespace: str,
                        entry: dict[str, Any] | None) -> None:
    """What the enforcer reports for one namespace (None: the entry is gone)."""
    d = NAMESPACE_MAP
    custom(remote).patch_namespaced_custom_object_status(
        d.group, d.version, agent.tenant_namespace, d.plural, agent.home_id,
        {"status": {"currentMapping": {home_namespace: entry}}})


def accept_mapping(remote: ClusterHandle, agent: RunningAgent, home_namespace: str,
                   create_twin: bool = True) -> str:
    """Wait for the agent's mapping request, create the twin namespace, report Accepted."""
    twin = wait_for(lambda: desired_mapping(remote, agent).get(home_namespace), timeout=30,
                    message=f"mapping requested for {home_namespace}")
    if create_twin:
        ensure_namespace(remote, twin, ownership_labels(agent.home_id, agent.remote_id))
    set_current_mapping(remote, agent, home_namespace,
                        {"remoteNamespace": twin, "phase": "Accepted"})
    return str(twin)


def extend(home: ClusterHandle, remote: ClusterHandle, agent: RunningAgent, namespace: str,
           create_twin: bool = True, **spec: Any) -> str:
    offload_namespace(home, namespace, **spec)
    twin = accept_mapping(remote, agent, namespace, create_twin)
    wait_for(lambda: (namespace_offloading(home, namespace).get("status") or {}).get(
        "offloadingPhase") == "Ready", timeout=30, message="namespace offloading Ready")
    return twin


def shadow_pod(remote: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    d = SHADOWPOD
    return custom(remote).get_namespaced_custom_object(  # type: ignore[no-any-return]
        d.group, d.version, namespace, d.plural, name)


def shadow_pod_exists(remote: ClusterHandle, namespace: str, name: str) -> bool:
    try:
        shadow_pod(remote, namespace, name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def report_shadow_status(remote: ClusterHandle, namespace: str, name: str,
                         status: dict[str, Any]) -> None:
    d = SHADOWPOD
    custom(remote).patch_namespaced_custom_object_status(
        d.group, d.version, namespace, d.plural, name, {"status": status})


def bound_pod(home: ClusterHandle, namespace: str, name: str, node_name: str,
              image: str = "nginx:1", spec: dict[str, Any] | None = None,
              **metadata: Any) -> dict[str, Any]:
    """A pod already bound to the virtual node, as the scheduler would leave it (`spec` adds
    to its spec)."""
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, **metadata},
            "spec": {"nodeName": node_name,
                     "containers": [{"name": "main", "image": image}],
                     "tolerations": [{"key": "virtual-node.liqo.io/not-allowed",
                                      "operator": "Exists", "effect": "NoExecute"}],
                     **(spec or {})}}
    home.core.create_namespaced_pod(namespace, body)
    return read_pod(home, namespace, name)


def read_pod(home: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    """The pod as the API serves it (a plain dict, as the agent sees it)."""
    return home.api_client.sanitize_for_serialization(  # type: ignore[no-any-return]
        home.core.read_namespaced_pod(name, namespace))


def pod_gone(home: ClusterHandle, namespace: str, name: str) -> bool:
    try:
        home.core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def node_or_none(home: ClusterHandle, name: str) -> Any:
    """The Node (the client's model), None once there is none."""
    try:
        return home.core.read_node(name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
