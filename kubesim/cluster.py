"""`Cluster`: one simulated cluster (API server, TLS, HTTP server, kubeconfig), and
`ClusterThread`, which runs clusters on a background thread with its own event loop (tests)."""

from __future__ import annotations

import asyncio
import base64
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web

from kubesim.admission import AdmissionPlugins
from kubesim.apiserver import ApiServer, User, copy_json
from kubesim.auth import install_auth
from kubesim.controllers import ALL_CONTROLLERS, ControllerManager, ControllerSettings
from kubesim.controllers.kubelet import KUBELET_PORT, Kubelet
from kubesim.csrsigning import install_certificates
from kubesim.ephemeralcontainers import install_ephemeral_containers
from kubesim.escalation import install_escalation_check
from kubesim.eviction import install_eviction
from kubesim.faults import install_faults
from kubesim.http import Middleware, make_app
from kubesim.kinds import ResourceKind
from kubesim.kubeletapi import KubeletApi
from kubesim.kubeletproxy import KubeletClient
from kubesim.metricsserver import MetricsServerSettings, install_metrics_server
from kubesim.scale import install_scale
from kubesim.strategies import EndpointSliceStrategy
from kubesim.tls import KubeletTLS, ServerTLS, make_kubelet_tls, make_server_tls

T = TypeVar("T")
ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))
# What a fresh real cluster has before anyone writes to it.
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

Authenticator = Callable[[str], User | None]


class Cluster:
    def __init__(self, name: str, *, workers: int = 1, pod_cidr: str = "10.0.0.0/16",
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.name = name
        self.workers = workers  # part 2's node lifecycle creates this many worker nodes
        self.pod_cidr = pod_cidr
        self.host = host
        self.port = port
        self.api = ApiServer()
        install_scale(self.api)
        install_ephemeral_containers(self.api)
        # kube-controller-manager's csrsigning (kubelet-serving) signs with the cluster CA
        self.csr_signer = install_certificates(self.api)
        self.admin_token = secrets.token_urlsafe(32)
        self.tokens: dict[str, User] = {self.admin_token: ADMIN}
        # tried after the static tokens (part 2 adds service-account tokens)
        self.authenticators: list[Authenticator] = []
        # aiohttp middlewares run after authentication, read at request time (fault injection)
        self.middlewares: list[Middleware] = []
        self.url = ""
        self.kubeconfig_path: Path | None = None
        self.tls: ServerTLS | None = None
        self._runner: web.AppRunner | None = None
        # run after seeding / before stopping (the controller manager starts and stops here)
        self.startup_hooks: list[Callable[[Cluster], Awaitable[None]]] = []
        self.controllers: ControllerManager | None = None
        """Once started."""
        # run once the cluster's TLS exists (the simulated kubelets serve their API)
        self.serving_hooks: list[Callable[[Cluster], Awaitable[None]]] = []
        # how the API server dials kubelets (address-type preference, client certificate)
        self.kubelet_client = KubeletClient()
        self.kubelet_tls: KubeletTLS | None = None
        self.ca_path: Path | None = None  # the cluster CA, which also signs kubelet client certs
        self.shutdown_hooks: list[Callable[[Cluster], Awaitable[None]]] = []
        # metrics-server's metrics.k8s.io API: off unless set, as on a fresh kubeadm cluster
        self.metrics_server: MetricsServerSettings | None = None
        # kube-apiserver's --kubelet-certificate-authority: verify kubelets' serving
        # certificates against the cluster CA (off by default, as on kube-apiserver)
        self.kubelet_certificate_authority = False
        # kube-apiserver keeps a successful token authentication for TokenSuccessCacheTTL (10 s
        # by default, pkg/kubeapiserver/options/authentication.go): a token whose ServiceAccount
        # or bound object just went still authenticates until then. 0 (off) unless a test sets
        # it, so that a revocation shows at once where the window is not what a test is about.
        self.token_success_cache_ttl = 0.0
        self._token_cache: dict[str, tuple[float, User]] = {}

    def authenticate(self, token: str) -> User | None:
        cached = self._token_cache.get(token) if self.token_success_cache_ttl > 0 else None
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        user = self._authenticate(token)
        if user is not None and self.token_success_cache_ttl > 0:
            now = time.monotonic()
            if len(self._token_cache) > 10000:
                self._token_cache = {k: v for k, v in self._token_cache.items() if v[0] > now}
            self._token_cache[token] = (now + self.token_success_cache_ttl, user)
        return user

    def _authenticate(self, token: str) -> User | None:
        user = self.tokens.get(token)
        if user is not None:
            return user
        for authenticator in self.authenticators:
            user = authenticator(token)
            if user is not None:
                return user
        return None

    def set_kubelet_certificate_authority(self, verify: bool) -> None:
        """Switch --kubelet-certificate-authority at run time (a test hook: kube-apiserver reads
        it at start)."""
        self.kubelet_certificate_authority = verify
        if self.tls is not None and self.tls.ca is not None:
            self._dial_kubelets_with(self.tls.ca)

    def _dial_kubelets_with(self, ca: Any) -> None:
        """The API server's kubelet client certificate from the cluster CA, verifying kubelets
        by --kubelet-certificate-authority, and without verifying for
        insecureSkipTLSVerifyBackend."""
        self.kubelet_tls = make_kubelet_tls(ca, self.kubelet_certificate_authority)
        self.kubelet_client.tls = self.kubelet_tls.client_context
        self.kubelet_client.insecure_tls = make_kubelet_tls(ca, False).client_context

    async def start(self, directory: Path | None = None) -> None:
        """Seed the initial objects, serve HTTPS and write DIR/NAME.kubeconfig."""
        await self._seed()
        _install_control_plane(self)
        if self.metrics_server is not None:  # after the kubelets, which it scrapes
            install_metrics_server(self, self.metrics_server)
        for hook in self.startup_hooks:
            await hook(self)
        self.tls = make_server_tls()
        assert self.tls.ca is not None
        self._dial_kubelets_with(self.tls.ca)
        self.csr_signer.ca = self.tls.ca
        for hook in self.serving_hooks:
            await hook(self)
        self._runner = web.AppRunner(make_app(self), handle_signals=False,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.tls.context)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self.url = f"https://{self.host}:{self.port}"
        await self._advertise()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self.kubeconfig_path = directory / f"{self.name}.kubeconfig"
            self.kubeconfig_path.write_text(yaml.safe_dump(self.kubeconfig()))
            self.ca_path = directory / f"{self.name}-ca.crt"
            self.ca_path.write_bytes(self.tls.ca_pem)

    async def _seed(self) -> None:
        namespaces = self.api.kinds.get("", "v1", "namespaces")
        services = self.api.kinds.get("", "v1", "services")
        assert namespaces is not None and services is not None
        for name in INITIAL_NAMESPACES:
            if self.api.store.get(namespaces.storage_key, "", name) is None:
                await self.api.create(namespaces, "", {"metadata": {"name": name}})
        if self.api.store.get(services.storage_key, "default", "kubernetes") is None:
            await self.api.create(services, "default", {
                "metadata": {"name": "kubernetes", "labels": {
                    "component": "apiserver", "provider": "kubernetes"}},
                "spec": {"clusterIP": "10.96.0.1", "ports": [
                    {"name": "https", "port": 443, "targetPort": 6443}]},
            })

    async def _advertise(self) -> None:
        """What kube-apiserver's endpoint reconciler publishes once it serves: the `kubernetes`
        Service targets its secure port, and the Endpoints and EndpointSlice of that Service list
        its advertised address (pkg/controlplane/reconcilers/endpointsadapter.go)."""
        kinds = self.api.kinds
        services = kinds.get("", "v1", "services")
        endpoints = kinds.get("", "v1", "endpoints")
        slices = kinds.get("discovery.k8s.io", "v1", "endpointslices")
        assert services is not None and endpoints is not None and slices is not None
        port = {"name": "https", "port": self.port, "protocol": "TCP"}
        address_type = "IPv6" if ":" in self.host else "IPv4"
        service = copy_json(await self.api.get(services, "default", "kubernetes"))
        service["spec"]["ports"] = [{**p, "targetPort": self.port} if p.get("name") == "https"
                                    else p for p in service["spec"]["ports"]]
        await self.api.update(services, "default", "kubernetes", service)
        slice_strategy = self.api.strategy(slices)
        assert isinstance(slice_strategy, EndpointSliceStrategy)
        slice_strategy.own_addresses = frozenset({self.host})
        # One subset / one slice named after the Service; labels as the reconciler sets them.
        await self._put(endpoints, "kubernetes", {
            "metadata": {"name": "kubernetes",
                         "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": self.host}], "ports": [port]}]})
        await self._put(slices, "kubernetes", {
            "metadata": {"name": "kubernetes",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": address_type,
            "endpoints": [{"addresses": [self.host], "conditions": {"ready": True}}],
            "ports": [port]})

    async def _put(self, kind: ResourceKind, name: str, body: dict[str, Any]) -> None:
        existing = self.api.store.get(kind.storage_key, "default", name)
        if existing is None:
            await self.api.create(kind, "default", body)
            return
        body["metadata"]["resourceVersion"] = existing.obj["metadata"]["resourceVersion"]
        await self.api.update(kind, "default", name, body)

    async def stop(self) -> None:
        for hook in self.shutdown_hooks:
            await hook(self)
        self.api.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.api.drain()
        await self.api.admission.close()

    def kubeconfig(self) -> dict[str, Any]:
        assert self.tls is not None and self.url
        user = f"{self.name}-admin"
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.name, "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(self.tls.ca_pem).decode(),
            }}],
            "users": [{"name": user, "user": {"token": self.admin_token}}],
            "contexts": [{"name": self.name, "context": {
                "cluster": self.name, "user": user, "namespace": "default"}}],
            "current-context": self.name,
            "preferences": {},
        }


def _install_control_plane(cluster: Cluster) -> None:
    """What runs beside the API server: RBAC and token authentication, with the check that an
    RBAC write grants nothing its author lacks; the admission plugins; eviction; fault
    injection; a `ControllerManager` started and stopped with the cluster; the simulated nodes'
    kubelet API."""
    settings = getattr(cluster, "controller_settings", None) or ControllerSettings(
        workers=cluster.workers, pod_cidr=cluster.pod_cidr, node_prefix=f"{cluster.name}-worker")
    names = getattr(cluster, "controller_names", None)
    names = list(ALL_CONTROLLERS if names is None else names)

    def ca_pem() -> str | None:
        return cluster.tls.ca_pem.decode() if cluster.tls is not None else None

    manager = ControllerManager(cluster.api, settings, names, ca_pem)
    cluster.controllers = manager
    cluster.api.admission = AdmissionPlugins(
        cluster.api.store, settings.default_not_ready_toleration_seconds,
        settings.default_unreachable_toleration_seconds)
    install_escalation_check(cluster.api, install_auth(cluster))
    install_eviction(cluster.api)
    install_faults(cluster)

    async def start(_: Any) -> None:
        manager.start()

    async def stop(_: Any) -> None:
        await manager.stop()

    cluster.startup_hooks.append(start)
    cluster.shutdown_hooks.append(stop)
    if "kubelet" in names:
        _serve_kubelet_api(cluster, manager.kubelet)


def _serve_kubelet_api(cluster: Cluster, kubelet: Kubelet) -> None:
    """The simulated nodes answer the kubelet API at the addresses their Node advertises."""

    async def serve(_: Any) -> None:
        assert cluster.kubelet_tls is not None  # made with the cluster's TLS, before these hooks
        server = KubeletApi(kubelet, cluster.kubelet_tls, cluster.authenticate,
                            cluster.kubelet_client.network)
        await server.start(lambda node: [kubelet.node_ip(node), node], KUBELET_PORT)

        async def stop(_: Any) -> None:
            await server.stop()

        cluster.shutdown_hooks.append(stop)

    cluster.serving_hooks.append(serve)


class ClusterThread:
    """Clusters served from a daemon thread's event loop, so synchronous tests can use them."""

    def __init__(self, clusters: Iterable[Cluster], directory: Path) -> None:
        self.clusters = list(clusters)
        self.directory = directory
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kubesim",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()
        for cluster in self.clusters:
            self.call(cluster.start(self.directory))

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run a coroutine on the clusters' loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def run(self, function: Callable[[], T], timeout: float = 30) -> T:
        """Run a plain function on the clusters' loop (store access is not thread-safe)."""

        async def wrapper() -> T:
            return function()

        return self.call(wrapper(), timeout)

    def stop(self) -> None:
        for cluster in self.clusters:
            self.call(cluster.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def __enter__(self) -> ClusterThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def serve_until(stop: Awaitable[Any], clusters: Iterable[Cluster],
                      directory: Path) -> None:
    """Start clusters, wait for `stop`, shut them down."""
    started: list[Cluster] = []
    try:
        for cluster in clusters:
            await cluster.start(directory)
            started.append(cluster)
        await stop
    finally:
        for cluster in started:
            await cluster.stop()
