"""A pod bound to a virtual node that no provider node can run: given back to its controller, or
held at home saying why.

The virtual node's allocatable is the sum of its provider's nodes, so the home scheduler may
bind a pod there that no single provider node has room for; the node's
`offloading.liqo.io/max-pod-resources` says what one pod can get (`shared.offer.pod_shortfalls`).
Such a pod would sit Pending remotely, holding the consumer's quota. Before its ShadowPod is made,
the agent either:

- **returns it to the scheduler** (deletes it, as the stock kubelet's admission turns away a pod
  its node cannot run and the pod's controller makes another): only a pod whose controller
  makes it again (a DaemonSet's pods are never offloaded: `shared.forge.daemonset`); only while
  the pod webhook serves, which keeps the replacement off the virtual nodes too small for it
  (`shared.forge.offloading_strategy`); never a pod mounting claims (its volume may be on this
  provider, so it can only run here); and never a pod its controller made after it had a pod
  given back: the webhook did not keep that one off, and neither would it the next (a webhook
  configuration missing for the namespace, say): deleting it would loop;
- or **holds it**: Pending, reason OffloadingBackOff, the message naming what does not fit and
  why it was not given back, looked at again with backoff: it is offloaded once a provider node
  has the room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.forge.persistentvolume import pod_claim_names
from shared.rfc3339 import parse_rfc3339, rfc3339


def controller_of(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pod's controller reference (the ownerReference marked controller), or None."""
    for reference in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("controller"):
            return dict(reference)
    return None


def created_at(obj: Mapping[str, Any]) -> datetime | None:
    text = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        return parse_rfc3339(str(text)) if text else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Misfit:
    """What to do with a pod no provider node can run: return it (`returned`) or hold it, and
    the message saying so."""

    returned: bool
    message: str


def misfit(pod: Mapping[str, Any], node_name: str, shortfalls: Sequence[str], *,
           webhook_serves: bool, returned_since: datetime | None) -> Misfit:
    """The verdict on `pod`, bound to `node_name` whose provider has no node with room for
    `shortfalls` (`pod_shortfalls`, not empty). `returned_since`: when (the API server's time)
    a pod of the same controller was last given back, if it was lately."""
    what = (f"no node of {node_name}'s cluster has room for this pod "
            f"({', '.join(shortfalls)}: requested > what one pod can get there)")
    controller = controller_of(pod)
    created = created_at(pod)
    if controller is None:
        why = "it has no controller to make it again"
    elif pod_claim_names(pod):
        why = "it mounts claims, whose volumes may hold it to this node"
    elif not webhook_serves:
        why = "without the agent's pod webhook nothing would keep its replacement off this node"
    elif returned_since is not None and (created is None or created >= returned_since):
        why = (f"its {controller.get('kind')} {controller.get('name')} had a pod given back at "
               f"{rfc3339(returned_since)} and made this one since, which the pod webhook did "
               f"not keep off this node: is the webhook configured for this namespace?")
    else:
        return Misfit(True, f"{what}: returned to the scheduler (deleted), its "
                            f"{controller.get('kind')} {controller.get('name')} makes another, "
                            f"which the pod webhook keeps off {node_name}")
    return Misfit(False, f"{what}: held here until a node there has the room, as {why}; "
                         f"delete it to place it elsewhere")


def return_time(answer: Any, fallback: datetime) -> datetime:
    """When the API server took the pod's deletion: its deletionTimestamp less its grace period,
    from the delete's answer (`fallback` when the answer does not tell)."""
    metadata = (answer.get("metadata") or {}) if isinstance(answer, Mapping) else {}
    stamp, grace = metadata.get("deletionTimestamp"), metadata.get("deletionGracePeriodSeconds")
    if not stamp or grace is None:
        return fallback
    try:
        return parse_rfc3339(str(stamp)) - timedelta(seconds=int(grace))
    except (ValueError, TypeError):
        return fallback
