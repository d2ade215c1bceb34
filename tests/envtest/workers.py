"""Stand-in worker nodes for real control planes: kubesim's kubelet
(`kubesim.controllers.kubelet.Kubelet`) and its kubelet API (`kubesim.kubeletapi.KubeletApi`),
run against a real API server through `RemoteApi` instead of in kubesim's process.

They register their Nodes (Ready, a heartbeat Lease in kube-node-lease), run the pods the
scheduler binds to them (Running with pod IPs and container statuses, grace periods honoured,
`sleep` as PID 1 ignoring SIGTERM, Completed pods finished, as kubesim's kubelet does), and
serve the kubelet API (containerLogs, exec, attach, portForward) at the API server's address,
each node at its own port, which its Node advertises (InternalIP and daemonEndpoints):
kube-apiserver dials it there with its kubelet client certificate. kind's storage add-on
runs with them (kubesim's provisioner)."""

from __future__ import annotations

import asyncio
import ssl
import threading
from dataclasses import dataclass
from typing import Any

from kubesim import shell
from kubesim.controllers.kubelet import KUBELET_PORT, Kubelet, KubeletConfig, PodRuntime
from kubesim.controllers.provisioner import StorageProvisioner
from kubesim.kubeletapi import KubeletApi
from tests.envtest.controlplane import ControlPlane
from tests.envtest.pki import Pki
from tests.envtest.remoteapi import RemoteApi

# What the kubelet reads: its pods, its nodes and their Leases, and what pods mount; what the
# storage add-on reads: claims, volumes, classes.
WATCHED = (("", "v1", "pods", ""), ("", "v1", "nodes", ""), ("", "v1", "namespaces", ""),
           ("coordination.k8s.io", "v1", "leases", "kube-node-lease"),
           ("", "v1", "secrets", ""), ("", "v1", "configmaps", ""),
           ("", "v1", "persistentvolumeclaims", ""), ("", "v1", "persistentvolumes", ""),
           ("storage.k8s.io", "v1", "storageclasses", ""))
HOST_IPS_MINOR = 28  # status.hostIPs exists from Kubernetes 1.28: older servers drop it


class StandInKubelet(Kubelet):
    """kubesim's kubelet with every node at one address (the machine's, as its API server's),
    each at its own kubelet port."""

    api: RemoteApi  # type: ignore[assignment]

    def __init__(self, api: RemoteApi, config: KubeletConfig, address: str) -> None:
        super().__init__(api, config)  # type: ignore[arg-type]
        self.address = address
        self.ports: dict[str, int] = {}

    def node_ip(self, node: str) -> str:
        return self.address

    def _node_object(self, node: str) -> dict[str, Any]:
        obj = super()._node_object(node)
        obj["status"]["addresses"] = [{"type": "InternalIP", "address": self.address},
                                      {"type": "Hostname", "address": node}]
        obj["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": self.ports[node]}}
        return obj

    def _start(self, pod: dict[str, Any], ip: str | None) -> PodRuntime:
        runtime = super()._start(pod, ip)
        # A container's PID 1 has no default signal actions: `sleep`, which sets no handler,
        # ignores SIGTERM, so its pod goes only when the grace period ends, as on a real node.
        runtime.ignores_sigterm = any(
            shell.command_of(container)[:1] == ["sleep"]
            for container in (pod.get("spec") or {}).get("containers") or [])
        return runtime

    def _pod_status(self, pod: dict[str, Any], runtime: PodRuntime) -> dict[str, Any]:
        status = super()._pod_status(pod, runtime)
        if self.api.server_minor < HOST_IPS_MINOR:
            # a field the server drops would differ from what it keeps forever: every
            # reconcile would write the status again
            status.pop("hostIPs", None)
        return status


class KubeletServing:
    """The kubelets' TLS: the PKI's kubelet serving certificate; client certificates of the
    cluster CA are asked for and verified (the kubelet's --client-ca-file)."""

    def __init__(self, pki: Pki) -> None:
        self.pki = pki

    def serving_context(self, *hosts: str) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.pki.ca.cert))
        context.load_cert_chain(str(self.pki.kubelet_serving.cert),
                                str(self.pki.kubelet_serving.key))
        context.verify_mode = ssl.CERT_OPTIONAL
        return context


@dataclass
class _Running:
    api: RemoteApi
    kubelet: StandInKubelet
    server: KubeletApi
    task: asyncio.Future[Any] | None = None


class Workers:
    """The workers of several control planes on one background thread's event loop."""

    def __init__(self, planes: list[tuple[ControlPlane, KubeletConfig]]) -> None:
        self.planes = planes
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="envtest-workers",
                                        daemon=True)
        self._running: list[_Running] = []

    def start(self) -> None:
        self._thread.start()
        for plane, config in self.planes:
            self._running.append(self._call(self._start(plane, config)))

    async def _start(self, plane: ControlPlane, config: KubeletConfig) -> _Running:
        assert plane.pki is not None
        pki = plane.pki
        api = RemoteApi(plane.url, pki.ca.cert, pki.workers.cert, pki.workers.key, WATCHED)
        await api.start()
        kubelet = StandInKubelet(api, config, plane.address)
        network: dict[tuple[str, int], tuple[str, int]] = {}
        # bearer tokens are not taken: kube-apiserver presents its client certificate
        server = KubeletApi(kubelet, KubeletServing(pki),  # type: ignore[arg-type]
                            lambda token: None, network, host=plane.address)
        await server.start(lambda node: [node], KUBELET_PORT)
        kubelet.ports = {node: network[(node, KUBELET_PORT)][1] for node in kubelet.node_names}
        running = _Running(api, kubelet, server)
        # kind's storage add-on too (its default class `standard`), kubesim's provisioners
        provisioner = StorageProvisioner(api)  # type: ignore[arg-type]
        running.task = asyncio.ensure_future(asyncio.gather(kubelet.main(), provisioner.main()))
        return running

    def _call(self, coroutine: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        async def stop(running: _Running) -> None:
            processes: list[asyncio.Future[Any]] = [
                p for r in running.kubelet.runtimes.values() for p in r.processes]
            if running.task is not None:
                processes.append(running.task)
            for task in processes:  # the containers' main commands too
                task.cancel()
            await asyncio.gather(*processes, return_exceptions=True)
            await running.server.stop()
            await running.api.close()

        async def cancel_the_rest() -> None:
            """What the kubelet API still serves (followed logs, attached sessions)."""
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        if self._thread.is_alive():
            for running in self._running:
                self._call(stop(running))
            self._call(cancel_the_rest())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()
