"""Chart test helpers shared by both charts' tests: render with helm-python-sdk (Helm as a
library, no binary), lint, check values against the schema, and validate every rendered manifest
(built-in kinds with kubernetes-validate, annex's kinds against the CRDs in crds/)."""

from __future__ import annotations

import glob
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import yaml

from annex_demo import charts
from kubesim.schema import apply_defaults, validate

ROOT = Path(__file__).resolve().parents[2]
CRDS_DIR = ROOT / "crds"
KUBE_VERSION = "1.31.0"
RELEASE = "annex"
NAMESPACE = "annex-system"


@dataclass(frozen=True)
class ChartCase:
    """What the checks both charts must pass (tests/charts/test_both_charts.py) need to know
    about one chart."""

    name: str
    chart: Path
    minimal: Mapping[str, Any]
    full: Mapping[str, Any]
    rules: Sequence[Mapping[str, Any]]  # the ClusterRole rules the component's code declares
    probe_port: str  # the named container port /healthz and /readyz answer on
    webhook_kind: str  # MutatingWebhookConfiguration or ValidatingWebhookConfiguration
    webhook_path: str
    # More value sets that must render valid manifests, by test id.
    renderings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    external_kinds: Sequence[tuple[str, str]] = ()  # see validation_errors
    # Whom the ClusterRole is bound to; None: the chart's only ServiceAccount.
    cluster_role_subject: Mapping[str, Any] | None = None
    # The component's ClusterRoleBinding; None: the chart's only one.
    cluster_role_binding: str | None = None


def load(chart_dir: Path) -> helm_python.Chart:
    return helm_python.Chart.load(str(chart_dir))


def render(chart_dir: Path, values: Mapping[str, Any] | None = None, *,
           release: str = RELEASE, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every manifest the chart's templates produce for `values` (an install), parsed."""
    return charts.render(chart_dir, values, release=release, namespace=namespace)


def only(manifests: Iterable[Mapping[str, Any]], kind: str,
         name: str | None = None) -> dict[str, Any]:
    """The single manifest of `kind` (and `name`): fails when there are none or several."""
    found = [dict(m) for m in manifests if m.get("kind") == kind
             and (name is None or m["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def lint_problems(chart_dir: Path, values: Mapping[str, Any] | None = None) -> list[str]:
    """Lint warnings and errors (informational messages such as "icon is recommended" pass)."""
    report = helm_python.lint(str(chart_dir), dict(values or {}), strict=True,
                              kube_version=f"v{KUBE_VERSION}")
    return [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]


def schema_error(chart_dir: Path, values: Mapping[str, Any]) -> str | None:
    """The schema's complaint about `values`, or None when they are valid."""
    with load(chart_dir) as chart:
        try:
            chart.validate_schema(dict(values))
        except helm_python.HelmValuesError as error:
            return str(error)
    return None


def crd_schemas(directory: Path = CRDS_DIR) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → openAPIV3Schema for every CRD version in `directory`."""
    schemas = {}
    for path in glob.glob(str(directory / "*.yaml")):
        with open(path) as stream:
            crd = yaml.safe_load(stream)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schemas[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return schemas


def validation_errors(manifest: Mapping[str, Any],
                      external_kinds: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Why `manifest` would be refused: built-in kinds are checked strictly with
    kubernetes-validate, annex's kinds against their CRD schema. `external_kinds` are
    (apiVersion, kind) pairs of other projects' CRDs (e.g. cert-manager) that are not checked."""
    key = (manifest.get("apiVersion", ""), manifest.get("kind", ""))
    if key in set(external_kinds):
        return []
    schema = crd_schemas().get(key)
    if schema is not None:
        return [str(error) for error in validate(apply_defaults(dict(manifest), schema), schema)]
    try:
        kubernetes_validate.validate(dict(manifest), KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [str(error).splitlines()[0]]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"no schema for {key}"]
    return []


def chart_crds(chart_dir: Path) -> dict[str, str]:
    """File name → text of the CRDs the chart's templates install (files/crds/; Helm's crds/
    directory, installed once and never upgraded, holds none)."""
    with load(chart_dir) as chart:
        assert not chart.crds, f"{chart_dir}/crds/: Helm never upgrades these"
    return repository_crds(chart_dir / "files" / "crds")


def normalized_rules(rules: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """RBAC rules in a form that compares equal whatever the order of rules and of their lists."""
    return sorted((tuple(sorted(r.get("apiGroups", []))), tuple(sorted(r.get("resources", []))),
                   tuple(sorted(r.get("verbs", []))), tuple(sorted(r.get("resourceNames", []))))
                  for r in rules)


def repository_crds(directory: Path = CRDS_DIR) -> dict[str, str]:
    return {Path(path).name: Path(path).read_text()
            for path in glob.glob(str(directory / "*.yaml"))}
