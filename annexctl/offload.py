"""`annexctl offload namespace` and `annexctl unoffload namespace`: the NamespaceOffloading
(named `offloading`, one per namespace) that asks the home agents to extend a namespace.

As liqoctl, `-o json|yaml` on offload prints the resource instead of applying it.
"""

from __future__ import annotations

import time
from typing import Any

from annexctl.clusters import CliError, Cluster
from annexctl.output import Report, Table
from annexctl.progress import waiting
from annexctl.selector import cluster_selector
from shared.api.meta import ObjectMeta
from shared.api.namespace_offloading import (
    NAMESPACE_OFFLOADING,
    NAMESPACE_OFFLOADING_NAME,
    NamespaceMappingStrategy,
    NamespaceOffloading,
    NamespaceOffloadingSpec,
    OffloadingPhase,
    PodOffloadingStrategy,
)
from shared.forge.namespace import remote_namespace_name

_ANY_CLUSTER = "placeholder"  # the DefaultName suffix does not matter for validation


def namespace_offloading(namespace: str, pod_strategy: PodOffloadingStrategy,
                         mapping: NamespaceMappingStrategy, remote_namespace: str | None,
                         selectors: list[str]) -> dict[str, Any]:
    """The NamespaceOffloading manifest; CliError for an invalid combination (the checks the
    agent would otherwise report later as a condition)."""
    if mapping == NamespaceMappingStrategy.SELECTED_NAME and not remote_namespace:
        raise CliError("--remote-namespace-name is required with the SelectedName strategy")
    if remote_namespace and mapping != NamespaceMappingStrategy.SELECTED_NAME:
        raise CliError("--remote-namespace-name is only used with the SelectedName strategy")
    try:
        remote_namespace_name(namespace, mapping, _ANY_CLUSTER, remote_namespace)
        selector = cluster_selector(selectors)
    except ValueError as error:
        raise CliError(str(error)) from None
    offloading = NamespaceOffloading(
        metadata=ObjectMeta(name=NAMESPACE_OFFLOADING_NAME, namespace=namespace),
        spec=NamespaceOffloadingSpec(
            namespace_mapping_strategy=mapping, remote_namespace_name=remote_namespace,
            pod_offloading_strategy=pod_strategy, cluster_selector=selector))
    manifest = offloading.to_wire()
    manifest.pop("status", None)
    return manifest


def _conditions_text(status: dict[str, Any]) -> str:
    return "; ".join(
        f"{cluster}: {c.get('reason')}: {c.get('message')}"
        for cluster, conditions in sorted((status.get("remoteNamespacesConditions") or {}).items())
        for c in conditions if c.get("type") == "Ready") or "no cluster has reported yet"


def wait_ready(home: Cluster, namespace: str, timeout: float) -> dict[str, Any]:
    """The NamespaceOffloading's status once its phase is Ready; CliError when the agents
    report a failure or `timeout` seconds pass (with what they reported)."""
    with waiting(f"namespace {namespace}'s offloading to be Ready"):
        return _wait_ready(home, namespace, timeout)


def _wait_ready(home: Cluster, namespace: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = home.get(NAMESPACE_OFFLOADING.api_version, NAMESPACE_OFFLOADING.kind,
                           NAMESPACE_OFFLOADING_NAME, namespace) or {}
        status = current.get("status") or {}
        phase = status.get("offloadingPhase")
        if phase == OffloadingPhase.READY:
            return dict(status)
        if phase in (OffloadingPhase.ALL_FAILED, OffloadingPhase.SOME_FAILED):
            raise CliError(f"namespace {namespace}: offloading {phase}: "
                           f"{_conditions_text(status)}")
        if time.monotonic() >= deadline:
            raise CliError(f"namespace {namespace}: offloading not Ready after {timeout:g}s "
                           f"(phase {phase or 'not reported'}): {_conditions_text(status)}; is a "
                           "home agent running and its remote selected?")
        time.sleep(0.5)


def offload(home: Cluster, manifest: dict[str, Any], timeout: float = 0) -> Report:
    namespace = manifest["metadata"]["namespace"]
    if home.get("v1", "Namespace", namespace) is None:
        raise CliError(f"{home.where}: namespace {namespace} not found")
    action = home.ensure(manifest)
    spec = manifest["spec"]
    status = wait_ready(home, namespace, timeout) if timeout > 0 else {}
    row = [namespace, spec["podOffloadingStrategy"], spec["namespaceMappingStrategy"],
           status.get("remoteNamespaceName") or spec.get("remoteNamespaceName", ""),
           _selector_text(spec["clusterSelector"]), action]
    if status:
        notes = [f"Namespace {namespace} offloaded: {_conditions_text(status)}"]
    else:
        notes = [f"Namespace {namespace} offloading {action}: the home agents extend it to the "
                 "selected clusters; `annexctl status` shows its progress (or use --timeout)."]
    return Report({"namespaceOffloading": manifest, "action": action, "status": status},
                  [Table("NamespaceOffloading", ["NAMESPACE", "PODS", "MAPPING", "REMOTE NAME",
                                                 "CLUSTERS", "ACTION"], [row])], notes)


def unoffload(home: Cluster, namespace: str) -> Report:
    deleted = home.delete(NAMESPACE_OFFLOADING.api_version, NAMESPACE_OFFLOADING.kind,
                          NAMESPACE_OFFLOADING_NAME, namespace)
    if not deleted:
        raise CliError(f"{home.where}: namespace {namespace} is not offloaded "
                       f"(no NamespaceOffloading {NAMESPACE_OFFLOADING_NAME!r})")
    notes = [f"Namespace {namespace} unoffloaded: its twin namespaces are deleted and its "
             "offloaded pods are rescheduled locally by their controllers. A twin that holds "
             "claims is kept, with their data, until they are deleted or spec.deleteRemoteClaims "
             "is set on the NamespaceOffloading (annexctl status lists them)."]
    return Report({"namespace": namespace, "action": "deleted"}, [], notes)


def _selector_text(selector: dict[str, Any]) -> str:
    """A clusterSelector back in selector syntax, terms joined by ' OR '."""
    terms = []
    for term in selector.get("nodeSelectorTerms") or []:
        parts = []
        for requirement in term.get("matchExpressions") or []:
            key, operator = requirement["key"], requirement["operator"]
            values = ",".join(requirement.get("values") or [])
            parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                          "Exists": key, "DoesNotExist": f"!{key}"}.get(
                              operator, f"{key} {operator} ({values})"))
        terms.append(", ".join(parts))
    return " OR ".join(terms) if terms else "all"
