"""A ShadowPod on the provider, decided: `shadowpod_plan` turns everything the enforcer's decision
reads (`ShadowPodInputs`) into the writes that converge it (`ShadowPodPlan`). The enforcer's
reconcile (`remote_enforcer.shadowpods`) gathers the inputs from its mirrors and carries the
plan out; what only the pod's creation answers (made, made by another, refused) is decided here
too (`created_pod`, `foreign_pod`, `refused_pod`). The pod itself, its patch and the status
copied from it are forged by `shared.forge.enforcement`.

The decision, in order:
- ShadowPod gone or being deleted → nothing: the garbage collector removes the pod with its
  owner;
- its pod just deleted in a terminal phase → that phase recorded in the ShadowPod first (a
  terminal phase is final: no pod is made again);
- no pod:
  - the ShadowPod terminal → nothing;
  - a pod seen gone (just deleted, or the status reporting one) → made again only once the
    ShadowPod read from the API server says so (`ReadShadowPod`): the garbage collector
    removes a pod only after its ShadowPod is gone, and the pod's deletion often arrives
    first, so from the cache alone every deleted ShadowPod would get a new, orphan pod; a
    first pod is made from the cache, as a ReplicaSet makes its pods (its controller
    reference has it collected);
  - its namespace, its consumer and that consumer's pod policy looked up first
    (`LookUpNamespace`: only a pod to make needs them);
  - outside a twin namespace of its origin, or against its consumer's pod policy → not made
    (admission checks the same, but a webhook may have been bypassed, or the policy tightened
    since): an Event and the `PodCreated` False condition, retried (`refused`);
  - else the pod is made (`CreatePod`);
- a pod not controlled by the ShadowPod → left alone, said in an Event;
- the pod's status copied into the ShadowPod (written only on change, only over the version it
  was computed from), then the changes a running pod accepts, then the ephemeral containers
  the ShadowPod lists and the pod lacks (not on a pod being deleted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.api.quota import PodPolicy
from shared.forge.enforcement import (
    creation_failed_status,
    desired_pod,
    ephemeral_containers_patch,
    had_pod,
    is_controlled_by,
    is_terminal,
    pod_patch,
    recreated_status,
    shadowpod_status,
)
from shared.forge.tenancy import origin_problem, pod_policy_problem
from shared.pools import Pool, lent_pools, pool_problem
from shared.wellknown import TERMINAL_PHASES

Object = Mapping[str, Any]

POLICY_REFUSED_REASON = "PodPolicy"
FAILED_CREATE_REASON = "FailedCreate"


@dataclass(frozen=True)
class ShadowPodInputs:
    """What the decision on one ShadowPod reads."""

    shadowpod: Object | None
    """The ShadowPod, as the cache holds it (or as read, once `shadowpod_read`)."""
    pod: Object | None
    """Its pod (of the same namespace and name), as the cache holds it."""
    now: datetime
    deleted_pod: Object | None = None
    """The final state of its pod, just deleted (its deletion not decided on yet)."""
    shadowpod_read: bool = False
    """`shadowpod` was read from the API server rather than the cache."""
    namespace_looked_up: bool = False
    """`namespace`, `consumer`, `pod_policy` and `lent_pools` were looked up (a pod to make
    needs them)."""
    namespace: Object | None = None
    """The ShadowPod's namespace (None: there is none)."""
    consumer: str | None = None
    """The consumer whose twin namespace `namespace` is (None: nobody's)."""
    pod_policy: PodPolicy | None = None
    """That consumer's pod policy."""
    pools: tuple[Pool, ...] = ()
    """The provider's pools (`--offer-pool`): a pod runs on its ShadowPod's pool's nodes."""
    lent_pools: tuple[str, ...] | None = None
    """The pools the consumer's Quota lends it, by name (None: every pool; looked up with
    `namespace`)."""


# --- the plan --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReadShadowPod:
    """Read the ShadowPod from the API server and decide again on it."""


@dataclass(frozen=True)
class LookUpNamespace:
    """Look up the ShadowPod's namespace (the cache's, else the API server's: a twin namespace
    just made), its consumer and that consumer's pod policy, and decide again with them."""


@dataclass(frozen=True)
class WriteStatus:
    """Replace the status of exactly the `shadowpod` version with `status`; `final`: the status
    of a pod just deleted, without which nothing after it is done (a newer version of the
    ShadowPod decides on that pod again)."""

    shadowpod: Object
    status: dict[str, Any]
    final: bool = False


@dataclass(frozen=True)
class RecordEvent:
    """An Event on the ShadowPod."""

    shadowpod: Object
    reason: str
    message: str


@dataclass(frozen=True)
class ReportForeignPod:
    """The pod of the ShadowPod's name is not its own: left alone, said in a Warning log line
    and an Event on the ShadowPod."""

    shadowpod: Object
    message: str


@dataclass(frozen=True)
class CreatePod:
    """Create `body`; one found made meanwhile counts as made only if `shadowpod` controls it."""

    shadowpod: Object
    body: dict[str, Any]


@dataclass(frozen=True)
class RecordRecreation:
    """A pod was made again for `shadowpod`: its `status` (the restarts carried over) written;
    computed again (`recreated_status`) from a fresh read if the ShadowPod changed meanwhile."""

    shadowpod: Object
    status: dict[str, Any]


@dataclass(frozen=True)
class PatchPod:
    """The strategic merge patch of the pod's changes a running pod accepts."""

    patch: dict[str, Any]


@dataclass(frozen=True)
class AddEphemeralContainers:
    """The strategic merge patch of the pod's ephemeralcontainers subresource."""

    pod: Object
    patch: dict[str, Any]


Step = (ReadShadowPod | LookUpNamespace | WriteStatus | RecordEvent | ReportForeignPod | CreatePod
        | RecordRecreation | PatchPod | AddEphemeralContainers)


@dataclass(frozen=True)
class ShadowPodPlan:
    """The steps, in order; `refused`: why the pod was not made (tried again with backoff, and
    at once when its namespace or its consumer's Quota changes)."""

    steps: tuple[Step, ...] = ()
    refused: str | None = None


# --- the decision ----------------------------------------------------------------------------

def shadowpod_plan(inputs: ShadowPodInputs) -> ShadowPodPlan:
    """The plan converging one ShadowPod (the module docstring says the decision)."""
    shadowpod, pod = inputs.shadowpod, inputs.pod
    if shadowpod is None or _deleting(shadowpod):
        return ShadowPodPlan()
    final: tuple[Step, ...] = ()
    last = inputs.deleted_pod
    if last is not None and is_controlled_by(last, shadowpod):
        status = shadowpod_status(shadowpod, last)
        if status is not None and status.get("phase") in TERMINAL_PHASES:
            final = (WriteStatus(shadowpod, status, final=True),)
            shadowpod = {**shadowpod, "status": status}
    if pod is None:
        plan = _missing_pod(inputs, shadowpod)
        return ShadowPodPlan((*final, *plan.steps), plan.refused)
    if not is_controlled_by(pod, shadowpod):
        return ShadowPodPlan((*final, foreign_pod(pod, shadowpod)))
    steps = list(final)
    status = shadowpod_status(shadowpod, pod)
    if status is not None:
        steps.append(WriteStatus(shadowpod, status))
    if not _deleting(pod):
        patch = pod_patch(pod, shadowpod)
        if patch is not None:
            steps.append(PatchPod(patch))
        ephemeral = ephemeral_containers_patch(pod, shadowpod)
        if ephemeral is not None:
            steps.append(AddEphemeralContainers(pod, ephemeral))
    return ShadowPodPlan(tuple(steps))


def _deleting(obj: Object) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _missing_pod(inputs: ShadowPodInputs, shadowpod: Object) -> ShadowPodPlan:
    if is_terminal(shadowpod):
        return ShadowPodPlan()
    if (inputs.deleted_pod is not None or had_pod(shadowpod)) and not inputs.shadowpod_read:
        return ShadowPodPlan((ReadShadowPod(),))
    if not inputs.namespace_looked_up:
        return ShadowPodPlan((LookUpNamespace(),))
    metadata = shadowpod.get("metadata") or {}
    problem = (origin_problem(metadata.get("labels") or {}, str(metadata.get("namespace")),
                              inputs.consumer)
               or pool_problem(inputs.pools, shadowpod, lent=inputs.lent_pools))
    if problem is None and inputs.consumer is not None and inputs.pod_policy is not None:
        problem = pod_policy_problem(inputs.pod_policy, inputs.consumer, shadowpod)
    if problem is not None:  # shown at home like an API server's refusal
        return refused_pod(shadowpod, POLICY_REFUSED_REASON, problem, inputs.now)
    return ShadowPodPlan((CreatePod(shadowpod, desired_pod(
        shadowpod, lent_pools(inputs.pools, inputs.lent_pools))),))


# --- what the pod's creation answers ---------------------------------------------------------

def created_pod(shadowpod: Object) -> ShadowPodPlan:
    """The pod was made: a pod made again carries the vanished one's restarts."""
    if not had_pod(shadowpod):
        return ShadowPodPlan()
    return ShadowPodPlan((RecordRecreation(shadowpod, recreated_status(shadowpod)),))


def foreign_pod(pod: Object, shadowpod: Object) -> ReportForeignPod:
    """A pod of the ShadowPod's name that it does not control."""
    metadata = pod.get("metadata") or {}
    return ReportForeignPod(shadowpod, f"pod {metadata.get('namespace')}/{metadata.get('name')} "
                                       "exists and is not controlled by this ShadowPod")


def refused_pod(shadowpod: Object, reason: str, message: str, now: datetime) -> ShadowPodPlan:
    """The pod was not made (this enforcer's policy, or the API server's refusal: a quota, Pod
    Security, an invalid spec): an Event on the ShadowPod and its status condition `PodCreated`
    False, which the home agent turns into the home pod's condition and Event."""
    status = creation_failed_status(shadowpod, reason, message, now)
    written = () if status is None else (WriteStatus(shadowpod, status),)
    return ShadowPodPlan((RecordEvent(shadowpod, FAILED_CREATE_REASON,
                                      f"cannot create the pod: {message}"), *written),
                         refused=message)

