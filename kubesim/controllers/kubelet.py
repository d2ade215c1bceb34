"""A kubelet stand-in for the simulated worker nodes (never for nodes it did not register).

It registers its nodes (capacity, Ready, addresses, pod CIDR), renews their Leases in
kube-node-lease, runs the pods bound to them (pod IP from the node's slice of the cluster's pod
CIDR, container statuses, Initialized/Ready/ContainersReady/PodScheduled conditions) once their
volumes mount, honours
deletion grace periods (the pod is removed with grace 0 once its containers stopped, at the latest
after the grace period) and restartPolicy, and serves `pods/log`.

Volumes mount as the kubelet's volume manager mounts them: a Secret or ConfigMap a volume needs
(plain or projected, not `optional`) that does not exist holds the pod Pending, its containers
waiting in ContainerCreating, with a FailedMount Event (once per distinct message, where the
real recorder counts repeats), and the mount is tried again after an exponential backoff of
0.5 s doubling up to 2m2s (nestedpendingoperations'), never on the Secret's creation: a pod
made before what it mounts starts late, as on a real node. Likewise a container environment
(`env`, `envFrom`) that reads a ConfigMap or Secret that does not exist, or a key it lacks: the
containers wait in CreateContainerConfigError with a Failed Event, and the pod is synced again
after the kubelet's backOffPeriod (10 s, jittered by up to half).

Tests drive containers through `fail`, `complete`, `restart`, `set_ready`, `ignore_sigterm` and
`write_log`, and kubelet death through `stop_kubelet` / `start_kubelet`; all of them may
be called from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubesim import errors, shell
from kubesim.apiserver import ApiServer, SubresourceRequest, copy_json, now_timestamp
from kubesim.controllers.base import (
    Controller,
    WorkQueue,
    apply_on_loop,
    kind_of,
    run_together,
    watch_forever,
)
from kubesim.controllers.events import record_event
from kubesim.errors import StatusError
from kubesim.store import Stored

LEASE_NAMESPACE = "kube-node-lease"
KUBELET_PORT = 10250
PodKey = tuple[str, str]


def micro_time(moment: datetime | None = None) -> str:
    """metav1.MicroTime, as Leases carry it."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class KubeletConfig:
    workers: int = 1
    node_prefix: str = "worker"
    cpu: str = "4"
    memory: str = "8Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    pod_cidr: str = "10.244.0.0/16"
    lease_duration: int = 40
    renew_interval: float = 10.0
    # how long a container takes to stop after SIGTERM (capped by the grace period)
    stop_delay: float = 0.0
    # Pulled/Created/Started/Killing events, as a real kubelet records them
    record_events: bool = True
    # CrashLoopBackOff: the kubelet's back-off before restarting a container that keeps
    # exiting (10 s doubling up to 300 s; tests shrink the base)
    restart_backoff_base: float = 10.0
    restart_backoff_max: float = 300.0

    def node_names(self) -> list[str]:
        return [f"{self.node_prefix}-{index}" for index in range(1, self.workers + 1)]


MOUNT_RETRY_INITIAL = 0.5
MOUNT_RETRY_MAX = 122.0
"""The volume manager's backoff between failed mounts (exponentialbackoff's 500 ms, 2m2s)."""


SYNC_BACKOFF = 10.0
"""The kubelet's backOffPeriod: a pod whose sync failed (CreateContainerConfigError) is synced
again after it, jittered by up to half (wait.Jitter(backOffPeriod, 0.5))."""


def environment_error(pod: dict[str, Any],
                      get: Callable[[str, str], dict[str, Any] | None]) -> str | None:
    """The error the kubelet's makeEnvironmentVariables gives the first container (init
    containers first; in each, `envFrom` before `env`) whose environment reads a ConfigMap or
    Secret that `get(kind, name)` does not find ("configmap"/"secret"), or a key it lacks,
    unless optional; None when every environment resolves."""
    spec = pod.get("spec") or {}
    namespace = (pod.get("metadata") or {}).get("namespace", "")
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for source in container.get("envFrom") or []:
            for kind, field_name in (("configmap", "configMapRef"), ("secret", "secretRef")):
                ref = source.get(field_name)
                if isinstance(ref, dict) and not ref.get("optional") and get(
                        kind, ref.get("name", "")) is None:
                    return f'{kind} "{ref.get("name", "")}" not found'
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") or {}
            for kind, field_name, title in (("configmap", "configMapKeyRef", "ConfigMap"),
                                            ("secret", "secretKeyRef", "Secret")):
                ref = value_from.get(field_name)
                if not isinstance(ref, dict) or ref.get("optional"):
                    continue
                name = ref.get("name", "")
                obj = get(kind, name)
                if obj is None:
                    return f'{kind} "{name}" not found'
                if ref.get("key") not in {**(obj.get("data") or {}),
                                          **(obj.get("binaryData") or {})}:
                    return f"couldn't find key {ref.get('key')} in {title} {namespace}/{name}"
    return None


def unmounted_volumes(pod: dict[str, Any],
                      exists: Callable[[str, str], bool]) -> list[tuple[str, str]]:
    """(volume, SetUp error) for each volume of `pod` that cannot mount: a Secret or ConfigMap
    it needs that `exists(kind, name)` does not find ("secret"/"configmap"), unless optional. A
    projected volume's errors are aggregated, as utilerrors.NewAggregate prints them."""
    found = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        sources: list[tuple[str, dict[str, Any]]] = []
        if "secret" in volume:
            source = volume["secret"] or {}
            sources.append(("secret", {**source, "name": source.get("secretName", "")}))
        if "configMap" in volume:
            sources.append(("configmap", volume["configMap"] or {}))
        for projection in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in projection:
                sources.append(("secret", projection["secret"] or {}))
            if "configMap" in projection:
                sources.append(("configmap", projection["configMap"] or {}))
        errors_ = [f'{kind} "{source.get("name", "")}" not found' for kind, source in sources
                   if not source.get("optional") and not exists(kind, source.get("name", ""))]
        if errors_:
            found.append((volume.get("name", ""), errors_[0] if len(errors_) == 1
                          else f"[{', '.join(errors_)}]"))
    return found


def pod_conditions(old_status: dict[str, Any]) -> Callable[..., dict[str, Any]]:
    """`condition(kind, value, reason="", message="")`: a pod condition as the kubelet writes it,
    its lastTransitionTime kept from `old_status` while its value holds."""
    previous = {c.get("type"): c for c in old_status.get("conditions") or []}
    now = now_timestamp()

    def condition(kind: str, value: bool, reason: str = "", message: str = "") -> dict[str, Any]:
        status = "True" if value else "False"
        before = previous.get(kind, {})
        since = before.get("lastTransitionTime") if before.get("status") == status else now
        result = {"type": kind, "status": status, "lastProbeTime": None,
                  "lastTransitionTime": since}
        if reason:
            result["reason"] = reason
        if message:
            result["message"] = message
        return result

    return condition


@dataclass
class StartWait:
    """A pod (`uid`) whose volumes did not mount or whose environment did not resolve: when it
    may try again, what was reported."""

    uid: str
    delay: float = MOUNT_RETRY_INITIAL
    due: float = 0.0  # loop time
    reported: set[str] = field(default_factory=set)
    sandbox: tuple[str, str] | None = None
    """(node, pod IP) once its volumes mounted: the sandbox a real kubelet makes before it
    resolves the containers' environment; its containers start in it."""

    def mount_failed(self, now: float) -> float:
        """One more failed mount at `now`: the wait before the next try."""
        delay, self.delay = self.delay, min(self.delay * 2, MOUNT_RETRY_MAX)
        self.due = now + delay
        return delay

    def sync_failed(self, now: float) -> float:
        """A failed sync at `now` (CreateContainerConfigError): the wait before the next."""
        delay = SYNC_BACKOFF * (1 + 0.5 * random.random())
        self.due = now + delay
        return delay


def go_duration(seconds: float) -> str:
    """time.Duration.String() for the back-off messages: 10s, 1m20s, 5m0s, 400ms, 1.6s."""
    if seconds < 1:
        return f"{round(seconds * 1000, 6):g}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{round(rest, 9):g}s"
    return f"{int(minutes)}m{text}" if minutes else text


@dataclass
class RestartBackOff:
    """flowcontrol.Backoff as the kubelet keeps it per container: a container that finished
    within `backoff` of now waits; each restart past the first doubles the back-off up to `cap`;
    an entry left alone for twice the cap starts again from `initial`."""

    initial: float = 10.0
    cap: float = 300.0
    backoff: float = 0.0  # 0: no entry yet
    last_update: float = 0.0

    def _expired(self, event_time: float) -> bool:
        return self.backoff == 0 or event_time - self.last_update > 2 * self.cap

    def in_backoff_since(self, event_time: float, now: float) -> bool:
        return not self._expired(event_time) and now - event_time < self.backoff

    def next(self, event_time: float) -> None:
        self.backoff = (self.initial if self._expired(event_time)
                        else min(self.backoff * 2, self.cap))
        self.last_update = event_time


@dataclass
class ContainerRuntime:
    name: str
    image: str
    restart_count: int = 0
    started_at: str = field(default_factory=now_timestamp)
    exit_code: int | None = None  # None while running
    finished_at: str = ""
    ready_override: bool | None = None
    last_state: dict[str, Any] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    previous_logs: list[str] = field(default_factory=list)
    # wall-clock time of each log line (sinceSeconds, sinceTime, timestamps)
    log_times: list[float] = field(default_factory=list)
    previous_log_times: list[float] = field(default_factory=list)
    log_written: asyncio.Event = field(default_factory=asyncio.Event)  # wakes `logs -f`
    backoff: RestartBackOff = field(default_factory=RestartBackOff)
    ended_at: float = 0.0  # loop time of the last exit, what the back-off counts from
    waiting: str = ""  # in CrashLoopBackOff: the back-off message
    backoff_reported: bool = False  # its BackOff event is recorded
    # the main process's input when the spec keeps stdin open (`stdin: true`): what attach writes
    input: asyncio.Queue[bytes] | None = None
    stdin_once: bool = False  # the first attach's end of input ends the container's
    launch: Callable[[], None] | None = None  # runs the container's command (a new run)
    process: asyncio.Future[None] | None = None  # the command of the current run

    @property
    def running(self) -> bool:
        return self.exit_code is None

    def container_id(self, pod_uid: str) -> str:
        digest = hashlib.sha256(f"{pod_uid}/{self.name}/{self.restart_count}".encode())
        return "containerd://" + digest.hexdigest()

    def terminate(self, exit_code: int) -> None:
        self.exit_code = exit_code
        self.finished_at = now_timestamp()
        if self.process is not None and self.process is not asyncio.current_task():
            self.process.cancel()  # its command, killed
        self.process = None

    def restart(self, pod_uid: str) -> None:
        """Start again, running the command again; what ran before becomes lastState."""
        self.last_state = {"terminated": self._terminated_state(pod_uid)}
        self.previous_logs, self.logs = self.logs, []
        self.previous_log_times, self.log_times = self.log_times, []
        self.restart_count += 1
        self.exit_code = None
        self.finished_at = ""
        self.started_at = now_timestamp()
        self.waiting = ""
        self.backoff_reported = False
        if self.launch is not None:
            self.launch()

    def append_log(self, text: str) -> None:
        lines = text.splitlines(keepends=True)
        self.logs.extend(lines)
        self.log_times.extend([time.time()] * len(lines))
        self.log_written.set()
        self.log_written = asyncio.Event()

    def _terminated_state(self, pod_uid: str) -> dict[str, Any]:
        exit_code = 137 if self.exit_code is None else self.exit_code
        return {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": self.started_at, "finishedAt": self.finished_at or now_timestamp(),
                "containerID": self.container_id(pod_uid)}

    def status(self, pod_uid: str) -> dict[str, Any]:
        ready = self.running if self.ready_override is None else (
            self.running and self.ready_override)
        last_state = self.last_state
        if self.running:
            state: dict[str, Any] = {"running": {"startedAt": self.started_at}}
        elif self.waiting:  # the run that ended is the last state meanwhile
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": self.waiting}}
            last_state = {"terminated": self._terminated_state(pod_uid)}
        else:
            state = {"terminated": self._terminated_state(pod_uid)}
        image = self.image if "/" in self.image else f"docker.io/library/{self.image}"
        digest = hashlib.sha256(self.image.encode()).hexdigest()
        return {
            "name": self.name, "state": state, "lastState": last_state, "ready": ready,
            "restartCount": self.restart_count, "image": image,
            "imageID": f"{image.split(':')[0]}@sha256:{digest}",
            "containerID": self.container_id(pod_uid), "started": self.running,
        }


@dataclass
class PodRuntime:
    uid: str
    node: str
    ip: str
    restart_policy: str
    started_at: str
    containers: dict[str, ContainerRuntime]
    init_containers: list[tuple[str, str]]  # (name, image): they ran to completion at start
    stopping_since: float | None = None
    ignores_sigterm: bool = False  # its containers stop only when the grace period ends
    transitions: dict[tuple[str, str], str] = field(default_factory=dict)
    ref: str = ""  # format.Pod: name_namespace(uid)
    hostname: str = ""
    env: dict[str, dict[str, str]] = field(default_factory=dict)  # per container
    processes: list[asyncio.Task[None]] = field(default_factory=list)  # main commands
    ephemeral: list[str] = field(default_factory=list)
    """The ephemeral containers started (in `containers` too): never restarted, not part of
    the pod's phase or readiness."""

    def phase(self) -> str:
        states = [c for name, c in self.containers.items() if name not in self.ephemeral]
        if any(c.running or c.waiting for c in states):
            return "Running"
        return "Succeeded" if all(c.exit_code == 0 for c in states) else "Failed"

    def container_ended(self, container: ContainerRuntime, now: float) -> float | None:
        """restartPolicy: Always restarts every exit, OnFailure only failures, each after the
        back-off; returns how long until it may restart when it has to wait."""
        if container.name in self.ephemeral:
            return None
        if self.restart_policy == "Always" or (
            self.restart_policy == "OnFailure" and container.exit_code != 0
        ):
            container.ended_at = now
            return self.try_restart(container, now)
        return None

    def try_restart(self, container: ContainerRuntime, now: float) -> float | None:
        """kuberuntime's doBackOff: restart unless still in back-off since the container
        ended; else it waits in CrashLoopBackOff (returns the time left)."""
        backoff = container.backoff
        if backoff.in_backoff_since(container.ended_at, now):
            container.waiting = (f"back-off {go_duration(backoff.backoff)} restarting failed "
                                 f"container={container.name} pod={self.ref}")
            return container.ended_at + backoff.backoff - now
        backoff.next(container.ended_at)
        container.restart(self.uid)
        return None

    def restart_waiting(self, now: float) -> float | None:
        """Restart the containers whose back-off is over; the time until the next is."""
        waits = [self.try_restart(c, now) for c in self.containers.values() if c.waiting]
        return min((w for w in waits if w is not None), default=None)


class NodeSubnets:
    """Each node's slice of the pod CIDR and the pod IPs handed out from it."""

    def __init__(self, pod_cidr: str, nodes: list[str]) -> None:
        network = ipaddress.ip_network(pod_cidr, strict=False)
        bits = max(1, (len(nodes) - 1).bit_length())
        prefix = max(network.prefixlen + bits, min(24, network.max_prefixlen - 2))
        subnets: list[Any] = list(itertools.islice(network.subnets(new_prefix=prefix), len(nodes)))
        self.cidrs = dict(zip(nodes, subnets, strict=True))
        self._free = {node: (str(ip) for ip in cidr.hosts() if int(ip) & 0xFF != 1)
                      for node, cidr in self.cidrs.items()}
        self._released: dict[str, list[str]] = {node: [] for node in nodes}

    def allocate(self, node: str) -> str:
        released = self._released[node]
        if released:
            return released.pop(0)
        try:
            return next(self._free[node])
        except StopIteration:
            raise RuntimeError(f"pod CIDR of node {node} is exhausted") from None

    def release(self, node: str, ip: str) -> None:
        self._released[node].append(ip)


class Kubelet(Controller):
    name = "kubelet"

    def __init__(self, api: ApiServer, config: KubeletConfig | None = None) -> None:
        super().__init__(api)
        self.config = config or KubeletConfig()
        self.node_names = self.config.node_names()
        self.subnets = NodeSubnets(self.config.pod_cidr, self.node_names)
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.nodes_kind = kind_of(api, "", "v1", "nodes")
        self.leases_kind = kind_of(api, "coordination.k8s.io", "v1", "leases")
        self.namespaces_kind = kind_of(api, "", "v1", "namespaces")
        self.volume_kinds = {"secret": kind_of(api, "", "v1", "secrets"),
                             "configmap": kind_of(api, "", "v1", "configmaps")}
        self.runtimes: dict[PodKey, PodRuntime] = {}
        self.starting: dict[PodKey, StartWait] = {}
        self.paused: set[str] = set()
        self._wake = asyncio.Event()  # cuts the wait before the next heartbeat short
        self.queue = WorkQueue(self._reconcile, self.name, workers=4)
        api.register_subresource(self.pods_kind, "log", self._serve_log)

    # ------------------------------------------------------------------ nodes and leases
    def node_ip(self, node: str) -> str:
        return f"172.18.0.{self.node_names.index(node) + 2}"

    def _node_object(self, node: str) -> dict[str, Any]:
        config = self.config
        resources = {"cpu": config.cpu, "memory": config.memory, "pods": str(config.pods),
                     "ephemeral-storage": config.ephemeral_storage}
        cidr = str(self.subnets.cidrs[node])
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {
                "kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64"}},
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
            "status": {
                "capacity": resources, "allocatable": dict(resources),
                "conditions": self._node_conditions(),
                "addresses": [{"type": "InternalIP", "address": self.node_ip(node)},
                              {"type": "Hostname", "address": node}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
                "nodeInfo": {"kubeletVersion": "v1.31.0-kubesim", "kubeProxyVersion": "",
                             "operatingSystem": "linux", "architecture": "amd64",
                             "containerRuntimeVersion": "containerd://1.7.0",
                             "osImage": "kubesim", "kernelVersion": "6.0.0",
                             "machineID": "", "systemUUID": "", "bootID": ""},
            },
        }

    @staticmethod
    def _node_conditions() -> list[dict[str, Any]]:
        now = now_timestamp()

        def condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
            return {"type": kind, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": now, "lastTransitionTime": now}

        return [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                      "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                      "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID",
                      "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ]

    async def _register(self, node: str) -> None:
        """Create the node if missing, and post its full status if it has none yet."""
        stored = self.api.store.get(self.nodes_kind.storage_key, "", node)
        desired = self._node_object(node)
        if stored is None:
            try:
                node_obj = await self.api.create(self.nodes_kind, "", desired)
            except StatusError as error:
                if error.code != 409:
                    raise
                node_obj = await self.api.get(self.nodes_kind, "", node)
        else:
            node_obj = stored.obj
        if not (node_obj.get("status") or {}).get("capacity"):
            await self._post_status(node_obj, desired["status"])
        else:
            await self._post_ready(node_obj)

    async def _post_ready(self, node_obj: dict[str, Any]) -> None:
        """Post Ready conditions unless they are there (the kubelet's node status update)."""
        conditions = (node_obj.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return
        await self._post_status(node_obj, {})

    async def _post_status(self, node_obj: dict[str, Any], status: dict[str, Any]) -> None:
        new = copy_json(node_obj)
        new["status"] = {**(new.get("status") or {}), **status,
                         "conditions": self._node_conditions()}
        await self.api.update(self.nodes_kind, "", node_obj["metadata"]["name"], new,
                              subresource="status")

    async def _renew_lease(self, node: str) -> None:
        node_obj = self.api.store.get(self.nodes_kind.storage_key, "", node)
        stored = self.api.store.get(self.leases_kind.storage_key, LEASE_NAMESPACE, node)
        spec = {"holderIdentity": node, "leaseDurationSeconds": self.config.lease_duration,
                "renewTime": micro_time()}
        if stored is None:
            owner = ([{"apiVersion": "v1", "kind": "Node", "name": node,
                       "uid": node_obj.obj["metadata"]["uid"]}] if node_obj else [])
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": node, "namespace": LEASE_NAMESPACE,
                                  "ownerReferences": owner}, "spec": spec}
            await self.api.create(self.leases_kind, LEASE_NAMESPACE, lease)
            return
        renewed = copy_json(stored.obj)
        renewed["spec"] = {**renewed.get("spec", {}), **spec}
        await self.api.update(self.leases_kind, LEASE_NAMESPACE, node, renewed)

    async def _heartbeat_forever(self) -> None:
        while True:
            for node in self.node_names:
                if node in self.paused:
                    continue
                try:
                    await self._renew_lease(node)
                    stored = self.api.store.get(self.nodes_kind.storage_key, "", node)
                    if stored is None:
                        await self._register(node)
                    else:
                        await self._post_ready(stored.obj)
                except StatusError as error:
                    if error.code not in (404, 409):
                        raise
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.renew_interval):
                    await self._wake.wait()
            self._wake.clear()

    # ------------------------------------------------------------------------------ pods
    def _on_pod(self, event_type: str, stored: Stored) -> None:
        pod = stored.obj
        key = (stored.namespace, stored.name)
        if key in self.runtimes or pod.get("spec", {}).get("nodeName") in self.subnets.cidrs:
            self.queue.add(key)

    def _forget(self, key: PodKey) -> None:
        self._release_sandbox(self.starting.pop(key, None))
        runtime = self.runtimes.pop(key, None)
        if runtime is not None:
            self.subnets.release(runtime.node, runtime.ip)
            for process in runtime.processes:
                process.cancel()

    def _release_sandbox(self, wait: StartWait | None) -> None:
        if wait is not None and wait.sandbox is not None:
            self.subnets.release(*wait.sandbox)

    def _start(self, pod: dict[str, Any], ip: str | None) -> PodRuntime:
        spec = pod.get("spec", {})
        config = self.config
        containers = {c["name"]: ContainerRuntime(
            c["name"], c.get("image", ""),
            backoff=RestartBackOff(config.restart_backoff_base, config.restart_backoff_max))
            for c in spec.get("containers") or []}
        node = spec["nodeName"]
        metadata = pod["metadata"]
        return PodRuntime(
            ref=f"{metadata['name']}_{metadata.get('namespace', '')}({metadata['uid']})",
            uid=pod["metadata"]["uid"], node=node, ip=ip or self.subnets.allocate(node),
            restart_policy=spec.get("restartPolicy") or "Always",
            started_at=(pod.get("status") or {}).get("startTime") or now_timestamp(),
            containers=containers,
            init_containers=[(c["name"], c.get("image", ""))
                             for c in spec.get("initContainers") or []],
        )

    def _run_commands(self, key: PodKey, pod: dict[str, Any], runtime: PodRuntime) -> None:
        """Each container runs its command with the built-in programs; what it prints is its
        log, and when it ends the container exits with its code (restarted as restartPolicy
        says, running the command again). A command kubesim does not know prints nothing and
        runs until the pod goes."""
        spec = pod.get("spec", {})
        runtime.hostname = spec.get("hostname") or pod["metadata"]["name"]
        for container in spec.get("containers") or []:
            self._run_command(key, runtime, container)

    def _run_command(self, key: PodKey, runtime: PodRuntime, container: dict[str, Any]) -> None:
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOSTNAME": runtime.hostname}
        env.update({e["name"]: str(e.get("value", "")) for e in container.get("env") or []
                    if "valueFrom" not in e})
        env["HOME"] = "/root"
        runtime.env[container["name"]] = env
        target = runtime.containers.get(container["name"])
        argv = shell.command_of(container)
        if target is None or not argv:
            return
        keeps_input, target.stdin_once = bool(container.get("stdin")), bool(
            container.get("stdinOnce"))
        running = target

        async def main() -> None:
            async def log(data: bytes) -> None:
                running.append_log(data.decode(errors="replace"))

            run = running.restart_count
            queue = running.input
            stdin = queue.get if queue is not None else shell._no_input
            try:
                code = await shell.run(argv, shell.Context(log, log, stdin,
                                                           runtime.hostname, env))
            except shell.NotFound:
                return
            if self.runtimes.get(key) is runtime and running.running and (
                    running.restart_count == run):
                self._container_exited(key, runtime, running, code)

        def launch() -> None:
            # each run of the container has an input of its own
            running.input = asyncio.Queue() if keeps_input else None
            running.process = asyncio.ensure_future(main())
            runtime.processes.append(running.process)

        target.launch = launch
        launch()

    def _container_exited(self, key: PodKey, runtime: PodRuntime, target: ContainerRuntime,
                          exit_code: int) -> None:
        target.terminate(exit_code)
        wait = runtime.container_ended(target, asyncio.get_running_loop().time())
        if wait is not None:
            self.queue.add_later(key, wait)
        self.queue.add(key)

    def _start_ephemeral(self, key: PodKey, pod: dict[str, Any],
                         runtime: PodRuntime) -> list[str]:
        """Start the ephemeral containers added since the last look (the kubelet's
        SyncPod starts each once, never again); their names."""
        started = []
        for container in (pod.get("spec") or {}).get("ephemeralContainers") or []:
            name = container.get("name")
            if not name or name in runtime.containers:
                continue
            runtime.containers[name] = ContainerRuntime(name, container.get("image", ""))
            runtime.ephemeral.append(name)
            self._run_command(key, runtime, container)
            started.append(name)
        return started

    async def _reconcile(self, key: PodKey) -> None:
        stored = self.api.store.get(self.pods_kind.storage_key, *key)
        runtime = self.runtimes.get(key)
        # A node whose kubelet is gone does nothing for its pods (`start_kubelet` syncs them
        # again). A pod of the same name on another node is served all the same: one kubelet
        # object holds every node's runtimes, so the gone node's runtime of that name is dropped.
        uid = stored.obj["metadata"]["uid"] if stored is not None else None
        if runtime is not None and runtime.node in self.paused and uid in (None, runtime.uid):
            return
        if stored is not None and (stored.obj.get("spec") or {}).get("nodeName") in self.paused:
            return
        if stored is None or (runtime is not None and runtime.uid != stored.obj["metadata"]["uid"]):
            self._forget(key)
            runtime = None
            if stored is None:
                return
        pod = stored.obj
        if pod.get("spec", {}).get("nodeName") not in self.subnets.cidrs:
            return
        started = False
        if runtime is None:
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                return  # finished before we (re)started: nothing to run
            if not await self._may_start(key, pod):
                return
            waited = self.starting.pop(key, None)
            sandbox = waited.sandbox if waited is not None else None
            runtime = self.runtimes[key] = self._start(pod, sandbox[1] if sandbox else None)
            self._run_commands(key, pod, runtime)
            started = True
        if pod["metadata"].get("deletionTimestamp"):
            if runtime.stopping_since is None:
                await self._events(pod, runtime, ("Killing", "Stopping container {}"))
            if await self._stop(key, pod, runtime):
                return
        ephemeral = self._start_ephemeral(key, pod, runtime)
        wait = runtime.restart_waiting(asyncio.get_running_loop().time())
        if wait is not None:
            self.queue.add_later(key, wait)
        await self._write_status(key, pod, runtime)
        await self._events(pod, runtime, ("Created", "Created container {}"),
                           ("Started", "Started container {}"), only=ephemeral)
        await self._backoff_events(pod, runtime)
        if started:
            await self._events(pod, runtime,
                               ("Pulled", 'Container image "{image}" already present on machine'),
                               ("Created", "Created container {}"),
                               ("Started", "Started container {}"))

    async def _may_start(self, key: PodKey, pod: dict[str, Any]) -> bool:
        """Whether the pod's volumes mount and its containers' environment resolves. While
        they do not, it waits (ContainerCreating, CreateContainerConfigError) and is tried
        again after the backoff, not sooner (its events wake nothing); a pod deleted meanwhile
        has nothing to stop: it is removed."""
        store, uid = self.api.store, pod["metadata"]["uid"]
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        now = asyncio.get_running_loop().time()
        wait = self.starting.get(key)
        if wait is not None and wait.uid != uid:
            self._release_sandbox(self.starting.pop(key))  # another pod of that name
            wait = None
        if wait is not None and not deleting and now < wait.due:
            return False

        def get(kind: str, name: str) -> dict[str, Any] | None:
            stored = store.get(self.volume_kinds[kind].storage_key, key[0], name)
            return stored.obj if stored is not None else None

        unmounted = unmounted_volumes(pod, lambda kind, name: get(kind, name) is not None)
        environment = None if unmounted else environment_error(pod, get)
        if not unmounted and environment is None:
            return True  # `_start` takes its sandbox, if it has one
        if deleting:
            options = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
            with contextlib.suppress(StatusError):
                await self.api.delete(self.pods_kind, key[0], key[1], options=options)
            self._forget(key)
            return False
        if wait is None:
            wait = self.starting[key] = StartWait(uid)
        if unmounted:
            self.queue.add_later(key, wait.mount_failed(now))
            await self._write_creating_status(key, pod, {"reason": "ContainerCreating"}, None)
            warnings = [("FailedMount", f'MountVolume.SetUp failed for volume "{volume}" : '
                                        f'{error}') for volume, error in unmounted]
        else:
            assert environment is not None  # the volumes mount, so the environment failed
            self.queue.add_later(key, wait.sync_failed(now))
            if wait.sandbox is None:
                node = pod["spec"]["nodeName"]
                wait.sandbox = (node, self.subnets.allocate(node))
            await self._write_creating_status(
                key, pod, {"reason": "CreateContainerConfigError", "message": environment},
                wait.sandbox[1])
            warnings = [("Failed", f"Error: {environment}")]
        for reason, message in warnings:
            if message not in wait.reported and self.config.record_events:
                wait.reported.add(message)
                await record_event(self.api, pod, "Warning", reason, message,
                                   component="kubelet", host=pod["spec"]["nodeName"])
        return False

    async def _write_creating_status(self, key: PodKey, pod: dict[str, Any],
                                     waiting: dict[str, str], pod_ip: str | None) -> None:
        """Pending, every container `waiting`: as the kubelet reports a pod whose volumes do
        not mount (ContainerCreating, no sandbox yet: no pod IP) or whose containers'
        environment does not resolve (CreateContainerConfigError, in its sandbox: `pod_ip`)."""
        old = pod.get("status") or {}
        node = pod["spec"]["nodeName"]
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        condition = pod_conditions(old)
        unready = f"containers with unready status: [{' '.join(names)}]"
        status = {
            **old, "phase": "Pending",
            "conditions": [
                condition("PodReadyToStartContainers", pod_ip is not None),
                condition("Initialized", True),
                condition("Ready", False, "ContainersNotReady", unready),
                condition("ContainersReady", False, "ContainersNotReady", unready),
                condition("PodScheduled", True)],
            "hostIP": self.node_ip(node), "hostIPs": [{"ip": self.node_ip(node)}],
            **({"podIP": pod_ip, "podIPs": [{"ip": pod_ip}]} if pod_ip else {}),
            "startTime": old.get("startTime") or now_timestamp(),
            "containerStatuses": [
                {"name": c["name"], "state": {"waiting": dict(waiting)},
                 "lastState": {}, "ready": False, "restartCount": 0,
                 "image": c.get("image", ""), "imageID": "", "started": False}
                for c in pod["spec"].get("containers") or []],
        }
        if status != old:
            new = copy_json(pod)
            new["status"] = status
            await self.api.update(self.pods_kind, key[0], key[1], new, subresource="status")

    async def _events(self, pod: dict[str, Any], runtime: PodRuntime,
                      *templates: tuple[str, str], only: list[str] | None = None) -> None:
        """The kubelet's Normal events for each container (reason, message template), or for
        those `only` names."""
        if not self.config.record_events:
            return
        for container in runtime.containers.values():
            if only is not None and container.name not in only:
                continue
            for reason, template in templates:
                message = template.format(container.name, image=container.image)
                await record_event(self.api, pod, "Normal", reason, message,
                                   component="kubelet", host=runtime.node)

    async def _backoff_events(self, pod: dict[str, Any], runtime: PodRuntime) -> None:
        """Warning BackOff, once per wait, as doBackOff records it."""
        for container in runtime.containers.values():
            if container.waiting and not container.backoff_reported:
                container.backoff_reported = True
                if self.config.record_events:
                    await record_event(
                        self.api, pod, "Warning", "BackOff",
                        f"Back-off restarting failed container {container.name} in pod "
                        f"{runtime.ref}", component="kubelet", host=runtime.node)

    async def _stop(self, key: PodKey, pod: dict[str, Any], runtime: PodRuntime) -> bool:
        """Stop the containers, then remove the pod (grace 0); True once it is removed."""
        loop = asyncio.get_running_loop()
        grace = float(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
        wait = grace if runtime.ignores_sigterm else min(self.config.stop_delay, grace)
        if runtime.stopping_since is None:
            runtime.stopping_since = loop.time()
        remaining = runtime.stopping_since + wait - loop.time()
        if remaining > 0:
            self.queue.add_later(key, remaining)
            return False
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": runtime.uid}}
        try:
            await self.api.delete(self.pods_kind, key[0], key[1], options=options)
        except StatusError as error:
            if error.code not in (404, 409):
                raise
        self._forget(key)
        return True

    def _pod_status(self, pod: dict[str, Any], runtime: PodRuntime) -> dict[str, Any]:
        old = pod.get("status") or {}
        statuses = [runtime.containers[c["name"]].status(runtime.uid)
                    for c in pod["spec"].get("containers") or [] if c["name"] in
                    runtime.containers]
        ephemeral = [{**runtime.containers[name].status(runtime.uid), "ready": False}
                     for name in runtime.ephemeral]
        all_ready = all(s["ready"] for s in statuses)
        phase = runtime.phase()
        condition = pod_conditions(old)

        not_ready = "PodCompleted" if phase != "Running" else "ContainersNotReady"
        conditions = [
            condition("PodReadyToStartContainers", phase == "Running"),
            condition("Initialized", True, "PodCompleted" if phase != "Running" else ""),
            condition("Ready", all_ready, "" if all_ready else not_ready),
            condition("ContainersReady", all_ready, "" if all_ready else not_ready),
            condition("PodScheduled", True),
        ]
        status: dict[str, Any] = {
            **old,
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.node_ip(runtime.node),
            "hostIPs": [{"ip": self.node_ip(runtime.node)}],
            "podIP": runtime.ip,
            "podIPs": [{"ip": runtime.ip}],
            "startTime": runtime.started_at,
            "containerStatuses": statuses,
        }
        if ephemeral:
            status["ephemeralContainerStatuses"] = ephemeral
        if runtime.init_containers:
            status["initContainerStatuses"] = [
                {"name": name, "ready": True, "restartCount": 0, "started": False,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                          "startedAt": runtime.started_at,
                                          "finishedAt": runtime.started_at}},
                 "lastState": {}, "image": image, "imageID": ""}
                for name, image in runtime.init_containers
            ]
        return status

    async def _write_status(self, key: PodKey, pod: dict[str, Any],
                            runtime: PodRuntime) -> None:
        status = self._pod_status(pod, runtime)
        if status == pod.get("status"):
            return
        new = copy_json(pod)
        new["status"] = status
        await self.api.update(self.pods_kind, key[0], key[1], new, subresource="status")

    # ------------------------------------------------------------------------- test hooks
    def _on_loop(self, action: Callable[[], None]) -> None:
        apply_on_loop(self.loop, action)

    def _containers(self, namespace: str, name: str,
                    container: str | None) -> tuple[PodKey, PodRuntime, list[ContainerRuntime]]:
        key = (namespace, name)
        runtime = self.runtimes.get(key)
        if runtime is None:
            raise LookupError(f"pod {namespace}/{name} is not running on a simulated worker")
        if container is None:
            return key, runtime, list(runtime.containers.values())
        return key, runtime, [runtime.containers[container]]

    def _end(self, namespace: str, name: str, container: str | None, exit_code: int) -> None:
        def action() -> None:
            key, runtime, containers = self._containers(namespace, name, container)
            now = asyncio.get_running_loop().time()
            for target in containers:
                if target.running:
                    target.terminate(exit_code)
                    wait = runtime.container_ended(target, now)
                    if wait is not None:
                        self.queue.add_later(key, wait)
            self.queue.add(key)

        self._on_loop(action)

    def fail(self, namespace: str, name: str, container: str | None = None,
             exit_code: int = 1) -> None:
        """The container exits with `exit_code` (restarted as restartPolicy says)."""
        self._end(namespace, name, container, exit_code)

    def complete(self, namespace: str, name: str, container: str | None = None) -> None:
        """The container exits with 0 (restarted only under restartPolicy Always)."""
        self._end(namespace, name, container, 0)

    def restart(self, namespace: str, name: str, container: str | None = None) -> None:
        """The container is killed and started again (restartCount + 1), whatever the policy."""

        def action() -> None:
            key, runtime, containers = self._containers(namespace, name, container)
            for target in containers:
                if target.running:
                    target.terminate(137)
                target.restart(runtime.uid)
            self.queue.add(key)

        self._on_loop(action)

    def set_ready(self, namespace: str, name: str, ready: bool,
                  container: str | None = None) -> None:
        """Make the container's readiness probe pass or fail."""

        def action() -> None:
            key, _, containers = self._containers(namespace, name, container)
            for target in containers:
                target.ready_override = ready
            self.queue.add(key)

        self._on_loop(action)

    def ignore_sigterm(self, namespace: str, name: str) -> None:
        """The pod's containers ignore SIGTERM (a shell or `sleep` as PID 1): once the pod is
        deleted, they stop, and the pod goes, only when its grace period ends."""

        def action() -> None:
            _, runtime, _ = self._containers(namespace, name, None)
            runtime.ignores_sigterm = True

        self._on_loop(action)

    def write_log(self, namespace: str, name: str, text: str,
                  container: str | None = None) -> None:
        """Append lines to the container's log (what `pods/log` serves)."""

        def action() -> None:
            _, _, containers = self._containers(namespace, name, container)
            containers[0].append_log(text)

        self._on_loop(action)

    def stop_kubelet(self, node: str) -> None:
        """The node's kubelet is gone (the machine died, or lost its network): it renews no
        Lease, posts no status and does nothing for the node's pods, so a pod deleted meanwhile
        stays Terminating (no kubelet confirms the deletion) and its containers are as they
        were."""
        self._on_loop(lambda: self.paused.add(node))

    def start_kubelet(self, node: str) -> None:
        """The node's kubelet is back: it posts Ready and syncs every pod of the node (one
        deleted meanwhile is stopped and removed)."""
        def action() -> None:
            self.paused.discard(node)
            self._wake.set()
            for key in [key for key, runtime in self.runtimes.items() if runtime.node == node]:
                self.queue.add(key)
            for stored in self.api.store.list(self.pods_kind.storage_key):
                if (stored.obj.get("spec") or {}).get("nodeName") == node:
                    self.queue.add((stored.namespace, stored.name))

        self._on_loop(action)

    # ---------------------------------------------------------------------------- pods/log
    async def _serve_log(self, request: SubresourceRequest) -> str:
        key = (request.namespace, request.name)
        stored = self.api.store.get(self.pods_kind.storage_key, *key)
        if stored is None:
            raise errors.not_found("pods", request.name)
        pod = stored.obj
        node = pod.get("spec", {}).get("nodeName")
        if not node:
            raise errors.bad_request(f"pod {request.name} does not have a host assigned")
        runtime = self.runtimes.get(key)
        if runtime is None and key in self.starting:
            container = request.query.get("container") or next(
                (c["name"] for c in pod["spec"].get("containers") or []), "")
            reason = next((((s.get("state") or {}).get("waiting") or {}).get("reason")
                           for s in (pod.get("status") or {}).get("containerStatuses") or []
                           if s.get("name") == container), None) or "ContainerCreating"
            raise errors.bad_request(f'container "{container}" in pod "{request.name}" is '
                                     f"waiting to start: {reason}")
        if runtime is None:
            raise errors.internal(f"kubesim: node {node} has no simulated kubelet for logs")
        container = request.query.get("container", "")
        if not container:
            if len(runtime.containers) != 1:
                choices = " ".join(runtime.containers)
                raise errors.bad_request(
                    f"a container name must be specified for pod {request.name}, "
                    f"choose one of: [{choices}]")
            container = next(iter(runtime.containers))
        target = runtime.containers.get(container)
        if target is None:
            raise errors.bad_request(
                f"container {container} is not valid for pod {request.name}")
        lines = target.previous_logs if request.query.get("previous") in ("true", "1") else (
            target.logs)
        tail = request.query.get("tailLines")
        if tail:
            lines = lines[-int(tail):] if int(tail) > 0 else []
        return "".join(lines)

    # -------------------------------------------------------------------------------- run
    async def run(self) -> None:
        if self.api.store.get(self.namespaces_kind.storage_key, "", LEASE_NAMESPACE) is None:
            try:
                await self.api.create(self.namespaces_kind, "",
                                      {"metadata": {"name": LEASE_NAMESPACE}})
            except StatusError as error:
                if error.code != 409:
                    raise
        for node in self.node_names:
            await self._register(node)
            await self._renew_lease(node)
        await run_together(
            self._heartbeat_forever(),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            self.queue.run(),
        )
