"""kopf's watcher cluster-wide, with watches the server ends every second: kopf reconnects
(`?watch=true&allowWatchBookmarks=true&resourceVersion=...&timeoutSeconds=1`) and still sees
every object, as it does against a real API server."""

from __future__ import annotations

import asyncio
import threading

import kopf

from tests.helpers import wait_for
from tests.kubesim.rest import call
from tests.kubesim.test_api_kopf import kubeconfig_login


def test_a_cluster_wide_kopf_operator_follows_objects_across_watch_timeouts(home,
                                                                            namespace) -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: object) -> kopf.ConnectionInfo:
        return kubeconfig_login(home)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: object) -> None:
        settings.posting.enabled = False
        settings.watching.server_timeout = 1  # the server ends each watch after a second

    @kopf.on.create("configmaps", registry=registry, labels={"annex-kopf-test": namespace})
    def on_create(patch: kopf.Patch, **_: object) -> None:
        patch.metadata.annotations["seen-by"] = "kopf"

    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(kopf.operator(
        registry=registry, standalone=True, clusterwide=True, stop_flag=stop,
        ready_flag=ready)), daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "kopf did not start"

        def seen(name: str) -> bool:
            body = call(home, "GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")[1]
            return (body["metadata"].get("annotations") or {}).get("seen-by") == "kopf"

        for name in ("first", "second", "third"):
            call(home, "POST", f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {
                "name": name, "labels": {"annex-kopf-test": namespace}}})
            wait_for(lambda: seen(name), 30, f"kopf did not handle {name}")  # noqa: B023
    finally:
        stop.set()
        thread.join(30)
