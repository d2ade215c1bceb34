"""Pod offloading: a home pod bound to the virtual node ⇄ its ShadowPod in the twin namespace.

One reconcile per home pod key (namespace, name), from both mirrors: it gathers what the
decision reads (`PodSources.gather`: the pod, its ShadowPod, the twin namespaces, the configs
and, for a pod not offloaded yet, its claims, the virtual node, its token Secret and the copies
it waits for), asks for the plan (`shared.forge.pod_plan`, which says the decision) and carries
it out (`PodOffloader`), each step a write or two and what its answer tells. The plan's inputs
are what the restart cache compares (`home_agent.synced_cache`).

Why some steps are as they are:
- a ShadowPod is deleted in the foreground: the garbage collector removes it only once its
  pod is gone, after the pod's grace period (the pod's controller reference blocks its owner's
  deletion); the home pod is released once its ShadowPod is gone;
- a home pod gone is confirmed by the home API server before its ShadowPod goes: a cache that
  has not finished listing must never cost a running remote pod (Liqo #2748);
- a pod mounting service-account tokens waits for their Secret (token reflection), as a
  kubelet waits for a pod's volumes: a remote pod made first would sit in ContainerCreating
  with FailedMount warnings and start only at the kubelet's next try (its backoff doubles up
  to 2 min). The Secret's event brings the pod back (`routes`); likewise the copies of the
  ConfigMaps and Secrets it needs (`home_agent.reflection.required`), for 30 s at most;
- a ShadowPod's creation or the pod's status written is not read back through its watch echo
  (`_write_echoed`): the reconcile of that echo would read what this one wrote; and their
  answers are read ahead of the echo (`annex.informers.Written`), so that a reconcile meanwhile
  (the pod changed while its ShadowPod was being created: a new leader's first burst, a create
  the enforcer held) neither creates the ShadowPod again (409) nor writes over a replaced status;
- the status fields the home API server drops from every write (status.hostIPs before
  Kubernetes 1.28) are learnt from its answers and left out of the comparison, or every
  reconcile would write them again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from annex import tracing
from annex.api_errors import error_message, error_reason, is_not_found
from annex.api_paths import core_path, custom_path
from annex.controller import DONE, RETRY, Result
from annex.events import EventRecorder
from annex.informers import Echoes, Written
from annex.kubeapi import ClusterApi
from annex.mirror import Key, Mirror
from annex.writes import confirmed_gone, delete_owned
from home_agent.reflection.required import RequiredCopies
from home_agent.twins import TwinNamespaces
from shared.api.shadowpod import SHADOWPOD
from shared.forge.persistentvolume import pod_claim_names
from shared.forge.pod import PodForgeConfig
from shared.forge.pod_fit import controller_of, return_time
from shared.forge.pod_inputs import OffloadingInputs, PodInputs
from shared.forge.pod_plan import (
    COPY_WAIT,
    AddEphemeralContainers,
    CreateShadowPod,
    DeleteShadowPod,
    ForgetPod,
    PatchShadowPod,
    PodPlan,
    RecordEvent,
    ReleasePod,
    ReturnToScheduler,
    Step,
    StopWaitingForCopies,
    WaitForCopies,
    WriteStatus,
    foreign_shadow_pod,
    foreign_shadow_pod_message,
    pod_plan,
    refused_creation,
    refused_ephemeral_message,
)
from shared.forge.pod_status import (
    QUOTA_NOT_COUNTED_REASON,
    StatusField,
    StatusForgeConfig,
    shadow_pod_refusal,
    unkept_status_fields,
)
from shared.forge.pod_tokens import service_account_token_secret_name
from shared.forge.shadow_pod_patch import shadow_pod_ephemeral_patch
from shared.ownership import is_owned
from shared.wellknown import FAILED_REFLECTION_REASON

log = logging.getLogger(__name__)

HOME, REMOTE = "home", "remote"
"""The sides of the echoes' keys (as the agent's informer registry names them)."""

RETURNS_REMEMBERED_SECONDS = 600.0
"""How long a controller's pod given back keeps the pods it makes afterwards from being given
back too (`shared.forge.pod_fit`): a loop, were the webhook not keeping them off, runs once a
period."""


def _as_sent(answer: Any, body: dict[str, Any], field: str) -> bool:
    """Whether the server stored `body` as sent: `field` (no status on a creation), labels
    and annotations."""
    if not isinstance(answer, dict):
        return False
    got, sent = answer.get("metadata") or {}, body.get("metadata") or {}
    return answer.get(field) == body.get(field) and all(
        got.get(each) == sent.get(each) for each in ("labels", "annotations")) and (
        field == "status" or not answer.get("status"))


@dataclass(frozen=True)
class PodSources:
    """What the offloader reads to decide on a pod."""

    pods: Written
    """The home pods bound to the virtual node (our status writes' answers told)."""
    shadow_pods: Written
    """Our ShadowPods in the accepted twin namespaces (our creations' answers told: a reconcile
    between a creation's answer and its watch echo must not create it again)."""
    twins: TwinNamespaces
    nodes: Mirror
    """The home nodes (the virtual one says what one pod can get on the provider)."""
    claims: Mirror | None
    """The home claims of the namespaces offloaded here, when claims are reflected (else they
    are not watched: None)."""
    volumes: Mirror
    """The home volumes of the virtual provisioner."""
    token_secrets: Written
    """The Secrets of the twin namespaces (the pods' token Secrets among them)."""
    copies: RequiredCopies | None
    """The pods' wait for copies of what they need (None: the ShadowPod never waits)."""
    node_name: Callable[[], str]
    node_pools: Callable[[], Mapping[str, str | None]]
    """The agent's nodes, name → pool (`Agent.node_pools`)."""
    forge_config: Callable[[], PodForgeConfig]
    """As the flags and the VirtualNode say it now (the same object until they change)."""
    status_config: StatusForgeConfig
    home_cluster_id: str
    remote_cluster_id: str
    tokens_reflected: bool
    webhook_serves: bool
    clock: Callable[[], float]
    """The agent's monotonic clock (the copies' wait)."""


class PodOffloader:
    def __init__(self, sources: PodSources, home: ClusterApi, remote: ClusterApi,
                 events: EventRecorder, echoes: Echoes) -> None:
        self.sources = sources
        self.home = home
        self.remote = remote
        self.events = events
        """The agent's one recorder at home."""
        self.echoes = echoes
        """The agent's, by (side, namespace, name): read by the pods' routes."""
        self._unkept_status: set[StatusField] = set()
        """The pod status fields the home API server does not keep, as its answers to status
        writes show (status.hostIPs before Kubernetes 1.28). Learnt from the first answer, not
        from the server's version: feature gates decide too."""
        self._refused_ephemeral: dict[Key, tuple[Any, frozenset[str]]] = {}
        """Pod key → its uid and the ephemeral containers the provider refused (not sent
        again: they cannot be removed from the home pod)."""
        self._returned: dict[str, tuple[datetime, float]] = {}
        """Controller uid → when (the API server's time) its first pod was given back, and
        when that was on this agent's monotonic clock (to forget it)."""

    async def reconcile(self, namespace: str, name: str) -> Result:
        inputs = self.gather(namespace, name)
        return await self.carry_out(inputs, pod_plan(inputs))

    # --- gathering --------------------------------------------------------------------------

    def gather(self, namespace: str, name: str) -> PodInputs:
        """What the decision on the pod `namespace/name` reads, as the mirrors hold it now."""
        sources, key = self.sources, (namespace, name)
        pod = sources.pods.latest(key)
        mapped = sources.twins.mapped(namespace)
        shadow = sources.shadow_pods.latest((mapped, name)) if mapped else None
        if shadow is not None and not is_owned(shadow, sources.home_cluster_id,
                                                sources.remote_cluster_id):
            shadow = None  # never ours to touch (the watch selects ours; belt and braces)
        accepted = sources.twins.accepted(namespace)
        pools = sources.node_pools()
        bound = str(((pod or {}).get("spec") or {}).get("nodeName") or "")
        node_name = bound if bound in pools else sources.node_name()
        refused = self._refused_ephemeral.get(key)
        live = pod is not None and not (pod.get("metadata") or {}).get("deletionTimestamp")
        return PodInputs(
            key=key, pod=pod, shadow=shadow, mapped_namespace=mapped, accepted_namespace=accepted,
            node_name=node_name, pool=pools.get(node_name), forge=sources.forge_config(),
            status=sources.status_config,
            unkept_status=frozenset(self._unkept_status),
            refused_ephemeral=(refused[1] if refused is not None and pod is not None
                               and refused[0] == pod["metadata"].get("uid") else frozenset()),
            now=datetime.now(UTC),
            offloading=(self._offloading(key, pod, accepted, node_name)
                        if pod is not None and live and shadow is None and accepted is not None
                        else None))

    def _offloading(self, key: Key, pod: dict[str, Any], twin: str,
                    node_name: str) -> OffloadingInputs:
        sources, namespace = self.sources, key[0]
        names = pod_claim_names(pod)
        claims = (None if sources.claims is None
                  else {name: sources.claims.get((namespace, name)) for name in names})
        bound = {str(volume) for claim in (claims or {}).values()
                 if (volume := ((claim or {}).get("spec") or {}).get("volumeName"))}
        copies = sources.copies
        return OffloadingInputs(
            claims=claims, volumes={name: sources.volumes.get(("", name)) for name in bound},
            node=sources.nodes.get(("", node_name)), webhook_serves=sources.webhook_serves,
            returned_since=self._returned_since(str((controller_of(pod) or {}).get("uid"))),
            tokens_reflected=sources.tokens_reflected,
            token_secret_made=sources.token_secrets.latest(
                (twin, service_account_token_secret_name(key[1]))) is not None,
            pending_copies=tuple(copies.pending(key, pod, twin)) if copies else (),
            waiting_since=copies.since(key) if copies else None, clock=sources.clock())

    def _returned_since(self, controller_uid: str) -> datetime | None:
        remembered = self._returned.get(controller_uid)
        if remembered is None:
            return None
        if time.monotonic() - remembered[1] > RETURNS_REMEMBERED_SECONDS:
            del self._returned[controller_uid]
            return None
        return remembered[0]

    # --- carrying out -----------------------------------------------------------------------

    async def carry_out(self, inputs: PodInputs, plan: PodPlan) -> Result:
        """The plan's steps in order; a step whose answer decides otherwise ends the plan with
        what it decided."""
        shadow = inputs.shadow
        for step in plan.steps:
            ended: Result | None = None
            match step:
                case PatchShadowPod():
                    shadow = await self._patch(shadow, step.patch)
                case AddEphemeralContainers():
                    await self._add_ephemeral(inputs, shadow, step.containers)
                case _:
                    ended = await self._step(inputs, step)
            if ended is not None:
                return ended
        if plan.retry:
            return RETRY
        return DONE if plan.requeue_after is None else Result(requeue_after=plan.requeue_after)

    async def _step(self, inputs: PodInputs, step: Step) -> Result | None:
        pod, key, copies = inputs.pod or {}, inputs.key, self.sources.copies
        match step:
            case ForgetPod():
                self._refused_ephemeral.pop(key, None)
                if copies is not None:
                    copies.forget(key)
            case DeleteShadowPod():
                if step.once_pod_gone:
                    if not await confirmed_gone(self.home, core_path("pods", *key)):
                        return DONE  # the pod exists: our cache is behind, its event will come
                    log.info("home pod %s/%s is gone: deleting its ShadowPod", *key)
                await delete_owned(self.remote, custom_path(SHADOWPOD, step.namespace, step.name),
                                   step.uid, {"propagationPolicy": "Foreground"})
            case ReleasePod():
                return await self._release(key, step)
            case WriteStatus():
                await self._write_status(pod, step.status)
            case RecordEvent():
                await self.events.record(step.about, step.reason, step.message)
            case ReturnToScheduler():
                return await self._return(key, step)
            case WaitForCopies():
                if copies is not None:
                    copies.forget(key)
                    copies.wait_for(key, step.since, step.copies)
            case StopWaitingForCopies():
                if copies is not None:
                    copies.forget(key)
                if step.given_up:
                    log.warning("pod %s/%s offloaded without the copies it needs, not made in "
                                "%.0f s: %s", *key, COPY_WAIT,
                                ", ".join(f"{plural} {name}" for plural, _, name in step.given_up))
            case CreateShadowPod():
                return await self._create(inputs, step.body)
        return None

    async def _release(self, key: Key, step: ReleasePod) -> Result | None:
        """The terminating pod deleted at once, once its ShadowPod is gone."""
        if step.shadow_namespace is not None:
            try:
                await self.remote.get(custom_path(SHADOWPOD, step.shadow_namespace, key[1]))
                return DONE  # still there: the remote cache is behind
            except Exception as error:
                if not is_not_found(error):
                    raise
        try:
            await self.home.delete(core_path("pods", *key),
                                   {"gracePeriodSeconds": 0, "preconditions": {"uid": step.uid}})
        except Exception as error:
            if not is_not_found(error):
                raise
        return None

    async def _return(self, key: Key, step: ReturnToScheduler) -> Result | None:
        """The pod deleted for its controller to make another; the controller remembered."""
        log.info("pod %s/%s: %s", *key, step.message)
        try:
            answer = await self.home.delete(core_path("pods", *key),
                                            {"preconditions": {"uid": step.uid}})
        except Exception as error:
            if not is_not_found(error) and getattr(error, "status", None) != 409:
                raise
            return DONE  # gone, or another pod of that name now: its own events come
        now = time.monotonic()
        for uid in [uid for uid, (_, at) in self._returned.items()
                    if now - at > RETURNS_REMEMBERED_SECONDS]:
            del self._returned[uid]
        self._returned.setdefault(step.controller_uid,
                                  (return_time(answer, datetime.now(UTC)), now))
        return None  # its deletion's event brings it back, to terminate

    async def _create(self, inputs: PodInputs, body: dict[str, Any]) -> Result | None:
        tracing.with_traceparent(body)  # the enforcer's reconcile of it continues this trace
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            created = await self._write_echoed((REMOTE, namespace, name), self.remote.create(
                custom_path(SHADOWPOD, namespace), body), body, "spec")
        except Exception as error:
            if getattr(error, "status", None) == 409:
                # Created already (its watch event brings it into the mirror), or not ours; or
                # nothing was made: kube-apiserver's quota admission answers 409 when its write
                # of the namespace's ResourceQuota loses a race with another admission.
                existing = await self.remote.find(custom_path(SHADOWPOD, namespace, name))
                if existing is None:
                    log.info("pod %s/%s: ShadowPod %s/%s not created, retried: %s", *inputs.key,
                             namespace, name, error_message(error))
                    return RETRY
                if is_owned(existing, self.sources.home_cluster_id,
                            self.sources.remote_cluster_id):
                    return DONE
                message = foreign_shadow_pod_message(namespace, name)
                log.warning("pod %s/%s: %s", *inputs.key, message)
                return await self.carry_out(inputs, foreign_shadow_pod(inputs, message))
            reason, message = shadow_pod_refusal(error_reason(error), error_message(error))
            log.log(logging.INFO if reason == QUOTA_NOT_COUNTED_REASON else logging.WARNING,
                    "could not create ShadowPod %s/%s: %s", namespace, name, message)
            return await self.carry_out(inputs, refused_creation(inputs, reason, message))
        self.sources.shadow_pods.answered(None, created)
        return None

    async def _patch(self, shadow: Mapping[str, Any] | None, patch: dict[str, Any]
                     ) -> Mapping[str, Any] | None:
        """The ShadowPod patched; the ShadowPod as the answer shows it."""
        assert shadow is not None
        metadata = shadow["metadata"]
        tracing.with_traceparent(patch)
        answer = await self.remote.patch(
            custom_path(SHADOWPOD, metadata["namespace"], metadata["name"]), patch)
        return answer if isinstance(answer, dict) else shadow

    async def _add_ephemeral(self, inputs: PodInputs, shadow: Mapping[str, Any] | None,
                             containers: tuple[dict[str, Any], ...]) -> None:
        """The containers `kubectl debug` added to the home pod, added to its ShadowPod (as the
        writes before left it). Ones the provider refuses (its pod policy) are said in an Event
        once and not sent again: the pod's other changes still go."""
        assert shadow is not None
        patch = shadow_pod_ephemeral_patch(shadow, list(containers))
        if patch is None:
            return
        metadata = shadow["metadata"]
        try:
            await self.remote.patch(
                custom_path(SHADOWPOD, metadata["namespace"], metadata["name"]), patch)
        except Exception as error:
            if getattr(error, "status", None) not in (403, 422):
                raise
            pod = inputs.pod or {}
            names = frozenset(str(c.get("name")) for c in containers)
            self._refused_ephemeral[inputs.key] = (
                (pod.get("metadata") or {}).get("uid"), inputs.refused_ephemeral | names)
            message = refused_ephemeral_message(names, error_message(error))
            log.warning("pod %s/%s: %s", *inputs.key, message)
            await self.events.record(pod, FAILED_REFLECTION_REASON, message)

    async def _write_echoed(self, echo: tuple[str, str, str], write: Awaitable[Any],
                            body: dict[str, Any], field: str) -> Any:
        """One write, which ends its reconcile, of the object `echo` names: its echo is
        skipped when the server stored `body` as sent, for the reconcile of that echo would
        read what this one wrote and decided on."""
        with self.echoes.writing(echo):
            answer = await write
            if _as_sent(answer, body, field):
                self.echoes.answered(echo, answer)
        return answer

    async def _write_status(self, pod: Mapping[str, Any], merged: dict[str, Any]) -> None:
        """Replace the pod's status with `merged`. The resourceVersion guards against a
        concurrent writer."""
        current = pod.get("status") or {}
        metadata = pod["metadata"]
        log.debug("pod %s/%s status: %s", metadata["namespace"], metadata["name"],
                  {k: (current.get(k), v) for k, v in merged.items() if current.get(k) != v})
        body = {**pod, "status": merged}
        written = await self._write_echoed(
            (HOME, metadata["namespace"], metadata["name"]), self.home.replace(
                core_path("pods", metadata["namespace"], metadata["name"], "status"), body),
            body, "status")
        stored = written.get("status") if isinstance(written, dict) else None
        if isinstance(stored, dict) and stored != merged:
            self._unkept_status |= unkept_status_fields(merged, stored)
        if metadata.get("resourceVersion"):
            self.sources.pods.answered(metadata["resourceVersion"], written)
