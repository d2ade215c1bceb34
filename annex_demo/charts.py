"""What the Helm charts would install, rendered from the charts themselves (Helm as a library),
and applied to a cluster object by object.

The demo runs the components as local processes rather than as pods, so it applies every
rendered manifest except the ones that only exist to run a pod (Deployment, its Service, its
disruption budget and its TLS Secret), points the webhook configurations at the local
processes, and reads the command line the Deployment would run.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import helm_python
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from annexctl.clusters import discovered

REPOSITORY = Path(__file__).resolve().parents[1]
CHARTS = REPOSITORY / "charts"
RELEASE = "annex"
RELEASE_NAMESPACE = "annex-system"
# Kinds that only exist to run the component as a pod (the PodDisruptionBudget guards its pods):
# the demo runs it as a process instead.
POD_ONLY_KINDS = frozenset({"Deployment", "Service", "PodDisruptionBudget"})
WEBHOOK_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})


def render(chart: str | Path, values: Mapping[str, Any] | None = None, *,
           release: str = RELEASE, namespace: str = RELEASE_NAMESPACE) -> list[dict[str, Any]]:
    """Every manifest `helm install` would create for `values` (templates only, no CRDs, no
    hooks):
    `chart` is one of the repository's charts by name, or a chart directory. The chart tests
    render through this function too."""
    return [m for m in _rendered(chart, values, release, namespace) if not _hook_events(m)]


def hooks(chart: str | Path, event: str, values: Mapping[str, Any] | None = None, *,
          release: str = RELEASE, namespace: str = RELEASE_NAMESPACE) -> list[dict[str, Any]]:
    """The chart's hook manifests for `event` (e.g. "pre-delete"), in the order Helm creates
    them (by hook weight, then kind and name)."""
    found = [m for m in _rendered(chart, values, release, namespace) if event in _hook_events(m)]
    return sorted(found, key=lambda m: (int(m["metadata"]["annotations"].get(
        "helm.sh/hook-weight", "0")), m["kind"], m["metadata"]["name"]))


def _hook_events(manifest: Mapping[str, Any]) -> list[str]:
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    return [e.strip() for e in annotations.get("helm.sh/hook", "").split(",") if e.strip()]


def _rendered(chart: str | Path, values: Mapping[str, Any] | None, release: str,
              namespace: str) -> list[dict[str, Any]]:
    with helm_python.Chart.load(str(CHARTS / chart)) as loaded:
        rendered = loaded.render(dict(values or {}), name=release, namespace=namespace,
                                 is_install=True)
    # NOTES.txt and the helpers are not manifests
    return [doc for path, text in sorted(rendered.items()) if path.endswith((".yaml", ".yml"))
            for doc in yaml.safe_load_all(text) if doc]


def chart_crds(chart: str) -> list[dict[str, Any]]:
    """The CRDs the chart installs (its templates render them, among the other manifests;
    `apply` creates them first)."""
    return [yaml.safe_load(path.read_text())
            for path in sorted((CHARTS / chart / "files" / "crds").glob("*.yaml"))]


def of_kind(manifests: Iterable[Mapping[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [dict(m) for m in manifests if m.get("kind") == kind]


def for_local_processes(manifests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The manifests to apply when the components run outside the cluster."""
    return [dict(m) for m in manifests if m["kind"] not in POD_ONLY_KINDS
            and not (m["kind"] == "Secret" and m.get("type") == "kubernetes.io/tls")]


def pointed_at(webhook_configuration: Mapping[str, Any], url: str,
               ca_bundle: str) -> dict[str, Any]:
    """The chart's webhook configuration calling `url` instead of the chart's Service."""
    configuration = copy.deepcopy(dict(webhook_configuration))
    for webhook in configuration["webhooks"]:
        path = webhook["clientConfig"]["service"].get("path", "")
        webhook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca_bundle}
    return configuration


def container_command(manifests: Iterable[Mapping[str, Any]],
                      deployment_name: str) -> list[str]:
    """The command line of the Deployment's container: command + args as rendered."""
    deployment = next(m for m in of_kind(manifests, "Deployment")
                      if m["metadata"]["name"] == deployment_name)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [*container["command"], *container.get("args", [])]


def with_flags(args: Iterable[str], **flags: str) -> list[str]:
    """`args` (`--flag=value` items) with `flags` replaced or added (keyword `a_b` is --a-b)."""
    wanted = {f"--{name.replace('_', '-')}": value for name, value in flags.items()}
    kept = [a for a in args if a.split("=", 1)[0] not in wanted]
    return kept + [f"{flag}={value}" for flag, value in wanted.items()]


def apply(api_client: client.ApiClient, manifests: Iterable[Mapping[str, Any]]) -> None:
    """Create each object (kept when it exists), CRDs first and waited for, namespaces next."""
    dynamic = discovered(api_client)  # a cluster made again at an address is new
    ordered = sorted(manifests, key=lambda m: (m["kind"] != "CustomResourceDefinition",
                                               m["kind"] != "Namespace"))
    for manifest in ordered:
        if manifest["kind"] != "CustomResourceDefinition":
            _ensure_namespace(api_client, manifest)
        resource = _resource(dynamic, manifest)
        try:
            resource.create(body=dict(manifest),
                            namespace=manifest["metadata"].get("namespace"))
        except ApiException as error:
            if error.status != 409:
                raise


def _ensure_namespace(api_client: client.ApiClient, manifest: Mapping[str, Any]) -> None:
    """`helm install --create-namespace`: the release namespace exists before its objects."""
    namespace = manifest["metadata"].get("namespace")
    if not namespace:
        return
    try:
        core: Any = client.CoreV1Api(api_client)  # takes a dict body, unlike its hints say
        core.create_namespace({"metadata": {"name": namespace}})
    except ApiException as error:
        if error.status != 409:
            raise


def _resource(dynamic: DynamicClient, manifest: Mapping[str, Any]) -> Any:
    """The API resource serving the manifest's kind; a CRD just created may take a moment."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return dynamic.resources.get(api_version=manifest["apiVersion"],
                                         kind=manifest["kind"])
        except ResourceNotFoundError:
            if time.monotonic() > deadline:
                raise
            dynamic.resources.invalidate_cache()
            time.sleep(0.1)
