"""What the decision on a home pod reads (`PodInputs`, `shared.forge.pod_plan`), and the
fingerprint the agent's restart cache compares (`fingerprint`): every input joins it by its
value unless it says otherwise (an object by its resourceVersion; what the agent learnt since
it started, or the clock, not at all), so a new input cannot be left out of it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel

from shared.forge.pod import PodForgeConfig
from shared.forge.pod_status import StatusField, StatusForgeConfig

Object = Mapping[str, Any]
Copy = tuple[str, str, str]
"""A copy a pod needs: (plural, remote namespace, remote name)."""


# --- the inputs ------------------------------------------------------------------------------

class Fingerprint(Enum):
    """How an input joins the restart cache's fingerprint."""

    VALUE = "value"
    """By its value (the default)."""
    VERSION = "version"
    """An API object, by its resourceVersion (None while absent or being deleted)."""
    NONE = "none"
    """Not at all: what the agent learnt since it started, or the clock (a restarted agent
    has neither; a reconcile skipped for them would only have repeated a write)."""


def _input(fingerprint: Fingerprint) -> Any:
    return field(metadata={"fingerprint": fingerprint})


@dataclass(frozen=True)
class OffloadingInputs:
    """What the decision on a pod with no ShadowPod yet reads besides the pod (gathered only
    for those: the reconciles of offloaded pods, most of them, never read it)."""

    claims: Mapping[str, Object | None] | None = _input(Fingerprint.VALUE)
    """The claims the pod mounts, by name (None: claims are not reflected, so not watched)."""
    volumes: Mapping[str, Object | None] = _input(Fingerprint.VALUE)
    """The home volumes of the virtual provisioner those claims are bound to, by name."""
    node: Object | None = _input(Fingerprint.VERSION)
    """The virtual Node: what one pod can get on the provider (its max-pod-resources)."""
    webhook_serves: bool = _input(Fingerprint.VALUE)
    """The agent's pod webhook serves: a replacement of a pod given back is kept off."""
    returned_since: datetime | None = _input(Fingerprint.NONE)
    """When a pod of the same controller was last given back, if lately (`pod_fit`)."""
    tokens_reflected: bool = _input(Fingerprint.VALUE)
    """The pods' service-account tokens are reflected: a pod projecting them waits for their
    Secret."""
    token_secret_made: bool = _input(Fingerprint.VALUE)
    """The pod's token Secret is in the twin namespace."""
    pending_copies: tuple[Copy, ...] = _input(Fingerprint.VALUE)
    """The copies the pod needs that the reflectors are about to make."""
    waiting_since: float | None = _input(Fingerprint.NONE)
    """Since when (`clock`) the pod waits for copies, if it does."""
    clock: float = _input(Fingerprint.NONE)
    """The agent's monotonic clock now."""


@dataclass(frozen=True)
class PodInputs:
    """Everything the decision on one home pod reads."""

    key: tuple[str, str] = _input(Fingerprint.VALUE)
    """The home pod's namespace and name."""
    pod: Object | None = _input(Fingerprint.VERSION)
    """The home pod (None: gone)."""
    shadow: Object | None = _input(Fingerprint.VERSION)
    """Its ShadowPod, when it is this peering's (another's is never touched)."""
    mapped_namespace: str | None = _input(Fingerprint.VALUE)
    """The twin namespace asked for the pod's namespace (where its ShadowPod may be)."""
    accepted_namespace: str | None = _input(Fingerprint.VALUE)
    """That twin namespace once the provider accepted it (where ShadowPods are made)."""
    node_name: str = _input(Fingerprint.VALUE)
    """The agent's node the pod is bound to."""
    pool: str | None = _input(Fingerprint.VALUE)
    """That node's pool of the provider, as the agent made the node (None: the provider shown as
    one node): its ShadowPod's `spec.pool`."""
    forge: PodForgeConfig = _input(Fingerprint.VALUE)
    status: StatusForgeConfig = _input(Fingerprint.VALUE)
    unkept_status: frozenset[StatusField] = _input(Fingerprint.NONE)
    """The status fields the home API server does not keep, as its answers showed."""
    refused_ephemeral: frozenset[str] = _input(Fingerprint.NONE)
    """The pod's ephemeral containers the provider refused (never sent again)."""
    now: datetime = _input(Fingerprint.NONE)
    offloading: OffloadingInputs | None = _input(Fingerprint.VALUE)
    """Gathered for a pod to offload (live, no ShadowPod, its namespace extended), else None."""


# --- the restart cache's fingerprint ---------------------------------------------------------

def fingerprint(inputs: PodInputs) -> str:
    """A digest of the inputs as `Fingerprint` says each joins it: equal digests, the same
    decision (but for what the agent learnt, and the clock)."""
    return hashlib.blake2b(repr(_fingerprinted(inputs)).encode(), digest_size=16).hexdigest()


def _version(obj: Object | None) -> str | None:
    metadata = (obj or {}).get("metadata") or {}
    if obj is None or metadata.get("deletionTimestamp"):
        return None
    return str(metadata.get("resourceVersion") or "")


_MODELS: dict[int, tuple[BaseModel, Any]] = {}
"""The canonical form of the configs last seen, by identity: the agent builds them again only
when what they are built from changes, and every pod of a restart asks them."""


def _fingerprinted(value: Any) -> Any:
    """`value` in a canonical form (its repr is the same for equal values, in any process)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if is_dataclass(value) and not isinstance(value, type):
        parts = []
        for each in fields(value):
            form = each.metadata.get("fingerprint", Fingerprint.VALUE)
            item = getattr(value, each.name)
            if form is Fingerprint.VERSION:
                parts.append((each.name, _version(item)))
            elif form is Fingerprint.VALUE:
                parts.append((each.name, _fingerprinted(item)))
        return tuple(parts)
    if isinstance(value, BaseModel):
        known = _MODELS.get(id(value))
        if known is None or known[0] is not value:
            if len(_MODELS) >= 8:
                _MODELS.clear()
            # Field by field, not dumped: a dump makes a set a list in the process's order.
            known = _MODELS[id(value)] = (value, tuple(
                (name, _fingerprinted(getattr(value, name))) for name in type(value).model_fields))
        return known[1]
    if isinstance(value, Mapping):
        return tuple(sorted((str(key), _fingerprinted(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_fingerprinted(item) for item in value)
    if isinstance(value, set | frozenset):
        return tuple(sorted(repr(_fingerprinted(item)) for item in value))
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return _fingerprinted(value.value)
    raise TypeError(f"no canonical form for a {type(value).__name__} in a pod's inputs")
