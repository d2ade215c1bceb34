"""The enforcer does its whole job with nothing but the chart's ClusterRole (kubesim RBAC)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.charts.helm import only, render
from tests.helpers import wait_for
from tests.remote_enforcer.conftest import (
    ROOT,
    Enforcer,
    ShadowPods,
    make_tenant_namespace,
    new_name,
    running_enforcer,
    settled,
    shadowpod,
)
from tests.remote_enforcer.test_admission import denial, set_quota
from tests.remote_enforcer.test_namespace_map import Maps, namespace_or_none, phases
from tests.remote_enforcer.test_offer import offer

pytestmark = pytest.mark.kubesim_only  # creates cluster-wide RBAC objects


def service_account_kubeconfig(remote: Any, directory: Path) -> Path:
    """A kubeconfig for a service account bound to the chart's ClusterRole."""
    namespace = new_name("annex-system")
    remote.core.create_namespace({"metadata": {"name": namespace}})
    remote.core.create_namespaced_service_account(namespace, {"metadata": {"name": "enforcer"}})
    role = only(render(ROOT / "charts" / "remote-enforcer", {"clusterId": "provider-test"}),
                "ClusterRole")
    role["metadata"] = {"name": namespace}
    rbac = client.RbacAuthorizationV1Api(remote.api_client)
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding({
        "metadata": {"name": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": namespace},
        "subjects": [{"kind": "ServiceAccount", "name": "enforcer", "namespace": namespace}]})
    token = remote.core.create_namespaced_service_account_token(
        "enforcer", namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    config = yaml.safe_load(remote.kubeconfig.read_text())
    config = copy.deepcopy(config)
    config["users"] = [{"name": "enforcer", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "enforcer"
    path = directory / "enforcer.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def confined(remote: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Enforcer]:
    directory = tmp_path_factory.mktemp("confined")
    kubeconfig = service_account_kubeconfig(remote, directory)
    with running_enforcer(remote, kubeconfig, directory) as process:
        yield process


def test_everything_works_with_only_the_chart_cluster_role(
        remote: Any, confined: Enforcer) -> None:
    consumer = new_name("consumer")
    tenant = make_tenant_namespace(remote, consumer)
    maps = Maps(remote)
    twin = new_name("twin")
    name = maps.create(tenant, {"app": twin})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"app": "Accepted"})
    wait_for(lambda: offer(remote, tenant), message="no offer")

    shadowpods = ShadowPods(remote.api_client)
    pod_name = new_name("p")
    shadowpods.create(twin, shadowpod(pod_name, consumer))
    settled(shadowpods, twin, pod_name)
    remote.core.delete_namespaced_pod(pod_name, twin, grace_period_seconds=0)
    wait_for(lambda: shadowpods.status(twin, pod_name).get("recreations") == 1)

    shadowpods.patch(twin, pod_name, {"spec": {"pod": {"containers": [
        {"name": "main", "image": "nginx:2"}]}}})
    wait_for(lambda: remote.core.read_namespaced_pod(pod_name, twin).spec.containers[0].image
             == "nginx:2")

    set_quota(remote, tenant, consumer, "None", {}, cordoned=True)
    assert denial(lambda: shadowpods.create(twin, shadowpod(new_name("p"), consumer))) == (
        "the consumer is cordoned: no new pods are admitted")

    second = new_name("twin")
    maps.drop(tenant, name, "app")
    client.CustomObjectsApi(remote.api_client).patch_namespaced_custom_object(
        "virtualkubelet.liqo.io", "v1beta1", tenant, "namespacemaps", name,
        {"spec": {"desiredMapping": {"other": second}}})
    wait_for(lambda: phases(maps.current(tenant, name)) == {"other": "Accepted"})
    wait_for(lambda: (ns := namespace_or_none(remote, twin)) is None
             or ns.metadata.deletion_timestamp is not None)

    log = confined.log_path.read_text()
    # a 403 as a status (not the milliseconds of a timestamp such as "05,403", nor part of a name)
    assert not re.search(r"(?<![\w,])403(?!\w)", log) and "forbidden" not in log.lower(), (
        log[-3000:])
