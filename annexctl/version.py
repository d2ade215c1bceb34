"""`annexctl version`: this CLI's version, and the version of the annex components each cluster
it can reach runs.

A component's version is read from its Deployment, which any cluster has whoever installed it:
the image tag of its container (what really runs: `--set image.tag` changes it) and the
`app.kubernetes.io/version` label (the chart's appVersion, the recommended label Helm charts
set). The charts' Deployments are found by their `app.kubernetes.io/name` label. A cluster that
cannot be reached, or read, is a note, not a failure: the client's version is always printed.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from annexctl.clusters import CliError, Cluster, connect
from annexctl.output import Report, Table
from annexctl.progress import waiting
from shared.wellknown import REMOTE_CLUSTER_ID_LABEL

DISTRIBUTION = "kube-annex"
CHART_NAMES = ("home-agent", "remote-enforcer")
"""The charts' `app.kubernetes.io/name`: the label their Deployments carry."""
NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
VERSION_LABEL = "app.kubernetes.io/version"


def client_version() -> str:
    try:
        return package_version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def image_tag(image: str) -> str:
    """The tag of an image reference (`repo[:port]/name:tag[@digest]`), `latest` when none is
    given, the digest when the image is pinned by it alone."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return digest or "latest"


def _component(deployment: dict[str, Any]) -> dict[str, Any]:
    metadata, spec = deployment["metadata"], deployment.get("spec") or {}
    labels = metadata.get("labels") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    component = labels.get(NAME_LABEL, "")
    if labels.get(COMPONENT_LABEL):
        component += f"/{labels[COMPONENT_LABEL]}"
    elif labels.get(REMOTE_CLUSTER_ID_LABEL):  # an agent, one per remote
        component += f" (remote {labels[REMOTE_CLUSTER_ID_LABEL]})"
    status = deployment.get("status") or {}
    return {
        "namespace": metadata["namespace"], "deployment": metadata["name"],
        "component": component, "versionLabel": labels.get(VERSION_LABEL),
        "images": [c.get("image", "") for c in containers],
        "version": ",".join(sorted({image_tag(c.get("image", "")) for c in containers})),
        "ready": f"{status.get('readyReplicas') or 0}/{spec.get('replicas', 1)}",
    }


def components(cluster: Cluster) -> list[dict[str, Any]]:
    """annex's Deployments in every namespace of `cluster`."""
    selector = f"{NAME_LABEL} in ({','.join(CHART_NAMES)})"
    with waiting(f"the {cluster.where}"):
        deployments = cluster.list("apps/v1", "Deployment", label_selector=selector)
    return sorted((_component(d) for d in deployments),
                  key=lambda c: (c["namespace"], c["deployment"]))


def _cluster_entry(role: str, kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": role, "server": None, "components": [], "error": None}
    try:
        cluster = connect(role, kubeconfig, context)
        entry["server"] = cluster.configuration.host
        try:
            entry["components"] = components(cluster)
        finally:
            cluster.close()
    except CliError as error:
        entry["error"] = str(error)
    return entry


def version(kubeconfig: str | None, context: str | None, remote_kubeconfig: str | None,
            remote_context: str | None, client_only: bool = False) -> Report:
    data: dict[str, Any] = {"clientVersion": client_version(), "clusters": []}
    notes = [f"Client Version: {data['clientVersion']}"]
    tables = []
    if not client_only:
        wanted = [("home", kubeconfig, context)]
        if remote_kubeconfig:
            wanted.append(("provider", remote_kubeconfig, remote_context))
        for role, path, ctx in wanted:
            entry = _cluster_entry(role, path, ctx)
            data["clusters"].append(entry)
            if entry["error"]:
                notes.append(f"No component versions from the {role} cluster: {entry['error']}")
                continue
            tables.append(Table(
                f"Components ({role} cluster {entry['server']})",
                ["NAMESPACE", "DEPLOYMENT", "COMPONENT", "VERSION", "CHART APP VERSION",
                 "READY"],
                [[c["namespace"], c["deployment"], c["component"], c["version"],
                  c["versionLabel"] or "", c["ready"]] for c in entry["components"]],
                empty="no annex Deployment found (installed by the charts, they carry "
                      f"{NAME_LABEL}={'|'.join(CHART_NAMES)})"))
    # The client's version first, as `kubectl version` prints it.
    return Report(data, tables, notes[1:], lead=notes[:1])
