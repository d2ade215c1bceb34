"""A home pod bound to the virtual node, decided: `pod_plan` turns everything the decision reads
(`PodInputs`) into the writes that converge it (`PodPlan`). The agent's offloader
(`home_agent.pod`) gathers the inputs from its mirrors and carries the plan out step by step;
what only a write's answer tells (a creation refused, a name taken by another peering, an
ephemeral container the provider refuses) is decided here too (`refused_creation`,
`foreign_shadow_pod`, `refused_ephemeral_message`).

The inputs (`shared.forge.pod_inputs`) are also what the agent's restart cache compares.

The decision, in order:
- pod gone → what was remembered of it is forgotten; its ShadowPod is deleted, but only once
  the home API server confirms the pod is gone (a cache that has not finished listing must
  never cost a running remote pod);
- pod terminating → its ShadowPod deleted in the foreground (the garbage collector removes it
  once its pod is gone); once the ShadowPod is gone (the remote API server says so), the home
  pod is released (grace 0);
- a DaemonSet's pod without a ShadowPod → never offloaded, never deleted: Pending with reason
  DaemonSetPodNotOffloaded, an Event on the pod and on its DaemonSet, once (`daemonset`);
- namespace not extended (its twin not accepted) → Pending with reason OffloadingBackOff;
- no ShadowPod yet:
  - a claim it mounts is not known bound yet → retried (the claims' cache lags the pod);
  - a claim it mounts is bound to a home volume → Pending (OffloadingBackOff) and an Event
    saying which, retried with backoff;
  - no provider node has room for it → returned to the scheduler or held (`pod_fit`);
  - it projects service-account tokens and their Secret is not made yet → nothing: the
    Secret's event brings it back;
  - copies of what it needs to start are still to come → it waits for them `COPY_WAIT`
    seconds at most;
  - else its ShadowPod is made (`shadow_pod_with_warnings`), what could not be honoured in an
    Event each;
- ShadowPod there → the changes a running pod accepts, then in a write of their own the
  ephemeral containers `kubectl debug` added (those the provider refused not again), then the
  remote status brought home, a remote pod refused said in an Event.
Every status is written only when it differs from the pod's (the fields the home API server
does not keep left out: `merged_status`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.forge.daemonset import (
    DAEMONSET_POD_REASON,
    daemon_set_object,
    daemon_set_of,
    not_offloaded_message,
)
from shared.forge.node import max_pod_resources_of
from shared.forge.persistentvolume import home_data_problem, unbound_claims
from shared.forge.pod import shadow_pod_with_warnings
from shared.forge.pod_fit import controller_of, misfit
from shared.forge.pod_inputs import Copy, Object, OffloadingInputs, PodInputs
from shared.forge.pod_status import (
    merged_status,
    offloading_backoff_status,
    remote_creation_failed_condition,
    remote_pod_refused_condition,
    status_from_shadow,
    with_condition,
)
from shared.forge.pod_tokens import projected_service_account_tokens
from shared.forge.shadow_pod_patch import added_ephemeral_containers, shadow_pod_patch
from shared.offer import pod_shortfalls
from shared.wellknown import (
    FAILED_REFLECTION_REASON,
    OFFLOADING_BACKOFF_REASON,
    REMOTE_CREATION_FAILED_CONDITION,
    RETURNED_TO_SCHEDULER_REASON,
    VIRTUAL_STORAGE_PROVISIONER,
)

COPY_WAIT = 30.0
"""Seconds a pod's ShadowPod waits for copies that do not come (the remote cluster refuses
them: a quota on ConfigMaps, an invalid object): then the pod is offloaded, and the remote
kubelet's warnings say what is missing."""


# --- the plan --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ForgetPod:
    """The pod is gone: what was remembered of it goes (its refused ephemeral containers, its
    wait for copies)."""


@dataclass(frozen=True)
class DeleteShadowPod:
    """Delete the ShadowPod (foreground, guarded by its uid); `once_pod_gone`: only once the
    home API server confirms the home pod is gone."""

    namespace: str
    name: str
    uid: str | None
    once_pod_gone: bool = False


@dataclass(frozen=True)
class ReleasePod:
    """Delete the terminating home pod at once (grace 0, guarded by its uid), once the remote
    API server confirms its ShadowPod is gone from `shadow_namespace` (None: there is none)."""

    uid: str | None
    shadow_namespace: str | None


@dataclass(frozen=True)
class WriteStatus:
    """Replace the pod's status with `status` (guarded by the pod's resourceVersion)."""

    status: dict[str, Any]


@dataclass(frozen=True)
class RecordEvent:
    """An Event on `about` (the pod, or its DaemonSet)."""

    about: Object
    reason: str
    message: str


@dataclass(frozen=True)
class ReturnToScheduler:
    """Delete the pod (guarded by its uid) for its controller to make another elsewhere, and
    remember that this controller had a pod given back."""

    uid: str | None
    controller_uid: str
    message: str


@dataclass(frozen=True)
class WaitForCopies:
    """The ShadowPod waits for `copies`, since `since`: their events bring the pod back."""

    copies: tuple[Copy, ...]
    since: float


@dataclass(frozen=True)
class StopWaitingForCopies:
    """The pod waits for copies no more; `given_up`: those that did not come in `COPY_WAIT`."""

    given_up: tuple[Copy, ...] = ()


@dataclass(frozen=True)
class CreateShadowPod:
    body: dict[str, Any]


@dataclass(frozen=True)
class PatchShadowPod:
    """The merge patch of the changes a running pod accepts."""

    patch: dict[str, Any]


@dataclass(frozen=True)
class AddEphemeralContainers:
    """Add `containers` to the ShadowPod as it is after the steps before (its own write)."""

    containers: tuple[dict[str, Any], ...]


Step = (ForgetPod | DeleteShadowPod | ReleasePod | WriteStatus | RecordEvent | ReturnToScheduler
        | WaitForCopies | StopWaitingForCopies | CreateShadowPod | PatchShadowPod
        | AddEphemeralContainers)


@dataclass(frozen=True)
class PodPlan:
    """The steps, in order, and what the reconcile asks once they are done."""

    steps: tuple[Step, ...] = ()
    retry: bool = False
    """Look again with the key's backoff."""
    requeue_after: float | None = None
    """Look again after that many seconds (or sooner, at the next event)."""


# --- the decision ----------------------------------------------------------------------------

def pod_plan(inputs: PodInputs) -> PodPlan:
    """The plan converging one home pod (the module docstring says the decision)."""
    pod, shadow = inputs.pod, inputs.shadow
    if pod is None:
        if shadow is None or _deleting(shadow):
            return PodPlan((ForgetPod(),))
        return PodPlan((ForgetPod(), _delete(shadow, once_pod_gone=True)))
    if _deleting(pod):
        if shadow is not None:
            return PodPlan(() if _deleting(shadow) else (_delete(shadow),))
        return PodPlan((ReleasePod(_uid(pod), inputs.mapped_namespace),))
    if shadow is None and (daemon_set := daemon_set_of(pod)) is not None:
        return _daemon_set_pod(inputs, pod, daemon_set)
    if inputs.accepted_namespace is None:
        return PodPlan(_status(inputs, offloading_backoff_status(pod, inputs.now)))
    if shadow is None:
        if inputs.offloading is None:
            raise ValueError("a pod to offload is decided on with its offloading inputs")
        return _offloading(inputs, pod, inputs.accepted_namespace, inputs.offloading)
    return PodPlan((*_update(inputs, pod, shadow), *_status_back(inputs, pod, shadow)))


def _deleting(obj: Object) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _uid(obj: Object) -> str | None:
    return (obj.get("metadata") or {}).get("uid")


def _delete(shadow: Object, once_pod_gone: bool = False) -> DeleteShadowPod:
    metadata = shadow.get("metadata") or {}
    return DeleteShadowPod(str(metadata.get("namespace")), str(metadata.get("name")),
                           metadata.get("uid"), once_pod_gone)


def _status(inputs: PodInputs, wanted: Mapping[str, Any]) -> tuple[Step, ...]:
    """The status write making the pod's status `wanted` merged over it; none when nothing
    differs."""
    current = (inputs.pod or {}).get("status") or {}
    merged = merged_status(current, wanted, inputs.unkept_status)
    return () if merged is None else (WriteStatus(merged),)


def _held(inputs: PodInputs, pod: Object, message: str,
          reason: str = OFFLOADING_BACKOFF_REASON) -> tuple[Step, ...]:
    """Pending with `reason` and `message`, said in an Event."""
    return (*_status(inputs, offloading_backoff_status(pod, inputs.now, message, reason)),
            RecordEvent(pod, reason, message))


def _daemon_set_pod(inputs: PodInputs, pod: Object, daemon_set: Mapping[str, Any]) -> PodPlan:
    """Pending, saying why; said in Events once, when the status first says it."""
    message = not_offloaded_message(daemon_set, inputs.node_name)
    status = pod.get("status") or {}
    if status.get("reason") == DAEMONSET_POD_REASON and status.get("message") == message:
        return PodPlan()
    name = (pod.get("metadata") or {}).get("name")
    return PodPlan((*_held(inputs, pod, message, DAEMONSET_POD_REASON),
                    RecordEvent(daemon_set_object(pod, daemon_set), DAEMONSET_POD_REASON,
                                f"pod {name}: {message}")))


def _offloading(inputs: PodInputs, pod: Object, twin: str,
                offloading: OffloadingInputs) -> PodPlan:
    claims = offloading.claims

    def claim(name: str) -> Object | None:
        return None if claims is None else claims.get(name)

    if claims is not None and unbound_claims(pod, claim):
        return PodPlan(retry=True)  # the claims' cache lags the pod: judged once it has them
    problem = home_data_problem(pod, claim, offloading.volumes.get, VIRTUAL_STORAGE_PROVISIONER,
                                inputs.node_name)
    if problem is not None:
        return PodPlan(_held(inputs, pod, problem), retry=True)  # the claim may be rebound
    shortfalls = pod_shortfalls(pod.get("spec") or {}, max_pod_resources_of(offloading.node))
    if shortfalls:
        verdict = misfit(pod, inputs.node_name, shortfalls,
                         webhook_serves=offloading.webhook_serves,
                         returned_since=offloading.returned_since)
        if not verdict.returned:  # a provider node may make room
            return PodPlan(_held(inputs, pod, verdict.message), retry=True)
        controller = controller_of(pod) or {}
        return PodPlan((RecordEvent(pod, RETURNED_TO_SCHEDULER_REASON, verdict.message),
                        ReturnToScheduler(_uid(pod), str(controller.get("uid")),
                                          verdict.message)))
    if (offloading.tokens_reflected and not offloading.token_secret_made
            and projected_service_account_tokens(pod)):
        return PodPlan()  # the Secret's event brings the pod back
    pending = offloading.pending_copies
    since = offloading.clock if offloading.waiting_since is None else offloading.waiting_since
    if pending and offloading.clock - since < COPY_WAIT:
        return PodPlan((WaitForCopies(pending, since),),
                       requeue_after=since + COPY_WAIT - offloading.clock)
    body, warnings = shadow_pod_with_warnings(pod, twin, inputs.forge)
    if inputs.pool is not None:
        body["spec"]["pool"] = inputs.pool  # the node's, never the pod's to say
    return PodPlan((StopWaitingForCopies(pending),
                    *(RecordEvent(pod, FAILED_REFLECTION_REASON, warning) for warning in warnings),
                    CreateShadowPod(body)))


def _update(inputs: PodInputs, pod: Object, shadow: Object) -> tuple[Step, ...]:
    steps: list[Step] = []
    patch = shadow_pod_patch(shadow, pod, inputs.forge)
    if patch is not None:
        steps.append(PatchShadowPod(patch))
    added = tuple(container for container in added_ephemeral_containers(shadow, pod, inputs.forge)
                  if container.get("name") not in inputs.refused_ephemeral)
    if added and not _deleting(shadow):
        steps.append(AddEphemeralContainers(added))
    return tuple(steps)


def _status_back(inputs: PodInputs, pod: Object, shadow: Object) -> tuple[Step, ...]:
    """The remote status brought home; a remote pod refused said in an Event (once per
    distinct message: the recorder correlates)."""
    shadow_status = shadow.get("status") or {}
    wanted = status_from_shadow(pod.get("status") or {}, shadow_status, inputs.status)
    if wanted is None:
        return ()
    refused = remote_pod_refused_condition(shadow_status)
    event = () if refused is None else (
        RecordEvent(pod, REMOTE_CREATION_FAILED_CONDITION, refused["message"]),)
    return (*event, *_status(inputs, wanted))


# --- what a write's answer tells -------------------------------------------------------------

def refused_creation(inputs: PodInputs, reason: str, message: str) -> PodPlan:
    """The ShadowPod's creation was refused (`shadow_pod_refusal`'s reason and message: a quota,
    an invalid spec): the RemoteCreationFailed condition and an Event, retried with backoff."""
    pod = inputs.pod or {}
    condition = remote_creation_failed_condition(reason, message, inputs.now)
    return PodPlan((*_status(inputs, with_condition(pod.get("status") or {}, condition)),
                    RecordEvent(pod, REMOTE_CREATION_FAILED_CONDITION, message)), retry=True)


def foreign_shadow_pod(inputs: PodInputs, message: str) -> PodPlan:
    """A ShadowPod of the pod's name that another peering made (`foreign_shadow_pod_message`)
    is left alone and said on the pod; retried with backoff, in case it goes."""
    return PodPlan((RecordEvent(inputs.pod or {}, FAILED_REFLECTION_REASON, message),),
                   retry=True)


def foreign_shadow_pod_message(namespace: str, name: str) -> str:
    return (f"ShadowPod {namespace}/{name} exists and is not this peering's "
            "(its origin/destination labels differ): left alone, the pod is not offloaded")


def refused_ephemeral_message(names: frozenset[str], error: str) -> str:
    """The Event on a pod whose ephemeral containers `names` the provider refused."""
    return (f"ephemeral containers {', '.join(sorted(names))} not added to the remote pod: "
            f"{error}")
