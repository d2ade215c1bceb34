"""The sample application the demo offloads: a ConfigMap, a Deployment that mounts it and a
Service in front of it, in a namespace extended to the remote cluster."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from shared.api.namespace_offloading import NAMESPACE_OFFLOADING, NAMESPACE_OFFLOADING_NAME
from shared.wellknown import SCHEDULING_ENABLED_LABEL

NAMESPACE = "demo"
APP = "web"
CONFIGMAP = "web-config"
APP_LABELS = {"app": APP}


def configmap(greeting: str) -> dict[str, Any]:
    return {"metadata": {"name": CONFIGMAP, "labels": APP_LABELS},
            "data": {"greeting": greeting}}


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"name": APP, "labels": APP_LABELS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": APP_LABELS},
            "template": {
                "metadata": {"labels": APP_LABELS},
                "spec": {
                    "containers": [{
                        "name": "web", "image": "nginx:1.27",
                        "ports": [{"containerPort": 80, "name": "http"}],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": CONFIGMAP}}],
                },
            },
        },
    }


def service() -> dict[str, Any]:
    return {"metadata": {"name": APP, "labels": APP_LABELS},
            "spec": {"selector": APP_LABELS, "ports": [{"port": 80, "targetPort": "http"}]}}


def namespace_offloading(pod_offloading_strategy: str) -> dict[str, Any]:
    d = NAMESPACE_OFFLOADING
    return {"apiVersion": d.api_version, "kind": d.kind,
            "metadata": {"name": NAMESPACE_OFFLOADING_NAME, "namespace": NAMESPACE},
            "spec": {"podOffloadingStrategy": pod_offloading_strategy}}


def offload_namespace(api_client: client.ApiClient) -> None:
    """The user's first step: the namespace and its NamespaceOffloading."""
    core: Any = client.CoreV1Api(api_client)  # takes dict bodies, unlike its type hints say
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    d = NAMESPACE_OFFLOADING
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        d.group, d.version, NAMESPACE, d.plural, namespace_offloading("Remote"))


def scheduling_enabled(api_client: client.ApiClient) -> bool:
    """The agent has labelled the namespace: from now on the pod webhook applies the
    offloading strategy to new pods (pods created before it would stay local)."""
    labels = client.CoreV1Api(api_client).read_namespace(NAMESPACE).metadata.labels  # type: ignore[union-attr]
    return (labels or {}).get(SCHEDULING_ENABLED_LABEL) == "true"


def deploy(api_client: client.ApiClient, replicas: int, greeting: str) -> None:
    """The application: a ConfigMap, a Service and a Deployment."""
    core: Any = client.CoreV1Api(api_client)  # takes dict bodies, unlike its type hints say
    apps: Any = client.AppsV1Api(api_client)
    core.create_namespaced_config_map(NAMESPACE, configmap(greeting))
    core.create_namespaced_service(NAMESPACE, service())
    apps.create_namespaced_deployment(NAMESPACE, deployment(replicas))


def offloading_status(api_client: client.ApiClient) -> dict[str, Any]:
    d = NAMESPACE_OFFLOADING
    found: Any = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        d.group, d.version, NAMESPACE, d.plural, NAMESPACE_OFFLOADING_NAME)
    return dict(found.get("status") or {})


def edit_greeting(api_client: client.ApiClient, greeting: str) -> None:
    client.CoreV1Api(api_client).patch_namespaced_config_map(
        CONFIGMAP, NAMESPACE, {"data": {"greeting": greeting}})


def scale(api_client: client.ApiClient, replicas: int) -> None:
    client.AppsV1Api(api_client).patch_namespaced_deployment_scale(
        APP, NAMESPACE, {"spec": {"replicas": replicas}})
