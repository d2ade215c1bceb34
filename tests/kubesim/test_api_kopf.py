"""kopf runs unchanged against the cluster: it discovers, lists, watches, patches and posts
events the way a real operator does."""

from __future__ import annotations

import asyncio
import threading

import kopf
import pytest
import yaml

from tests.helpers import wait_for
from tests.kubesim.rest import call


def kubeconfig_login(cluster, namespace: str | None = None) -> kopf.ConnectionInfo:
    """kopf's login as the cluster's kubeconfig: its token (kubesim's) or its client
    certificate (kubeadm's, envtest's)."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    server, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    return kopf.ConnectionInfo(server=server["server"],
                               ca_data=server["certificate-authority-data"],
                               token=user.get("token"),
                               certificate_data=user.get("client-certificate-data"),
                               private_key_data=user.get("client-key-data"),
                               default_namespace=namespace)


@pytest.fixture
def operator(home, namespace):
    """A kopf operator on `home`, watching ConfigMaps in the test namespace."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: object) -> kopf.ConnectionInfo:
        return kubeconfig_login(home, namespace)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: object) -> None:
        settings.posting.level = 0
        settings.watching.server_timeout = 10

    @kopf.on.create("configmaps", registry=registry)
    def on_create(name: str, patch: kopf.Patch, **_: object) -> dict:
        patch.metadata.annotations["seen-by"] = "kopf"
        kopf.info({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": namespace}}, reason="Seen", message="hello")
        return {"answer": 42}

    stop = threading.Event()
    ready = threading.Event()

    def run() -> None:
        asyncio.run(kopf.operator(registry=registry, standalone=True, namespaces=[namespace],
                                  stop_flag=stop, ready_flag=ready))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30), "kopf did not start"
    yield
    stop.set()
    thread.join(30)


def test_kopf_handles_a_created_object(home, namespace, operator) -> None:
    call(home, "POST", f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "x"}})

    def handled() -> dict | None:
        body = call(home, "GET", f"/api/v1/namespaces/{namespace}/configmaps/x")[1]
        annotations = body["metadata"].get("annotations") or {}
        return body if annotations.get("seen-by") == "kopf" else None

    wait_for(handled, 30, "kopf did not handle the ConfigMap")
    wait_for(lambda: call(home, "GET", f"/api/v1/namespaces/{namespace}/events",
                          query={"fieldSelector": "involvedObject.name=x,reason=Seen"}
                          )[1]["items"], 30, "kopf posted no event")
