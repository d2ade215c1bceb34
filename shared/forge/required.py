"""What a pod cannot start without: the ConfigMaps and Secrets it mounts or reads in its
environment (`required_objects`), whose copies its ShadowPod waits for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
