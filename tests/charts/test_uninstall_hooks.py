"""Both charts' pre-delete hooks: `annexctl uninstall` as a Job with an identity of its own,
made before it (hook weights) and deleted once it succeeded, holding exactly the rights the
cleanup uses."""

from __future__ import annotations

from typing import Any

import pytest

from annex_demo.charts import hooks, of_kind, render
from annexctl.cli import build_parser
from annexctl.uninstall import HOME_CLUSTER_RULES, HOME_NAMESPACE_RULES, PROVIDER_CLUSTER_RULES
from tests.charts.helm import ROOT, lint_problems, normalized_rules, validation_errors

CASES = {
    "home-agent": ({"clusterId": "home", "remotes": [{"clusterId": "r",
                                                     "kubeconfigSecret": "r-kubeconfig"}]},
                   HOME_CLUSTER_RULES, HOME_NAMESPACE_RULES),
    "remote-enforcer": ({"clusterId": "provider", "consumers": [{"clusterId": "home"}]},
                        PROVIDER_CLUSTER_RULES, []),
}


def _hooks(chart: str, **values: Any) -> list[dict[str, Any]]:
    return hooks(chart, "pre-delete", {**CASES[chart][0], **values})


@pytest.mark.parametrize("chart", sorted(CASES))
def test_the_hook_runs_annexctl_uninstall_as_its_own_account(chart: str) -> None:
    found = _hooks(chart)
    (job,) = of_kind(found, "Job")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python", "-m", "annexctl"]
    args = build_parser().parse_args(container["args"])  # the command line parses
    assert args.command == "uninstall" and args.timeout == 120
    assert args.side == ("home" if chart == "home-agent" else "provider")
    (account,) = of_kind(found, "ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] > args.timeout
    # Created in order: the identity, its bindings, then the Job; all gone once it succeeded.
    weights = {m["kind"]: int(m["metadata"]["annotations"]["helm.sh/hook-weight"])
               for m in found}
    assert weights["ServiceAccount"] < weights["ClusterRoleBinding"] < weights["Job"]
    assert weights["ClusterRole"] < weights["ClusterRoleBinding"]
    for manifest in found:
        policy = manifest["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        assert set(policy.split(",")) == {"before-hook-creation", "hook-succeeded"}
        assert validation_errors(manifest) == []
    for binding in of_kind(found, "ClusterRoleBinding") + of_kind(found, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount",
                                        "name": account["metadata"]["name"],
                                        "namespace": "annex-system"}]


@pytest.mark.parametrize("chart", sorted(CASES))
def test_its_roles_hold_exactly_what_the_cleanup_uses(chart: str) -> None:
    found = _hooks(chart)
    _, cluster_rules, namespace_rules = CASES[chart]
    (cluster_role,) = of_kind(found, "ClusterRole")
    assert normalized_rules(cluster_role["rules"]) == normalized_rules(cluster_rules)
    roles = of_kind(found, "Role")
    assert [normalized_rules(r["rules"]) for r in roles] == (
        [normalized_rules(namespace_rules)] if namespace_rules else [])


@pytest.mark.parametrize("chart", sorted(CASES))
def test_an_install_creates_no_hook_and_the_timeout_is_a_value(chart: str) -> None:
    values = CASES[chart][0]
    assert not [m for m in render(chart, values)
                if "helm.sh/hook" in (m["metadata"].get("annotations") or {})]
    (job,) = of_kind(_hooks(chart, uninstall={"timeoutSeconds": 300}), "Job")
    assert "--timeout=300" in job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert lint_problems(ROOT / "charts" / chart, values) == []
