"""`annexctl test`: a peering checked end to end as its users use it, with the home kubeconfig
only (the provider is read as the consumer identity the VirtualNode's Secret holds, as `status`
reads it).

Steps, each timed and printed as it ends; the first that fails ends the run (exit code 1, the
step named), and the cleanup runs whatever happened:

1. peering ready: the VirtualNode of the provider and its Node, Ready;
2. offload namespace: a probe namespace, extended to that virtual node only, Ready;
3. run pod: a pod bound to the virtual node runs (on the provider);
4. read logs: its log, read through the virtual node's kubelet API (`kubectl logs`);
5. exec: a command run in it the same way (`kubectl exec`);
6. reflect ConfigMap: a ConfigMap of the namespace, found with its data in the twin namespace
   on the provider;
7. clean up: the probe namespace deleted, and gone (the agent released what it held).
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TextIO, TypeVar

from kubernetes import client
from kubernetes.stream import stream
from websocket import WebSocketException

from annexctl import offload
from annexctl.clusters import EXIT_FAILED, CliError, Cluster
from annexctl.consumer import provider_of
from annexctl.output import Report
from annexctl.progress import waiting
from annexctl.status import virtual_nodes
from shared.api.builtin import CONFIGMAPS, NAMESPACES, PODS
from shared.api.namespace_offloading import NamespaceMappingStrategy, PodOffloadingStrategy
from shared.api.virtual_node import VirtualNode
from shared.forge.node import agent_nodes, labels_by_name
from shared.quantity import parse_quantity
from shared.wellknown import (
    HOSTNAME_LABEL,
    REMOTE_CLUSTER_ID_LABEL,
    REMOTE_CREATION_FAILED_CONDITION,
    VIRTUAL_NODE_TAINT_EFFECT,
    VIRTUAL_NODE_TAINT_KEY,
    VIRTUAL_NODE_TAINT_VALUE,
)

DEFAULT_IMAGE = "busybox:1.36"
DEFAULT_TIMEOUT_SECONDS = 60.0
PROBE = "annex-probe"
"""The probe pod's, its container's and the ConfigMap's name."""
NAMESPACE_PREFIX = "annex-test-"
MANAGED_BY = {"app.kubernetes.io/managed-by": "annexctl"}
POLL_SECONDS = 0.5
T = TypeVar("T")


class StepFailed(Exception):
    """What a step found wrong."""


def _ready(node: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (node.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), {})


def probe_node(node_name: str, cluster_id: str,
               nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The agent's Node the probe pod goes to (`nodes`: those labelled with the provider): its
    node, or for a provider with pools the Ready pool node lending the most pods (a pool of no
    node lends none). None when the agent has none."""
    own = agent_nodes(node_name, cluster_id, labels_by_name(nodes))
    candidates = [node for node in nodes if node["metadata"]["name"] in own]
    if not candidates:
        return None

    def room(node: dict[str, Any]) -> tuple[bool, Decimal, str]:
        pods = ((node.get("status") or {}).get("allocatable") or {}).get("pods") or "0"
        return (_ready(node).get("status") == "True", parse_quantity(str(pods)),
                node["metadata"]["name"])

    return max(candidates, key=room)


@dataclass
class Step:
    name: str
    seconds: float
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{self.name:<18} {'ok' if self.ok else 'FAILED':<6} {self.seconds:6.2f}s  " \
               f"{self.detail}"


@dataclass
class Probe:
    home: Cluster
    timeout: float
    image: str
    out: TextIO
    steps: list[Step] = field(default_factory=list)
    virtual_node: VirtualNode | None = None
    node: str = ""
    namespace: str | None = None
    """The probe namespace, once created (the cleanup deletes it)."""
    twin: str = ""
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    """What the pod prints and the ConfigMap holds: found again, it cannot be an old one's."""

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.home.api_client)

    @contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        """Time the block, print its line, record it; a failure is printed and raised as a
        CliError naming the step. The block appends its detail to the list it is given."""
        detail: list[str] = []
        started = time.monotonic()
        try:
            with waiting(name):
                yield detail
        except (StepFailed, CliError) as error:
            self._record(Step(name, time.monotonic() - started, False, str(error)))
            code = error.exit_code if isinstance(error, CliError) else EXIT_FAILED
            raise CliError(f'step "{name}" failed: {error}', code) from None
        self._record(Step(name, time.monotonic() - started, True, " ".join(detail)))

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        self.out.write(step.line() + "\n")
        self.out.flush()

    def until(self, check: Callable[[], T | None], what: str,
              why_not: Callable[[], str] = lambda: "") -> T:
        """`check()`'s first value that is not None, within the step's timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            found = check()
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                reason = why_not()
                raise StepFailed(f"{what} after {self.timeout:g}s"
                                 + (f": {reason}" if reason else ""))
            time.sleep(POLL_SECONDS)

    # --- the steps -------------------------------------------------------------------------

    def peering_ready(self, cluster_id: str | None, namespace: str | None) -> str:
        found = [vn for vn in virtual_nodes(self.home)
                 if (cluster_id is None or vn.spec.cluster_id == cluster_id)
                 and (namespace is None or vn.metadata.namespace == namespace)]
        wanted = " ".join(filter(None, [f"for cluster {cluster_id}" if cluster_id else "",
                                        f"in namespace {namespace}" if namespace else ""]))
        if not found:
            raise StepFailed(f"no VirtualNode {wanted}".rstrip())
        if len(found) > 1:
            names = ", ".join(f"{v.metadata.namespace}/{v.metadata.name} "
                              f"(cluster {v.spec.cluster_id})" for v in found)
            raise StepFailed(f"several VirtualNodes {wanted}: {names}; choose one with "
                             "--remote-cluster-id and -n".replace("  ", " "))
        self.virtual_node = vn = found[0]
        base = vn.status.node_name or vn.spec.effective_node_name()
        nodes = self.home.list("v1", "Node", label_selector=(
            f"{REMOTE_CLUSTER_ID_LABEL}={vn.spec.cluster_id}"))
        node = probe_node(base, vn.spec.cluster_id, nodes) or self.home.get("v1", "Node", base)
        if node is None:
            raise StepFailed(f"virtual node {base} (VirtualNode {vn.metadata.namespace}/"
                             f"{vn.metadata.name}) does not exist: is its home agent running?")
        self.node = node["metadata"]["name"]
        ready = _ready(node)
        if ready.get("status") != "True":
            raise StepFailed(f"virtual node {self.node} is not Ready "
                             f"({ready.get('reason', 'no Ready condition')}: "
                             f"{ready.get('message', '')})")
        return f"virtual node {self.node} of cluster {vn.spec.cluster_id} Ready"

    def offload_namespace(self) -> str:
        name = f"{NAMESPACE_PREFIX}{self.token[:8]}"
        self.home.ensure({**NAMESPACES.type_meta(),
                          "metadata": {"name": name, "labels": MANAGED_BY}})
        self.namespace = name
        manifest = offload.namespace_offloading(
            name, PodOffloadingStrategy.REMOTE, NamespaceMappingStrategy.DEFAULT_NAME, None,
            [f"{HOSTNAME_LABEL}={self.node}"])
        self.home.ensure(manifest)
        status = offload.wait_ready(self.home, name, self.timeout)
        self.twin = str(status.get("remoteNamespaceName") or "")
        return f"namespace {name} extended as {self.twin}"

    def run_pod(self) -> str:
        namespace = self._namespace()
        container = {
            "name": PROBE, "image": self.image,
            "command": ["sh", "-c", f"echo {self.token}; sleep 3600"],
            # What the strictest pod security level admits, whatever the provider asks.
            "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                                "runAsUser": 65534, "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
        }
        self.home.ensure({
            **PODS.type_meta(),
            "metadata": {"name": PROBE, "namespace": namespace, "labels": MANAGED_BY},
            "spec": {"containers": [container], "nodeSelector": {HOSTNAME_LABEL: self.node},
                     "tolerations": [{"key": VIRTUAL_NODE_TAINT_KEY,
                                      "value": VIRTUAL_NODE_TAINT_VALUE,
                                      "effect": VIRTUAL_NODE_TAINT_EFFECT}],
                     "terminationGracePeriodSeconds": 0}})
        last: dict[str, Any] = {}

        def running() -> str | None:
            pod = self.home.get("v1", "Pod", PROBE, namespace) or {}
            last.update(pod)
            status = pod.get("status") or {}
            if status.get("phase") == "Failed":
                raise StepFailed(f"pod {PROBE} failed: {status.get('reason', '')} "
                                 f"{status.get('message', '')}".rstrip())
            return "running" if status.get("phase") == "Running" else None

        self.until(running, f"pod {PROBE} not running", lambda: _pod_state(last))
        return f"pod {namespace}/{PROBE} running on {self.node}"

    def read_logs(self) -> str:
        namespace = self._namespace()

        def printed() -> bool | None:
            with self.home.talking(f"reading the log of pod {namespace}/{PROBE}"):
                text = self.core.read_namespaced_pod_log(PROBE, namespace, container=PROBE)
            return True if self.token in str(text) else None

        self.until(printed, "its log does not show what it printed")
        return "the pod's log read through the virtual node"

    def exec(self) -> str:
        namespace = self._namespace()
        core = client.CoreV1Api(self.home.api_client)
        try:
            output = stream(core.connect_get_namespaced_pod_exec, PROBE, namespace,
                            container=PROBE, command=["echo", "exec", self.token],
                            stderr=True, stdin=False, stdout=True, tty=False,
                            _request_timeout=self.timeout)
        except client.ApiException as error:
            raise StepFailed(f"exec in pod {namespace}/{PROBE}: {error.status} "
                             f"{error.reason}: {error.body or ''}".rstrip()) from None
        except (WebSocketException, OSError) as error:
            raise StepFailed(f"exec in pod {namespace}/{PROBE}: {error}") from None
        if f"exec {self.token}" not in str(output):
            raise StepFailed(f"exec in pod {namespace}/{PROBE} printed {str(output)!r}")
        return "a command run in the pod through the virtual node"

    def reflect_config_map(self) -> str:
        namespace = self._namespace()
        data = {"probe": self.token}
        self.home.ensure({**CONFIGMAPS.type_meta(),
                          "metadata": {"name": PROBE, "namespace": namespace,
                                       "labels": MANAGED_BY}, "data": data})
        assert self.virtual_node is not None
        provider, _ = provider_of(self.home, self.virtual_node)
        try:
            self.until(lambda: True if (provider.get("v1", "ConfigMap", PROBE, self.twin)
                                        or {}).get("data") == data else None,
                       f"ConfigMap {PROBE} not in {self.twin} on the provider")
        finally:
            provider.close()
        return f"ConfigMap {PROBE} found in {self.twin} on the provider"

    def clean_up(self) -> str:
        namespace = self._namespace()
        self.home.delete("v1", "Namespace", namespace)
        self.until(lambda: True if self.home.get("v1", "Namespace", namespace) is None
                   else None, f"namespace {namespace} still there",
                   lambda: _namespace_state(self.home, namespace))
        return f"namespace {namespace} deleted"

    def _namespace(self) -> str:
        assert self.namespace is not None, "the namespace step comes first"
        return self.namespace


def _pod_state(pod: dict[str, Any]) -> str:
    """Why a pod is not running yet, as `kubectl get pod` would say it."""
    status = pod.get("status") or {}
    waiting_reasons = [": ".join(filter(None, (w.get("reason"), w.get("message"))))
                       for s in status.get("containerStatuses") or []
                       if (w := (s.get("state") or {}).get("waiting"))]
    # What is not so yet, and annex's verdict on the remote pod (true when it failed).
    conditions = [f"{c['type']}={c['status']} ({c.get('reason', '')}: {c.get('message', '')})"
                  for c in status.get("conditions") or []
                  if (c.get("status") == "True")
                  == (c.get("type") == REMOTE_CREATION_FAILED_CONDITION)]
    return "; ".join([f"phase {status.get('phase', 'unknown')}", *waiting_reasons,
                      *conditions])


def _namespace_state(home: Cluster, namespace: str) -> str:
    current = home.get("v1", "Namespace", namespace) or {}
    conditions = [f"{c.get('type')}: {c.get('message', '')}"
                  for c in (current.get("status") or {}).get("conditions") or []
                  if c.get("status") == "True"]
    return "; ".join(conditions) or f"phase {(current.get('status') or {}).get('phase')}"


def run(home: Cluster, remote_cluster_id: str | None, *, virtual_node_namespace: str | None,
        image: str = DEFAULT_IMAGE, timeout: float = DEFAULT_TIMEOUT_SECONDS,
        out: TextIO | None = None) -> Report:
    """Run the steps against the peering; CliError naming the first that failed."""
    probe = Probe(home, timeout, image, out or sys.stdout)
    failure: CliError | None = None
    try:
        with probe.step("peering ready") as detail:
            detail.append(probe.peering_ready(remote_cluster_id, virtual_node_namespace))
        for name, action in (("offload namespace", probe.offload_namespace),
                             ("run pod", probe.run_pod), ("read logs", probe.read_logs),
                             ("exec", probe.exec), ("reflect ConfigMap", probe.reflect_config_map)):
            with probe.step(name) as detail:
                detail.append(action())
    except CliError as error:
        failure = error
    finally:  # interrupted too: nothing of the probe is left behind
        if probe.namespace is not None:
            try:
                with probe.step("clean up") as detail:
                    detail.append(probe.clean_up())
            except CliError as error:
                failure = failure or error
    if failure is not None:
        raise failure
    assert probe.virtual_node is not None
    steps = [{"step": s.name, "seconds": round(s.seconds, 3), "ok": s.ok, "detail": s.detail}
             for s in probe.steps]
    return Report({"clusterId": probe.virtual_node.spec.cluster_id, "steps": steps}, [],
                  [f"The peering with {probe.virtual_node.spec.cluster_id} works end to end "
                   f"({sum(s.seconds for s in probe.steps):.1f}s)."])
