"""Extended resources on a node as a device plugin makes them appear: in the node's status
capacity and allocatable (the kubelet copies a plugin's device count into both). A status patch
does the same on kubesim and on a real API server, where it is also how an administrator
advertises a resource no plugin manages (a real kubelet keeps such resources)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from tests.conftest import ClusterHandle
from tests.helpers import wait_for


def schedulable_node(cluster: ClusterHandle) -> str:
    """A Ready, uncordoned node without NoSchedule/NoExecute taints: where pods can go. Waited
    for: a real node lifecycle controller lifts a new node's not-ready taint some seconds after
    the node says Ready."""
    def found() -> str | None:
        for node in cluster.core.list_node().items:
            ready = any(c.type == "Ready" and c.status == "True"
                        for c in node.status.conditions or [])
            tainted = any(t.effect in ("NoSchedule", "NoExecute") for t in node.spec.taints or [])
            if ready and not node.spec.unschedulable and not tainted:
                return str(node.metadata.name)
        return None
    return wait_for(found, timeout=60, message="a schedulable node in the cluster")


def _patch(cluster: ClusterHandle, node: str, resources: Mapping[str, Any]) -> None:
    cluster.core.patch_node_status(node, {"status": {"capacity": dict(resources),
                                                     "allocatable": dict(resources)}})


@contextlib.contextmanager
def advertised(cluster: ClusterHandle, node: str, resources: Mapping[str, str]
               ) -> Iterator[None]:
    """`node` has `resources` (e.g. {"nvidia.com/gpu": "4"}) while the block runs; they are
    removed afterwards (a merge patch's null)."""
    _patch(cluster, node, resources)
    try:
        yield
    finally:
        _patch(cluster, node, dict.fromkeys(resources))
