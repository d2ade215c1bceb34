"""The validating webhook for the Services, EndpointSlices and Ingresses of twin namespaces.

The consumer identity may write these objects directly (and so may anyone holding its
kubeconfig), so what they expose is checked here against the consumer's service policy
(shared.service_policy), whoever writes them in a twin namespace: the home agent, the consumer
identity by hand, or the provider's own EndpointSlice controller (its slices hold the twin pods'
addresses). Objects of other namespaces are the provider's own and are allowed.

An EndpointSlice may point at the pods of the consumer's twin namespaces: their addresses come
from the enforcer's watch of pods (`PodAddresses`), not from a read per admission. A slice
written right after its pod got an address may come before the watch has it: admission waits a
moment for an address it does not know before refusing it.

An update is refused only for what it adds: a problem the stored object already had (written
before the policy narrowed, say) does not block its other updates, such as a controller
removing its finalizer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from annex.kubeapi import ClusterApi
from remote_enforcer.consumers import Consumers
from shared import service_policy
from shared.api.quota import ServicePolicy

WEBHOOK_PATH = "/validate/network"
LATE_POD_SECONDS = 2.0
"""How long an EndpointSlice's unknown address is waited for in the watch of pods."""
OBJECT_RULES: dict[str, Callable[[Mapping[str, Any], ServicePolicy], list[str]]] = {
    "services": service_policy.service_problems,
    "ingresses": service_policy.ingress_problems,
}


def pod_addresses(pod: Mapping[str, Any]) -> frozenset[str]:
    """The addresses a pod holds: none once it is terminal (its address may go to another pod)
    nor for the host network (its address is the node's)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed") or (pod.get("spec") or {}).get(
            "hostNetwork"):
        return frozenset()
    addresses = {str(entry.get("ip")) for entry in status.get("podIPs") or [] if entry.get("ip")}
    if status.get("podIP"):
        addresses.add(str(status["podIP"]))
    return frozenset(addresses)


class PodAddresses:
    """The pods' addresses by namespace, fed by the enforcer's list+watch of pods."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, frozenset[str]]] = {}
        self._waiting: set[asyncio.Event] = set()
        self.listed = asyncio.Event()
        """Set once the watch of pods has listed them all."""

    def on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        pods = self._by_namespace.setdefault(namespace, {})
        addresses = frozenset() if event_type == "DELETED" else pod_addresses(pod)
        if pods.get(name, frozenset()) == addresses:
            return
        if addresses:
            pods[name] = addresses
        else:
            pods.pop(name, None)
            if not pods:
                del self._by_namespace[namespace]
        for event in self._waiting:
            event.set()

    def of(self, namespaces: Collection[str]) -> frozenset[str]:
        return frozenset(address for namespace in namespaces
                         for addresses in self._by_namespace.get(namespace, {}).values()
                         for address in addresses)

    async def until(self, satisfied: Callable[[], bool], timeout: float) -> None:
        """Return once `satisfied()` holds after a change of addresses, or after `timeout`."""
        deadline = time.monotonic() + timeout
        while not satisfied() and (remaining := deadline - time.monotonic()) > 0:
            changed = asyncio.Event()
            self._waiting.add(changed)
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return
            finally:
                self._waiting.discard(changed)


class ObjectAdmission:
    def __init__(self, api: ClusterApi, consumers: Consumers, pods: PodAddresses,
                 late_pod_seconds: float = LATE_POD_SECONDS) -> None:
        self.api = api
        self.consumers = consumers
        self.pods = pods
        self.late_pod_seconds = late_pod_seconds

    async def review(self, request: Mapping[str, Any]) -> tuple[bool, str]:
        """(allowed, message) for one AdmissionReview request."""
        operation = request.get("operation")
        if operation not in ("CREATE", "UPDATE"):
            return True, ""
        namespace = str(request.get("namespace") or "")
        consumer = self.consumers.twin_consumer(await self.consumers.namespace(self.api,
                                                                               namespace))
        if consumer is None:
            return True, ""  # not a twin namespace: the provider's own objects
        policy = self.consumers.service_policy(consumer)
        resource = str((request.get("resource") or {}).get("resource") or "")
        obj = request.get("object") or {}
        old = request.get("oldObject") if operation == "UPDATE" else None
        if resource == "endpointslices":
            problems = await self._endpointslice_problems(consumer, policy, obj, old)
        elif (rules := OBJECT_RULES.get(resource)) is not None:
            problems = _added(rules(obj, policy), None if old is None else rules(old, policy))
        else:
            return True, ""
        return not problems, "; ".join(problems)

    async def _endpointslice_problems(self, consumer: str, policy: ServicePolicy,
                                      obj: Mapping[str, Any], old: Mapping[str, Any] | None
                                      ) -> list[str]:
        twins = [ns["metadata"]["name"] for ns in self.consumers.twin_namespaces(consumer)]
        await self.pods.listed.wait()

        def problems() -> list[str]:
            addresses = self.pods.of(twins)
            return _added(service_policy.endpointslice_problems(obj, policy, addresses),
                          None if old is None else service_policy.endpointslice_problems(
                              old, policy, addresses))

        await self.pods.until(lambda: not problems(), self.late_pod_seconds)
        return problems()


def _added(now: list[str], before: list[str] | None) -> list[str]:
    """The problems an update adds to what the stored object already had."""
    return [problem for problem in now if problem not in (before or [])]
