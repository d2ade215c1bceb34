"""The ServiceAccount admission plugin on pod creation (as on real clusters)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.test_controllers_cluster import pod_manifest

MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_pods_get_the_default_account_and_its_projected_token(home, namespace) -> None:
    pod = home.core.create_namespaced_pod(namespace, pod_manifest("plain"))
    assert pod.spec.service_account_name == "default"
    [volume] = [v for v in pod.spec.volumes if v.name.startswith("kube-api-access-")]
    sources = volume.projected.sources
    assert sources[0].service_account_token.path == "token"
    assert sources[0].service_account_token.expiration_seconds == 3607
    assert sources[1].config_map.name == "kube-root-ca.crt"
    assert sources[2].downward_api.items[0].field_ref.field_path == "metadata.namespace"
    [mount] = pod.spec.containers[0].volume_mounts
    assert (mount.name, mount.mount_path, mount.read_only) == (volume.name, MOUNT, True)


def test_automount_off_means_no_token_volume(home, namespace) -> None:
    manifest = pod_manifest("quiet", automountServiceAccountToken=False)
    pod = home.core.create_namespaced_pod(namespace, manifest)
    assert not pod.spec.volumes
    assert not pod.spec.containers[0].volume_mounts


def test_a_pod_naming_a_missing_account_is_forbidden(home, namespace) -> None:
    with pytest.raises(ApiException) as refused:
        home.core.create_namespaced_pod(namespace, pod_manifest("lost",
                                                                serviceAccountName="nobody"))
    assert refused.value.status == 403
    status = json.loads(refused.value.body)
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        f'pods "lost" is forbidden: error looking up service account {namespace}/nobody: '
        'serviceaccount "nobody" not found')
    assert status["details"] == {"name": "lost", "kind": "pods"}


async def test_the_plugin_waits_a_little_for_a_default_account_created_meanwhile() -> None:
    """The namespace's `default` account is created asynchronously (by the serviceaccount
    controller): like getServiceAccount, the plugin looks it up again for a while (10 tries)
    instead of refusing at once; other accounts are looked up once."""
    from kubesim.admission import ServiceAccountPlugin
    from kubesim.apiserver import AdmissionRequest, ApiServer, User
    from kubesim.errors import StatusError

    api = ApiServer()
    accounts = api.kinds.get("", "v1", "serviceaccounts")
    namespaces = api.kinds.get("", "v1", "namespaces")
    pods = api.kinds.get("", "v1", "pods")
    assert accounts is not None and namespaces is not None and pods is not None
    await api.create(namespaces, "", {"metadata": {"name": "fresh"}})
    plugin = ServiceAccountPlugin(api.store)

    def creation(name: str, account: str) -> Any:
        pod = {"metadata": {"name": name}, "spec": {
            "serviceAccountName": account, "containers": [{"name": "c", "image": "i"}]}}
        request = AdmissionRequest("CREATE", pods, "", "fresh", name, pod, None,
                                   User("admin", ()), False, None)
        return asyncio.ensure_future(plugin.mutate(request, pod))

    looking, other = creation("web", "default"), creation("build", "builder")
    await asyncio.sleep(0)  # both have looked once and found nothing
    assert not looking.done() and other.done()
    with pytest.raises(StatusError, match='serviceaccount "builder" not found'):
        other.result()
    await api.create(accounts, "fresh", {"metadata": {"name": "default"}})
    admitted = await asyncio.wait_for(looking, timeout=5)
    assert admitted["spec"]["serviceAccountName"] == "default"
    assert admitted["spec"]["volumes"][0]["name"].startswith("kube-api-access-")
