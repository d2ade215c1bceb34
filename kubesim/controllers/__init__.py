"""The controllers that make a simulated cluster look alive, each switchable per cluster.

A `ControllerManager` runs the chosen ones (`Cluster.start` starts it with the cluster). Which
controllers run is `cluster.controller_names` (default: all of `ALL_CONTROLLERS`); their
settings are `cluster.controller_settings` (a `ControllerSettings`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubesim.apiserver import ApiServer
from kubesim.controllers.base import Controller
from kubesim.controllers.daemonset import DaemonSetController
from kubesim.controllers.deployment import DeploymentController
from kubesim.controllers.disruption import DisruptionController
from kubesim.controllers.endpointslice import EndpointSliceController
from kubesim.controllers.garbagecollector import GarbageCollector
from kubesim.controllers.kubelet import Kubelet, KubeletConfig
from kubesim.controllers.namespace import NamespaceController
from kubesim.controllers.namespacedefaults import DefaultServiceAccount, RootCaPublisher
from kubesim.controllers.nodelifecycle import NodeLifecycle
from kubesim.controllers.persistentvolume import PersistentVolumeBinder, ProtectionController
from kubesim.controllers.podgc import PodGC
from kubesim.controllers.provisioner import StorageProvisioner
from kubesim.controllers.replicaset import ReplicaSetController
from kubesim.controllers.resourcequota import ResourceQuotaController
from kubesim.controllers.scheduler import Scheduler
from kubesim.controllers.statefulset import StatefulSetController
from kubesim.controllers.tainteviction import TaintEviction

log = logging.getLogger("kubesim.controllers")

# Names as kube-controller-manager's --controllers knows them (scheduler and kubelet aside).
ALL_CONTROLLERS = (
    "scheduler",
    "kubelet",
    "node-lifecycle",
    "taint-eviction-controller",
    "endpointslice",
    "namespace",
    "garbage-collector",
    "podgc",
    "root-ca-cert-publisher",
    "serviceaccount",
    "deployment",
    "replicaset",
    "statefulset",
    "daemonset",
    "disruption",
    "persistentvolume-binder",
    "pvc-protection",
    "pv-protection",
    "resourcequota",
    # not kube-controller-manager's: the storage add-on's provisioners (kind's local-path)
    "storage-provisioner",
)


@dataclass
class ControllerSettings:
    workers: int = 1
    worker_cpu: str = "4"
    worker_memory: str = "8Gi"
    worker_pods: int = 110
    pod_cidr: str = "10.244.0.0/16"
    node_prefix: str = "worker"
    node_grace_period: float = 40.0
    lease_renew_interval: float = 10.0
    container_stop_delay: float = 0.0
    kubelet_events: bool = True
    # kube-apiserver's --default-not-ready-toleration-seconds / --default-unreachable-...
    # (the DefaultTolerationSeconds admission plugin)
    default_not_ready_toleration_seconds: int = 300
    default_unreachable_toleration_seconds: int = 300
    # the kubelet's CrashLoopBackOff: base doubling up to max (10 s / 300 s on a real kubelet)
    restart_backoff_base: float = 10.0
    restart_backoff_max: float = 300.0
    # the pod garbage collector's pass period and orphan quarantine (20 s and 40 s in
    # kube-controller-manager, not flags there) and --terminated-pod-gc-threshold
    pod_gc_check_period: float = 20.0
    pod_gc_quarantine: float = 40.0
    terminated_pod_gc_threshold: int = 12500


def parse_controller_names(text: str) -> list[str]:
    """`--controllers` syntax: "*" (all), names, "-name" to leave one out: "*,-scheduler"."""
    chosen: list[str] = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        if item == "*":
            chosen.extend(n for n in ALL_CONTROLLERS if n not in chosen)
        elif item.startswith("-"):
            if item[1:] not in ALL_CONTROLLERS:
                raise ValueError(f"unknown controller {item[1:]!r}")
            chosen = [n for n in chosen if n != item[1:]]
        elif item in ALL_CONTROLLERS:
            if item not in chosen:
                chosen.append(item)
        else:
            raise ValueError(f"unknown controller {item!r}; known: {', '.join(ALL_CONTROLLERS)}")
    return chosen


class ControllerManager:
    """Runs a chosen set of controllers as tasks on the cluster's loop."""

    def __init__(self, api: ApiServer, settings: ControllerSettings, names: Iterable[str],
                 ca_pem: Callable[[], str | None] = lambda: None) -> None:
        self.api = api
        self.settings = settings
        self.names = list(names)
        self.controllers: dict[str, Controller] = {}
        self._tasks: list[asyncio.Task[None]] = []
        kubelet_config = KubeletConfig(
            workers=settings.workers, node_prefix=settings.node_prefix, cpu=settings.worker_cpu,
            memory=settings.worker_memory, pods=settings.worker_pods,
            pod_cidr=settings.pod_cidr, renew_interval=settings.lease_renew_interval,
            stop_delay=settings.container_stop_delay, record_events=settings.kubelet_events,
            restart_backoff_base=settings.restart_backoff_base,
            restart_backoff_max=settings.restart_backoff_max)
        factories: dict[str, Callable[[], Controller]] = {
            "scheduler": lambda: Scheduler(api),
            "kubelet": lambda: Kubelet(api, kubelet_config),
            "node-lifecycle": lambda: NodeLifecycle(api, settings.node_grace_period),
            "taint-eviction-controller": lambda: TaintEviction(api),
            "endpointslice": lambda: EndpointSliceController(api),
            "namespace": lambda: NamespaceController(api),
            "root-ca-cert-publisher": lambda: RootCaPublisher(api, ca_pem),
            "serviceaccount": lambda: DefaultServiceAccount(api),
            "garbage-collector": lambda: GarbageCollector(api),
            "podgc": lambda: PodGC(api, settings.pod_gc_check_period, settings.pod_gc_quarantine,
                                   settings.terminated_pod_gc_threshold),
            "deployment": lambda: DeploymentController(api),
            "replicaset": lambda: ReplicaSetController(api),
            "statefulset": lambda: StatefulSetController(api),
            "daemonset": lambda: DaemonSetController(api),
            "disruption": lambda: DisruptionController(api),
            "persistentvolume-binder": lambda: PersistentVolumeBinder(api),
            "pvc-protection": lambda: ProtectionController(api, "pvc-protection"),
            "pv-protection": lambda: ProtectionController(api, "pv-protection"),
            "resourcequota": lambda: ResourceQuotaController(api),
            "storage-provisioner": lambda: StorageProvisioner(api),
        }
        for name in self.names:
            if name in factories:
                self.controllers[name] = factories[name]()
        # kube-apiserver's --enable-garbage-collector "must be synced with the corresponding flag
        # of the kube-controller-manager": no GC finalizers that no collector would remove
        api.garbage_collection = "garbage-collector" in self.names

    @property
    def kubelet(self) -> Kubelet:
        kubelet = self.controllers.get("kubelet")
        if not isinstance(kubelet, Kubelet):
            raise LookupError("the kubelet controller is not running in this cluster")
        return kubelet

    def start(self) -> None:
        for controller in self.controllers.values():
            task = asyncio.ensure_future(self._supervise(controller))
            self._tasks.append(task)

    async def _supervise(self, controller: Controller) -> None:
        """Keep a controller running: a crash is logged and it starts again."""
        while True:
            try:
                await controller.main()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller %s crashed; restarting", controller.name)
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
