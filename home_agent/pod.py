"""Pod offloading: a home pod bound to the virtual node ⇄ its ShadowPod in the twin namespace.

One reconcile per home pod key (namespace, name), from both mirrors:
- bound, namespace extended, no ShadowPod → create it (forge); a refusal (quota, invalid spec)
  becomes a RemoteCreationFailed condition and an Event, retried with backoff;
- a ShadowPod of that name that another peering owns → left alone, a FailedReflection Event;
- ShadowPod present → propagate the changes a running pod accepts, labels and annotations, and
  in a write of their own the ephemeral containers `kubectl debug` added (one the provider
  refuses: a FailedReflection Event, not sent again);
  copy the remote status back (forge), only when it changed; a remote pod the remote API server
  refuses (the ShadowPod's `PodCreated` False) becomes the RemoteCreationFailed condition and
  an Event, as a refused ShadowPod does;
- home pod terminating → delete the ShadowPod in the foreground: the garbage collector removes
  it only once its pod is gone, after the pod's grace period (the pod's controller reference
  blocks its owner's deletion); once the ShadowPod is gone, release the home pod (grace 0);
- home pod gone → delete the ShadowPod, but only after the home API server confirms the pod is
  gone: a cache that has not finished listing must never cost a running remote pod (Liqo #2748);
- a DaemonSet's pod (and no ShadowPod made earlier) → never offloaded, never deleted: Pending
  with reason DaemonSetPodNotOffloaded, an Event on the pod and its DaemonSet saying why and how
  to keep the DaemonSet off virtual nodes (`shared.forge.daemonset`);
- namespace not extended → Pending with reason OffloadingBackOff;
- a claim it mounts bound to a home volume (not one the virtual node provisioned: its data stays
  home) → not offloaded: Pending with reason OffloadingBackOff and an Event saying which claim,
  looked at again with backoff;
- its requests exceed what one pod can get on the provider (the node's max-pod-resources) → no
  ShadowPod: returned to the scheduler (deleted, for its controller to make another that the
  pod webhook keeps off this node) or held with reason OffloadingBackOff, an Event saying which
  and why, looked at again with backoff (`shared.forge.pod_fit`);
- it mounts service-account tokens and their Secret is not made yet (token reflection) → the
  ShadowPod waits for it, as a kubelet waits for a pod's volumes: a remote pod made first would
  sit in ContainerCreating with FailedMount warnings and start only at the kubelet's next try
  (its backoff doubles up to 2 min). The Secret's event brings the pod back (`routes`);
- likewise for the copies of the ConfigMaps and Secrets it needs (volumes, environment) that the
  reflectors are about to make (`home_agent.reflection.required`), for 30 s at most.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from annex import tracing
from annex.controller import DONE, RETRY, Result
from annex.informers import Change
from annex.kubeapi import core_path, custom_path, error_message, error_reason, is_not_found
from annex.writes import confirmed_gone, delete_owned
from home_agent.agent import HOME, REMOTE, Agent
from home_agent.reflection.persistentvolumeclaim import PERSISTENTVOLUMECLAIMS
from home_agent.watches import OFFLOADED_WATCH
from shared.api.shadowpod import SHADOWPOD
from shared.forge.daemonset import (
    DAEMONSET_POD_REASON,
    daemon_set_object,
    daemon_set_of,
    not_offloaded_message,
)
from shared.forge.node import max_pod_resources_of
from shared.forge.persistentvolume import home_data_problem, unbound_claims
from shared.forge.pod import (
    QUOTA_NOT_COUNTED_REASON,
    PodForgeConfig,
    StatusField,
    StatusForgeConfig,
    added_ephemeral_containers,
    merged_status,
    offloading_backoff_status,
    projected_service_account_tokens,
    remote_creation_failed_condition,
    remote_pod_refused_condition,
    service_account_token_secret_name,
    shadow_pod_ephemeral_patch,
    shadow_pod_patch,
    shadow_pod_refusal,
    shadow_pod_with_warnings,
    status_from_shadow,
    unkept_status_fields,
    with_condition,
)
from shared.forge.pod_fit import controller_of, misfit, return_time
from shared.offer import pod_shortfalls
from shared.ownership import is_owned
from shared.wellknown import (
    FAILED_REFLECTION_REASON,
    OFFLOADING_BACKOFF_REASON,
    REMOTE_CREATION_FAILED_CONDITION,
    RETURNED_TO_SCHEDULER_REASON,
    VIRTUAL_STORAGE_PROVISIONER,
)

log = logging.getLogger(__name__)

RETURNS_REMEMBERED_SECONDS = 600.0
"""How long a controller's pod given back keeps the pods it makes afterwards from being given
back too (`shared.forge.pod_fit`): a loop, were the webhook not keeping them off, runs once a
period."""


def own_echo(agent: Agent, side: str, change: Change) -> bool:
    """Whether `change` is the watch's echo of the agent's own write (`_write_echoed`)."""
    return agent.echoes.echo((side, *change.key), change)


def _as_sent(answer: Any, body: dict[str, Any], field: str) -> bool:
    """Whether the server stored `body` as sent: `field` (no status on a creation), labels
    and annotations."""
    if not isinstance(answer, dict):
        return False
    got, sent = answer.get("metadata") or {}, body.get("metadata") or {}
    return answer.get(field) == body.get(field) and all(
        got.get(each) == sent.get(each) for each in ("labels", "annotations")) and (
        field == "status" or not answer.get("status"))


class CopyWaits(Protocol):
    """The wait for the remote copies of what a pod needs to start
    (`home_agent.reflection.required.RequiredCopies`)."""

    def wait(self, key: tuple[str, str], pod: Mapping[str, Any], remote_namespace: str,
             now: float) -> float | None:
        """Seconds more to wait; None: nothing to wait for."""

    def forget(self, key: tuple[str, str]) -> None:
        """The pod waits no more."""


class PodOffloader:
    def __init__(self, agent: Agent, copies: CopyWaits | None = None) -> None:
        self.agent = agent
        self.copies = copies
        """None: the ShadowPod is made without waiting for copies of what the pod needs."""
        self.events = agent.events
        self._forge_config: tuple[tuple[object, ...], PodForgeConfig] | None = None
        self._status_config: tuple[object, StatusForgeConfig] | None = None
        """The configs as built from the (frozen) agent config and the parsed VirtualNode they
        were built from: every reconcile reads them, and they change with those only."""
        self._unkept_status: set[StatusField] = set()
        """The pod status fields the home API server does not keep, as its answers to status
        writes show (status.hostIPs before Kubernetes 1.28): the comparison leaves them out,
        or every reconcile would write them again. Learnt from the first answer, not from
        the server's version: feature gates decide too."""
        self._refused_ephemeral: dict[tuple[str, str], tuple[Any, frozenset[str]]] = {}
        """Pod key → its uid and the ephemeral containers the provider refused (not sent
        again: they cannot be removed from the home pod)."""
        self._returned: dict[str, tuple[datetime, float]] = {}
        """Controller uid → when (the API server's time) its first pod was given back, and
        when that was on this agent's monotonic clock (to forget it)."""

    def forge_config(self) -> PodForgeConfig:
        config = self.agent.config
        virtual_node = self.agent.virtual_node()  # the same object until the VirtualNode changes
        cached = self._forge_config
        if cached is not None and cached[0][0] is config and cached[0][1] is virtual_node:
            return cached[1]
        patch = virtual_node.spec.offloading_patch if virtual_node else None
        built = PodForgeConfig(
            reflection=self.agent.reflection_config(),
            home_apiserver_host=config.home_apiserver_host,
            home_apiserver_port=config.home_apiserver_port,
            enable_apiserver_support=config.enable_apiserver_support,
            offloading_patch=patch,
        )
        self._forge_config = ((config, virtual_node), built)
        return built

    def status_config(self) -> StatusForgeConfig:
        config = self.agent.config
        cached = self._status_config
        if cached is not None and cached[0] is config:
            return cached[1]
        built = StatusForgeConfig(node_ip=config.host_ip, pod_cidr=config.remote_pod_cidr,
                                  remapped_pod_cidr=config.remapped_pod_cidr)
        self._status_config = (config, built)
        return built

    async def reconcile(self, namespace: str, name: str) -> Result:
        agent = self.agent
        pod = agent.informers.latest(HOME, "pods", (namespace, name))
        remote_namespace = agent.twins.mapped(namespace)
        shadow = (agent.mirrors.shadow_pods.get((remote_namespace, name))
                  if remote_namespace else None)
        if shadow is not None and not is_owned(shadow, agent.config.home_cluster_id,
                                                agent.config.remote_cluster_id):
            shadow = None  # never ours to touch (the watch selects ours; belt and braces)
        if pod is None:
            self._refused_ephemeral.pop((namespace, name), None)
            if self.copies is not None:
                self.copies.forget((namespace, name))  # a terminating pod ends here too
            if shadow is not None:
                await self._delete_orphan(namespace, name, shadow)
            return DONE
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            await self._terminate(pod, shadow, remote_namespace)
            return DONE
        if shadow is None and (daemon_set := daemon_set_of(pod)) is not None:
            await self._leave_daemon_pod(pod, daemon_set)
            return DONE
        accepted = agent.twins.accepted(namespace)
        if accepted is None:
            await self._back_off(pod)
            return DONE
        if shadow is None:
            if self._claims_behind(pod):
                return RETRY  # the claims' cache lags the pod: judged once it has them
            if (problem := self._home_data_problem(pod)) is not None:
                await self._back_off(pod, problem)
                await self.events.record(pod, OFFLOADING_BACKOFF_REASON, problem)
                return RETRY  # looked at again with backoff: the claim may be rebound
            if shortfalls := self._shortfalls(pod):
                return await self._does_not_fit(pod, shortfalls)
            if self._token_behind(pod, accepted):
                return DONE
            if (wait := self._copies_behind((namespace, name), pod, accepted)) is not None:
                return Result(requeue_after=wait)  # or sooner: the copy's event
            return await self._create(pod, accepted)
        await self._update(pod, shadow)
        await self._status_back(pod, shadow)
        return DONE

    # --- deletion ---------------------------------------------------------------------------

    async def _delete_shadow(self, shadow: dict[str, Any]) -> None:
        metadata = shadow["metadata"]
        if metadata.get("deletionTimestamp"):
            return
        await delete_owned(self.agent.remote,
                           custom_path(SHADOWPOD, metadata["namespace"], metadata["name"]),
                           metadata.get("uid"), {"propagationPolicy": "Foreground"})

    async def _delete_orphan(self, namespace: str, name: str, shadow: dict[str, Any]) -> None:
        if not await confirmed_gone(self.agent.home, core_path("pods", namespace, name)):
            return  # the pod exists: our cache is behind, its event will come
        log.info("home pod %s/%s is gone: deleting its ShadowPod", namespace, name)
        await self._delete_shadow(shadow)

    async def _terminate(self, pod: dict[str, Any], shadow: dict[str, Any] | None,
                         remote_namespace: str | None) -> None:
        metadata = pod["metadata"]
        if shadow is not None:
            await self._delete_shadow(shadow)
            return  # the ShadowPod's DELETED event brings us back
        if remote_namespace is not None:
            remote = self.agent.remote
            try:
                await remote.get(custom_path(SHADOWPOD, remote_namespace, metadata["name"]))
                return  # still there: the remote cache is behind
            except Exception as error:
                if not is_not_found(error):
                    raise
        home = self.agent.home
        try:
            await home.delete(core_path("pods", metadata["namespace"], metadata["name"]),
                              {"gracePeriodSeconds": 0,
                               "preconditions": {"uid": metadata.get("uid")}})
        except Exception as error:
            if not is_not_found(error):
                raise

    # --- creation and updates ---------------------------------------------------------------

    async def _create(self, pod: dict[str, Any], remote_namespace: str) -> Result:
        body, warnings = shadow_pod_with_warnings(pod, remote_namespace, self.forge_config())
        tracing.with_traceparent(body)  # the enforcer's reconcile of it continues this trace
        for warning in warnings:
            await self.events.record(pod, FAILED_REFLECTION_REASON, warning)
        echo = (REMOTE, remote_namespace, body["metadata"]["name"])
        try:
            await self._write_echoed(echo, self.agent.remote.create(
                custom_path(SHADOWPOD, remote_namespace), body), body, "spec")
        except Exception as error:
            if getattr(error, "status", None) == 409:
                # Created already (its watch event brings it into the mirror), or not ours.
                return await self._report_foreign(pod, remote_namespace, body["metadata"]["name"])
            reason, message = shadow_pod_refusal(error_reason(error), error_message(error))
            log.log(logging.INFO if reason == QUOTA_NOT_COUNTED_REASON else logging.WARNING,
                    "could not create ShadowPod %s/%s: %s", remote_namespace,
                    body["metadata"]["name"], message)
            now = datetime.now(UTC)
            status = with_condition(pod.get("status") or {},
                                    remote_creation_failed_condition(reason, message, now))
            await self._write_status(pod, status)
            await self.events.record(pod, REMOTE_CREATION_FAILED_CONDITION, message)
            return RETRY
        return DONE

    async def _report_foreign(self, pod: dict[str, Any], remote_namespace: str,
                              name: str) -> Result:
        """A ShadowPod of the pod's name that is not ours (another peering's, by its origin and
        destination labels) is left alone and reported on the home pod; retried with backoff,
        in case it goes."""
        existing = await self.agent.remote.find(custom_path(SHADOWPOD, remote_namespace, name))
        config = self.agent.config
        if existing is None or is_owned(existing, config.home_cluster_id,
                                        config.remote_cluster_id):
            return DONE
        message = (f"ShadowPod {remote_namespace}/{name} exists and is not this peering's "
                   "(its origin/destination labels differ): left alone, the pod is not offloaded")
        log.warning("pod %s/%s: %s", pod["metadata"]["namespace"], name, message)
        await self.events.record(pod, FAILED_REFLECTION_REASON, message)
        return RETRY

    async def _update(self, pod: dict[str, Any], shadow: dict[str, Any]) -> None:
        config = self.forge_config()
        metadata = shadow["metadata"]
        path = custom_path(SHADOWPOD, metadata["namespace"], metadata["name"])
        patch = shadow_pod_patch(shadow, pod, config)
        if patch is not None:
            tracing.with_traceparent(patch)
            answer = await self.agent.remote.patch(path, patch)
            shadow = answer if isinstance(answer, dict) else shadow
        await self._add_ephemeral_containers(pod, shadow, path, config)

    async def _add_ephemeral_containers(self, pod: dict[str, Any], shadow: dict[str, Any],
                                        path: str, config: PodForgeConfig) -> None:
        """The containers `kubectl debug` added to the home pod, added to its ShadowPod. Ones
        the provider refuses (its pod policy) are said in an Event once and not sent again
        (they cannot be removed from the home pod): the pod's other changes still go."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        refused = self._refused_ephemeral.get(key)
        if refused is not None and refused[0] != pod["metadata"].get("uid"):
            refused = None  # another pod of that name
        added = [c for c in added_ephemeral_containers(shadow, pod, config)
                 if refused is None or c.get("name") not in refused[1]]
        patch = shadow_pod_ephemeral_patch(shadow, added)
        if patch is None:
            return
        try:
            await self.agent.remote.patch(path, patch)
        except Exception as error:
            if getattr(error, "status", None) not in (403, 422):
                raise
            names = frozenset(str(c.get("name")) for c in added)
            self._refused_ephemeral[key] = (pod["metadata"].get("uid"),
                                            (refused[1] if refused else frozenset()) | names)
            message = (f"ephemeral containers {', '.join(sorted(names))} not added to the "
                       f"remote pod: {error_message(error)}")
            log.warning("pod %s/%s: %s", *key, message)
            await self.events.record(pod, FAILED_REFLECTION_REASON, message)

    # --- pods not offloaded -----------------------------------------------------------------

    async def _leave_daemon_pod(self, pod: dict[str, Any], daemon_set: dict[str, Any]) -> None:
        """Pending, saying why; said in Events once, when the status first says it."""
        message = not_offloaded_message(daemon_set, self.agent.node_name())
        status = pod.get("status") or {}
        if status.get("reason") == DAEMONSET_POD_REASON and status.get("message") == message:
            return
        await self._back_off(pod, message, DAEMONSET_POD_REASON)
        await self.events.record(pod, DAEMONSET_POD_REASON, message)
        await self.events.record(daemon_set_object(pod, daemon_set), DAEMONSET_POD_REASON,
                                 f"pod {pod['metadata']['name']}: {message}")

    # --- pods no provider node can run -------------------------------------------------------

    def _shortfalls(self, pod: dict[str, Any]) -> list[str]:
        """What of the pod's requests no provider node has free, as the virtual node says."""
        node = self.agent.mirrors.nodes.get(("", self.agent.node_name()))
        return pod_shortfalls(pod.get("spec") or {}, max_pod_resources_of(node))

    def _returned_since(self, controller_uid: str) -> datetime | None:
        remembered = self._returned.get(controller_uid)
        if remembered is None:
            return None
        if time.monotonic() - remembered[1] > RETURNS_REMEMBERED_SECONDS:
            del self._returned[controller_uid]
            return None
        return remembered[0]

    async def _does_not_fit(self, pod: dict[str, Any], shortfalls: list[str]) -> Result:
        metadata = pod["metadata"]
        controller = controller_of(pod) or {}
        verdict = misfit(pod, self.agent.node_name(), shortfalls,
                         webhook_serves=bool(self.agent.config.webhook_address),
                         returned_since=self._returned_since(str(controller.get("uid"))))
        if not verdict.returned:
            await self._back_off(pod, verdict.message)
            await self.events.record(pod, OFFLOADING_BACKOFF_REASON, verdict.message)
            return RETRY  # looked at again with backoff: a provider node may make room
        log.info("pod %s/%s: %s", metadata["namespace"], metadata["name"], verdict.message)
        await self.events.record(pod, RETURNED_TO_SCHEDULER_REASON, verdict.message)
        try:
            answer = await self.agent.home.delete(
                core_path("pods", metadata["namespace"], metadata["name"]),
                {"preconditions": {"uid": metadata.get("uid")}})
        except Exception as error:
            if not is_not_found(error) and getattr(error, "status", None) != 409:
                raise
            return DONE  # gone, or another pod of that name now: its own events come
        now = time.monotonic()
        for uid in [uid for uid, (_, at) in self._returned.items()
                    if now - at > RETURNS_REMEMBERED_SECONDS]:
            del self._returned[uid]
        self._returned.setdefault(str(controller.get("uid")),
                                  (return_time(answer, datetime.now(UTC)), now))
        return DONE  # its deletion's event brings it back, to terminate

    # --- status -----------------------------------------------------------------------------

    async def _status_back(self, pod: dict[str, Any], shadow: dict[str, Any]) -> None:
        shadow_status = shadow.get("status") or {}
        wanted = status_from_shadow(pod.get("status") or {}, shadow_status,
                                    self.status_config())
        if wanted is None:
            return
        refused = remote_pod_refused_condition(shadow_status)
        if refused is not None:
            # once per distinct message, not once per status echo
            await self.events.record(pod, REMOTE_CREATION_FAILED_CONDITION, refused["message"])
        await self._write_status(pod, wanted)

    async def _back_off(self, pod: dict[str, Any], message: str | None = None,
                        reason: str = OFFLOADING_BACKOFF_REASON) -> None:
        await self._write_status(pod, offloading_backoff_status(pod, datetime.now(UTC), message,
                                                                reason))

    def _claims_behind(self, pod: dict[str, Any]) -> bool:
        """A claim the bound pod mounts is not known bound yet (the claims are watched only
        while claims are reflected)."""
        if PERSISTENTVOLUMECLAIMS not in self.agent.informers.watched(HOME, OFFLOADED_WATCH):
            return False
        claims = self.agent.informers.mirror(HOME, PERSISTENTVOLUMECLAIMS[2])
        namespace = pod["metadata"]["namespace"]
        return bool(unbound_claims(pod, lambda name: claims.get((namespace, name))))

    def _token_behind(self, pod: dict[str, Any], remote_namespace: str) -> bool:
        """The pod mounts service-account tokens whose remote Secret is not made yet."""
        if not self.agent.config.reflects_tokens or not projected_service_account_tokens(pod):
            return False
        secret = (remote_namespace, service_account_token_secret_name(pod["metadata"]["name"]))
        return self.agent.informers.latest(REMOTE, "secrets", secret) is None

    def _copies_behind(self, key: tuple[str, str], pod: dict[str, Any],
                       remote_namespace: str) -> float | None:
        """Seconds more the ShadowPod is to wait for copies of what the pod needs."""
        if self.copies is None:
            return None
        return self.copies.wait(key, pod, remote_namespace, asyncio.get_running_loop().time())

    def _home_data_problem(self, pod: dict[str, Any]) -> str | None:
        """A claim the pod mounts is bound to a home volume (not this virtual node's)."""
        informers, namespace = self.agent.informers, pod["metadata"]["namespace"]
        claims = informers.mirror(HOME, PERSISTENTVOLUMECLAIMS[2])
        volumes = informers.mirror(HOME, "persistentvolumes")  # the virtual node's only
        return home_data_problem(pod, lambda name: claims.get((namespace, name)),
                                 lambda name: volumes.get(("", name)),
                                 VIRTUAL_STORAGE_PROVISIONER, self.agent.node_name())

    async def _write_echoed(self, echo: tuple[str, str, str], write: Awaitable[Any],
                            body: dict[str, Any], field: str) -> Any:
        """One write, which ends its reconcile, of the object `echo` names: its echo is
        skipped when the server stored `body` as sent, for the reconcile of that echo would
        read what this one wrote and decided on."""
        with self.agent.echoes.writing(echo):
            answer = await write
            if _as_sent(answer, body, field):
                self.agent.echoes.answered(echo, answer)
        return answer

    async def _write_status(self, pod: dict[str, Any], wanted: dict[str, Any]) -> None:
        """Replace the pod's status with `wanted` merged over it (None removes a field); no
        write when nothing differs. The resourceVersion guards against a concurrent writer."""
        current = pod.get("status") or {}
        merged = merged_status(current, wanted, self._unkept_status)
        if merged is None:
            return
        log.debug("pod %s/%s status: %s", pod["metadata"]["namespace"], pod["metadata"]["name"],
                  {k: (current.get(k), v) for k, v in merged.items() if current.get(k) != v})
        body = {**pod, "status": merged}
        metadata = pod["metadata"]
        written = await self._write_echoed(
            (HOME, metadata["namespace"], metadata["name"]), self.agent.home.replace(
                core_path("pods", metadata["namespace"], metadata["name"], "status"), body),
            body, "status")
        stored = written.get("status") if isinstance(written, dict) else None
        if isinstance(stored, dict) and stored != merged:
            self._unkept_status |= unkept_status_fields(merged, stored)
        if metadata.get("resourceVersion"):
            self.agent.informers.answered(HOME, "pods", metadata["resourceVersion"], written)
