"""End to end: resource reflection of ConfigMaps and Secrets, with
the remote enforcer and the home agent as real processes. The home object is the truth: its copy
in the twin namespace follows it (edits, drift, deletion); objects the policy keeps home stay
home; a remote object that is not ours is never touched."""

from __future__ import annotations

import base64
from typing import Any

from kubernetes.client.exceptions import ApiException

from shared.wellknown import ORIGIN_CLUSTER_LABEL
from tests.conftest import ClusterHandle
from tests.e2e.conftest import Peer
from tests.e2e.test_offloading import REMOTE_STRATEGY, offloaded, running_and_ready
from tests.helpers import wait_for
from tests.home_agent.play import custom
from tests.remote_enforcer.conftest import PROVIDER_ID

ORIGIN = ORIGIN_CLUSTER_LABEL
SETTINGS = {"mode": "blue", "greeting": "hello"}
PASSWORD = base64.b64encode(b"s3cret").decode()



def configmap(name: str, data: dict[str, str], **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **metadata}, "data": data}


def read(cluster: ClusterHandle, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The object as a plain dict, None when it does not exist."""
    try:
        obj = (cluster.core.read_namespaced_config_map(name, namespace) if kind == "configmap"
               else cluster.core.read_namespaced_secret(name, namespace))
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return cluster.api_client.sanitize_for_serialization(obj)  # type: ignore[no-any-return]


def remote_data(remote: ClusterHandle, kind: str, twin: str, name: str) -> Any:
    obj = read(remote, kind, twin, name)
    return None if obj is None else obj.get("data")


def wait_remote_data(remote: ClusterHandle, kind: str, twin: str, name: str, data: Any,
                     message: str) -> None:
    wait_for(lambda: remote_data(remote, kind, twin, name) == data, timeout=30, message=message)


def stays_away(remote: ClusterHandle, kind: str, twin: str, name: str,
               witness: str) -> None:
    """`name` is not reflected: checked once `witness`, created after it, has been reflected
    (the reflector handles a namespace's objects in its watch order, so no fixed wait)."""
    wait_for(lambda: read(remote, kind, twin, witness) is not None, timeout=30,
             message=f"witness {witness} reflected")
    assert read(remote, kind, twin, name) is None


def test_an_offloaded_pod_using_a_configmap_and_a_secret_runs_remotely_with_the_home_content(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    agent = peer()
    twin = offloaded(home, namespace)
    home.core.create_namespaced_config_map(namespace, configmap("settings", SETTINGS))
    home.core.create_namespaced_secret(namespace, {"metadata": {"name": "credentials"},
                                                   "data": {"password": PASSWORD}})
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "app"},
        "spec": {"containers": [{
            "name": "app", "image": "nginx:1.25",
            "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {
                        "name": "settings", "key": "mode"}}},
                    {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {
                        "name": "credentials", "key": "password"}}}],
            "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"},
                             {"name": "credentials", "mountPath": "/etc/credentials"}]}],
            "volumes": [{"name": "settings", "configMap": {"name": "settings"}},
                        {"name": "credentials", "secret": {"secretName": "credentials"}}],
            **REMOTE_STRATEGY}})
    wait_remote_data(remote, "configmap", twin, "settings", SETTINGS, "ConfigMap reflected")
    wait_remote_data(remote, "secret", twin, "credentials", {"password": PASSWORD},
                     "Secret reflected")
    wait_for(lambda: running_and_ready(remote.api_client.sanitize_for_serialization(
        remote.core.read_namespaced_pod("app", twin))), timeout=60,
        message="the remote pod Running and Ready")
    for kind, name in (("configmap", "settings"), ("secret", "credentials")):
        copy = read(remote, kind, twin, name)
        assert copy is not None
        assert copy["metadata"]["labels"][ORIGIN] == agent.home_id


BACKLOG = 90
"""ConfigMaps the reflection copies before the one a pod mounts (one worker: in their order);
with the two the pods use and kube-root-ca.crt, within the 100 ConfigMaps a twin namespace holds
by default (the consumer's namespacePolicy.objectCounts)."""


def test_a_pod_applied_with_the_configmaps_it_needs_starts_at_the_first_try(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    """The ShadowPod waits for the copies of the ConfigMaps its pod mounts and reads into its
    environment, here behind a backlog of copies: a remote pod made first would wait for the
    kubelet's next try, a volume with a FailedMount warning (its backoff doubling from 0.5 s),
    an environment with a Failed one (CreateContainerConfigError, 10 to 15 s)."""
    peer("--configmap-reflection-workers", "1")
    twin = offloaded(home, namespace)
    for index in range(BACKLOG):
        home.core.create_namespaced_config_map(
            namespace, configmap(f"backlog-{index}", {"index": str(index)}))
    home.core.create_namespaced_config_map(namespace, configmap("settings", SETTINGS))
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "mounts"},
        "spec": {"containers": [{
            "name": "app", "image": "nginx:1.25",
            "volumeMounts": [{"name": "settings", "mountPath": "/etc/settings"}]}],
            "volumes": [{"name": "settings", "configMap": {"name": "settings"}}],
            **REMOTE_STRATEGY}})
    home.core.create_namespaced_config_map(namespace, configmap("environment", SETTINGS))
    home.core.create_namespaced_pod(namespace, {
        "metadata": {"name": "reads"},
        "spec": {"containers": [{
            "name": "app", "image": "nginx:1.25",
            "envFrom": [{"configMapRef": {"name": "environment"}}]}],
            **REMOTE_STRATEGY}})
    for name in ("mounts", "reads"):
        wait_for(lambda name=name: running_and_ready(remote.api_client.sanitize_for_serialization(
            remote.core.read_namespaced_pod(name, twin))), timeout=60,
            message=f"the remote pod {name} Running and Ready")
    assert read(remote, "configmap", twin, f"backlog-{BACKLOG - 1}") is not None  # copied first
    warnings = [f"{event.involved_object.name} {event.reason}: {event.message}"
                for event in remote.core.list_namespaced_event(twin).items
                if event.involved_object.name in ("mounts", "reads") and event.type == "Warning"]
    assert warnings == []


def test_the_remote_copy_follows_the_home_configmap_and_drift_is_reverted(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()
    twin = offloaded(home, namespace)
    home.core.create_namespaced_config_map(namespace, configmap("settings", SETTINGS))
    wait_remote_data(remote, "configmap", twin, "settings", SETTINGS, "ConfigMap reflected")

    home.core.patch_namespaced_config_map("settings", namespace, {"data": {"mode": "green"}})
    wait_remote_data(remote, "configmap", twin, "settings", {**SETTINGS, "mode": "green"},
                     "the home edit reaches the remote copy")

    remote.core.patch_namespaced_config_map("settings", twin, {"data": {"mode": "hacked"}})
    wait_remote_data(remote, "configmap", twin, "settings", {**SETTINGS, "mode": "green"},
                     "the remote edit is reverted")

    home.core.delete_namespaced_config_map("settings", namespace)
    wait_for(lambda: read(remote, "configmap", twin, "settings") is None, timeout=30,
             message="the remote copy deleted with the home ConfigMap")


def test_skip_reflection_keeps_an_object_home(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()
    twin = offloaded(home, namespace)
    home.core.create_namespaced_config_map(namespace, configmap(
        "private", SETTINGS, annotations={"liqo.io/skip-reflection": "true"}))
    home.core.create_namespaced_config_map(namespace, configmap("public", SETTINGS))
    stays_away(remote, "configmap", twin, "private", witness="public")

    home.core.patch_namespaced_config_map("public", namespace, {"metadata": {"annotations": {
        "liqo.io/skip-reflection": "true"}}})
    wait_for(lambda: read(remote, "configmap", twin, "public") is None, timeout=30,
             message="a copy whose home object turned skipped is deleted")


def test_allow_list_reflects_only_annotated_objects(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer("--configmap-reflection-type", "AllowList")
    twin = offloaded(home, namespace)
    home.core.create_namespaced_config_map(namespace, configmap("plain", SETTINGS))
    home.core.create_namespaced_config_map(namespace, configmap(
        "allowed", SETTINGS, annotations={"liqo.io/allow-reflection": "true"}))
    stays_away(remote, "configmap", twin, "plain", witness="allowed")
    # Secrets keep their own (DenyList) policy.
    home.core.create_namespaced_secret(namespace, {"metadata": {"name": "plain"},
                                                   "data": {"password": PASSWORD}})
    wait_remote_data(remote, "secret", twin, "plain", {"password": PASSWORD},
                     "a Secret under DenyList reflected")


def test_a_foreign_remote_object_is_left_alone_with_a_failed_reflection_event(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()
    twin = offloaded(home, namespace)
    remote.core.create_namespaced_config_map(twin, configmap("taken", {"owner": "someone"}))
    home.core.create_namespaced_config_map(namespace, configmap("taken", SETTINGS))

    def failed_reflection() -> bool:
        events = home.core.list_namespaced_event(namespace).items
        return any(e.reason == "FailedReflection" and e.involved_object.name == "taken"
                   and e.involved_object.kind == "ConfigMap" and e.type == "Warning"
                   for e in events)

    wait_for(failed_reflection, timeout=30, message="a FailedReflection Event on the home object")
    assert remote_data(remote, "configmap", twin, "taken") == {"owner": "someone"}
    home.core.delete_namespaced_config_map("taken", namespace)
    home.core.create_namespaced_config_map(namespace, configmap("witness", SETTINGS))
    wait_remote_data(remote, "configmap", twin, "witness", SETTINGS, "witness reflected")
    assert remote_data(remote, "configmap", twin, "taken") == {"owner": "someone"}


def test_zero_workers_disable_a_kind(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer("--secret-reflection-workers", "0")
    twin = offloaded(home, namespace)
    home.core.create_namespaced_secret(namespace, {"metadata": {"name": "credentials"},
                                                   "data": {"password": PASSWORD}})
    home.core.create_namespaced_config_map(namespace, configmap("settings", SETTINGS))
    wait_remote_data(remote, "configmap", twin, "settings", SETTINGS, "ConfigMaps still reflected")
    assert read(remote, "secret", twin, "credentials") is None


def test_service_account_token_secrets_are_not_copied(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()
    twin = offloaded(home, namespace)
    home.core.create_namespaced_secret(namespace, {
        "metadata": {"name": "token", "annotations": {
            "kubernetes.io/service-account.name": "default"}},
        "type": "kubernetes.io/service-account-token"})
    home.core.create_namespaced_secret(namespace, {"metadata": {"name": "witness"},
                                                   "data": {"password": PASSWORD}})
    stays_away(remote, "secret", twin, "token", witness="witness")


def test_the_home_root_ca_configmap_does_not_clash_with_the_remote_one(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer()
    twin = offloaded(home, namespace)
    home_ca = wait_for(lambda: read(home, "configmap", namespace, "kube-root-ca.crt"),
                       timeout=30, message="the home root CA ConfigMap published")
    assert home_ca is not None
    wait_remote_data(remote, "configmap", twin, "kube-root-ca.crt.annex", home_ca["data"],
                     "the home root CA reflected under its remote name")
    # the remote cluster publishes its own CA in the twin namespace when it gets to it
    remote_ca = wait_for(lambda: read(remote, "configmap", twin, "kube-root-ca.crt"),
                         timeout=30, message="the remote root CA ConfigMap published")
    assert ORIGIN not in (remote_ca["metadata"].get("labels") or {})


def test_the_skip_lists_of_the_flags_and_the_virtual_node_apply_live(
        home: ClusterHandle, remote: ClusterHandle, namespace: str, peer: Peer) -> None:
    peer("--labels-not-reflected", "internal")
    twin = offloaded(home, namespace)
    home.core.create_namespaced_config_map(namespace, configmap(
        "settings", SETTINGS, labels={"internal": "1", "team": "a"},
        annotations={"note": "home only"}))

    def remote_metadata() -> tuple[dict[str, str], dict[str, str]] | None:
        obj = read(remote, "configmap", twin, "settings")
        if obj is None:
            return None
        return obj["metadata"].get("labels") or {}, obj["metadata"].get("annotations") or {}

    wait_for(lambda: (m := remote_metadata()) and m[0].get("team") == "a"
             and m[1].get("note") == "home only", timeout=30, message="ConfigMap reflected")
    reflected = remote_metadata()
    assert reflected is not None and "internal" not in reflected[0]

    api = custom(home)
    vn = ("offloading.liqo.io", "v1beta1", namespace, "virtualnodes")
    api.create_namespaced_custom_object(*vn, {
        "apiVersion": "offloading.liqo.io/v1beta1", "kind": "VirtualNode",
        "metadata": {"name": "remote", "namespace": namespace},
        "spec": {"clusterId": PROVIDER_ID, "offloadingPatch": {
            "labelsNotReflected": ["team"], "annotationsNotReflected": ["note"]}}})
    try:
        wait_for(lambda: (m := remote_metadata()) and "team" not in m[0]
                 and "note" not in m[1], timeout=30,
                 message="the VirtualNode's skip lists applied to the existing copy")
    finally:
        api.delete_namespaced_custom_object(*vn, "remote")
