"""The remote pod's status as the home pod's (`local_pod_status`, `status_from_shadow`), the
status of a pod held at home (`offloading_backoff_status`), the conditions of a ShadowPod the
provider refused, and which status fields the home API server does not keep (`merged_status`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from shared.forge.json_copy import copied
from shared.ipremap import CidrRemap, remap_address
from shared.rfc3339 import rfc3339
from shared.wellknown import (
    OFFLOADING_BACKOFF_REASON,
    POD_CREATED_CONDITION,
    REMOTE_CREATION_FAILED_CONDITION,
)


class StatusForgeConfig(BaseModel):
    """How remote pod status reads at home: `node_ip` is the agent's own IP (the virtual node's
    address); `pod_cidr` → `remapped_pod_cidr` is the remapping the network fabric applies to the
    provider's pod CIDR when it overlaps (both or neither)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_ip: str
    pod_cidr: str | None = None
    remapped_pod_cidr: str | None = None

    @model_validator(mode="after")
    def _remap_is_complete(self) -> StatusForgeConfig:
        if (self.pod_cidr is None) != (self.remapped_pod_cidr is None):
            raise ValueError("pod_cidr and remapped_pod_cidr go together")
        self.pod_ip_remap  # noqa: B018 -- validates the CIDRs (ValueError)
        return self

    @property
    def pod_ip_remap(self) -> CidrRemap | None:
        if self.pod_cidr is None or self.remapped_pod_cidr is None:
            return None
        return CidrRemap(self.pod_cidr, self.remapped_pod_cidr)


def local_pod_status(
    remote_status: Mapping[str, Any], carried_restarts: Mapping[str, int],
    config: StatusForgeConfig
) -> dict[str, Any]:
    """The home pod's status from the remote pod's.

    - podIP and every podIPs entry are remapped from the remote pod CIDR (addresses outside it,
      e.g. of the other IP family, stay as they are);
    - hostIP/hostIPs are the agent's IP: the pod runs "on" the virtual node;
    - each container's restartCount is the remote count plus what the enforcer carried over
      from the remote pods it replaced (ShadowPod.status.carriedRestarts: their restarts, plus
      one per replacement). A recreated pod starts again from 0 restarts; the carried figure
      keeps the home count from going down. Both terms are read from the remote side every
      time, so the result is a function of remote state only: an agent restart recomputes the
      same number and never counts a recreation twice.
    """
    status = copied(dict(remote_status))
    remap = config.pod_ip_remap
    if status.get("podIP"):
        status["podIP"] = remap_address(str(status["podIP"]), remap)
    if status.get("podIPs"):
        status["podIPs"] = [
            {**entry, "ip": remap_address(str(entry.get("ip", "")), remap)}
            for entry in status["podIPs"]
        ]
    status["hostIP"] = config.node_ip
    status["hostIPs"] = [{"ip": config.node_ip}]
    for container in status.get("containerStatuses") or []:
        container["restartCount"] = (int(container.get("restartCount") or 0)
                                     + int(carried_restarts.get(str(container.get("name")), 0)))
    return status


def offloading_backoff_status(local_pod: Mapping[str, Any], now: datetime,
                              message: str | None = None,
                              reason: str = OFFLOADING_BACKOFF_REASON) -> dict[str, Any]:
    """The status of a pod bound to the virtual node that is held back: Pending with `reason`
    (OffloadingBackOff) and `message` (by default: its namespace is not offloaded),
    its true conditions turned false with the same reason, no container ready (Liqo's
    LocalRejectedPodStatus)."""
    metadata = local_pod.get("metadata") or {}
    status = copied(dict(local_pod.get("status") or {}))
    message = message or (
        f"namespace {metadata.get('namespace', '')!r} is not offloaded to this virtual node's "
        f"cluster: create a NamespaceOffloading there, or keep the pod off virtual nodes"
    )
    status.update(phase="Pending", reason=reason, message=message)
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True":
            condition.update(status="False", reason=reason, lastTransitionTime=rfc3339(now))
    for container in status.get("containerStatuses") or []:
        container["ready"] = False
    return status


QUOTA_NOT_COUNTED_REASON = "QuotaNotCountedYet"
QUOTA_STATUS_UNKNOWN = "status unknown for quota"
"""kube-apiserver's quota admission refusing an object its quota controller has not counted
yet (the quota's status lacks the resource)."""


def shadow_pod_refusal(reason: str, message: str) -> tuple[str, str]:
    """The reason and message a refused ShadowPod creation is reported with: the API server's,
    but a quota whose status does not count ShadowPods yet says so and that it passes. On a
    fresh install kube-controller-manager's quota controller finds the ShadowPod kind at its
    next discovery (every 30 s) and counts it in the quota at the quota's next
    recalculation: a change of a kind the quota counts in that namespace, or the full resync
    (--resource-quota-sync-period, 5 min by default)."""
    if QUOTA_STATUS_UNKNOWN not in message:
        return reason, message
    return QUOTA_NOT_COUNTED_REASON, (
        f"the provider's quota controller has not counted this kind in the namespace's quota "
        f"yet, which clears by itself (it discovers a newly installed kind within 30 s, then "
        f"recounts the quota at its next resync); retried with backoff meanwhile: {message}")


def remote_creation_failed_condition(reason: str, message: str, now: datetime) -> dict[str, Any]:
    """The home pod condition saying the remote pod could not be created (quota denied, invalid
    spec, ...), so the pod is not left silently Pending."""
    return {
        "type": REMOTE_CREATION_FAILED_CONDITION,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now),
    }


def remote_pod_refused_condition(shadow_status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The home pod's RemoteCreationFailed condition while the remote API server refuses the
    ShadowPod's pod (quota, Pod Security, RuntimeClass, invalid spec: the enforcer records it as
    the ShadowPod's `PodCreated` False), or None. Its time is the ShadowPod condition's, so the
    same refusal reported again reads the same."""
    for condition in shadow_status.get("conditions") or []:
        if condition.get("type") == POD_CREATED_CONDITION and condition.get("status") == "False":
            return {
                "type": REMOTE_CREATION_FAILED_CONDITION,
                "status": "True",
                "reason": condition.get("reason") or "CreationFailed",
                "message": f"the remote pod cannot be created: {condition.get('message', '')}",
                "lastTransitionTime": condition.get("lastTransitionTime"),
            }
    return None


def with_condition(status: Mapping[str, Any], condition: Mapping[str, Any]) -> dict[str, Any]:
    """`status` with `condition` set in place of any of the same type. An unchanged status keeps
    its lastTransitionTime, so re-reporting the same failure is not a transition; fields
    `condition` does not name keep theirs (the API server answers every pod condition with a
    `lastProbeTime`, null when unset: without it each report would differ from the last)."""
    updated = copied(dict(status))
    conditions = updated.get("conditions") or []
    new = copied(dict(condition))
    for index, existing in enumerate(conditions):
        if existing.get("type") == new.get("type"):
            if existing.get("status") == new.get("status"):
                new["lastTransitionTime"] = existing.get("lastTransitionTime")
            conditions[index] = {**existing, **new}
            break
    else:
        conditions.append(new)
    updated["conditions"] = conditions
    return updated


_TRANSIENT_STATUS_FIELDS = ("reason", "message")
"""Status fields a previous state (OffloadingBackOff) may have set and the remote status lacks."""


def status_from_shadow(
    local_status: Mapping[str, Any], shadow_status: Mapping[str, Any], config: StatusForgeConfig
) -> dict[str, Any] | None:
    """The home pod's status as its ShadowPod's status tells it (over `local_status`, see
    `merged_status`): the remote pod's status (`local_pod_status`; the reason and message a
    back-off left cleared), and a remote pod the remote API server refuses as the
    RemoteCreationFailed condition (`remote_pod_refused_condition`). None while it tells
    neither."""
    remote_status = shadow_status.get("podStatus")
    refused = remote_pod_refused_condition(shadow_status)
    if not remote_status and refused is None:
        return None
    if remote_status:
        status = local_pod_status(remote_status, shadow_status.get("carriedRestarts") or {},
                                  config)
        for key in _TRANSIENT_STATUS_FIELDS:
            status.setdefault(key, None)
    else:
        status = copied(dict(local_status))
    return status if refused is None else with_condition(status, refused)


StatusField = tuple[str, ...]
"""A status field by its keys from the top of the status; "*" stands for every item of a list
(("containerStatuses", "*", "user"))."""


def unkept_status_fields(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> set[StatusField]:
    """The fields of a status written that the API server's answer (`stored`) lacks: fields its
    schema does not have or a feature gate turns off, which it drops from every write
    (status.hostIPs before Kubernetes 1.28, and on 1.28 unless its alpha PodHostIPs gate is
    on; the container status fields a newer remote kubelet reports). Only fields sent with
    a value count: an empty one is what the API's omitempty leaves out, not a field the
    server lacks."""
    unkept: set[StatusField] = set()

    def walk(sent_value: Any, stored_value: Any, at: StatusField) -> None:
        if isinstance(sent_value, Mapping) and isinstance(stored_value, Mapping):
            for key, value in sent_value.items():
                if key not in stored_value:
                    if value:
                        unkept.add((*at, key))
                else:
                    walk(value, stored_value[key], (*at, key))
        elif isinstance(sent_value, list) and isinstance(stored_value, list):
            for sent_item, stored_item in zip(sent_value, stored_value, strict=False):
                walk(sent_item, stored_item, (*at, "*"))

    walk(sent, stored, ())
    return unkept


def _without_field(value: Any, path: StatusField) -> Any:
    head, rest = path[0], path[1:]
    if head == "*":
        return [_without_field(item, rest) for item in value] if isinstance(value, list) else value
    if not isinstance(value, Mapping) or head not in value:
        return value
    if not rest:
        return {key: item for key, item in value.items() if key != head}
    return {**value, head: _without_field(value[head], rest)}


def merged_status(current: Mapping[str, Any], wanted: Mapping[str, Any],
                  unkept: Iterable[StatusField] = ()) -> dict[str, Any] | None:
    """The pod status `wanted` merged over `current` (a None value removes the field), or None
    when that is `current`: nothing to write. The fields the server does not keep (`unkept`,
    see `unkept_status_fields`) are left out of `wanted`: `current` never has them, and a
    status that kept them would differ from it at every comparison."""
    for path in unkept:
        wanted = _without_field(wanted, path)
    merged = {k: v for k, v in {**current, **wanted}.items() if v is not None}
    return None if merged == current else merged
