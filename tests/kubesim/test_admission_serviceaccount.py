"""The ServiceAccount admission plugin on pod creation (as on real clusters)."""

from __future__ import annotations

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
