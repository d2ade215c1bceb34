"""The disruption controller: each PodDisruptionBudget's status, which the eviction subresource
(kubesim/eviction.py) checks.

Like kube-controller-manager's disruption controller (pkg/controller/disruption, trySync):
- the budget's pods are those of its namespace its selector matches (an empty or missing
  selector matches none);
- `minAvailable` as a number: `desiredHealthy` is it and `expectedPods` the pods found; as a
  percentage, or `maxUnavailable`: `expectedPods` is the scale of the pods' controllers (a
  ReplicaSet's, or the Deployment's that owns it; a StatefulSet's; kubesim serves no
  ReplicationControllers),
  percentages rounded up; a pod without a controller counts for nothing there;
- `currentHealthy`: pods Ready, not being deleted and not in `disruptedPods` (which the eviction
  subresource fills); an entry goes once its pod is deleted, or after 2 minutes (DeletionTimeout)
  if the pod never was;
- `disruptionsAllowed` = currentHealthy - desiredHealthy, 0 when negative or nothing is
  expected; condition `DisruptionAllowed` (True SufficientPods / False InsufficientPods);
  `observedGeneration` the budget's generation. Written only when it changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from kubesim.apiserver import ApiServer, copy_json
from kubesim.controllers.base import Controller, WorkQueue, kind_of, run_together, watch_forever
from kubesim.controllers.replicaset import is_ready
from kubesim.errors import StatusError
from kubesim.printers import parse_time
from kubesim.selectors import SelectorError, label_selector_from_object_strict
from kubesim.store import Stored

DELETION_TIMEOUT = timedelta(minutes=2)
BudgetKey = tuple[str, str]
_SCALED = {("apps", "ReplicaSet"): ("apps", "v1", "replicasets"),
           ("apps", "StatefulSet"): ("apps", "v1", "statefulsets"),
           ("apps", "Deployment"): ("apps", "v1", "deployments")}


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def resolve(value: int | str, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounded up."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(text)


def selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    try:
        selector = label_selector_from_object_strict((pdb.get("spec") or {}).get("selector"))
    except SelectorError:
        return False  # an invalid selector matches no pod
    return not selector.empty and selector.matches(pod["metadata"].get("labels") or {})


def budget_status(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
                  scale_of: Callable[[Mapping[str, Any]], tuple[str, int] | None],
                  now: datetime) -> dict[str, Any]:
    """The status trySync computes; `scale_of(pod)` is the (controller uid, replicas) of the
    pod's scaled controller, or None."""
    spec, old = pdb.get("spec") or {}, pdb.get("status") or {}
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if max_unavailable is None and isinstance(min_available, int):
        expected, desired = len(pods), min_available
    else:
        scales: dict[str, int] = {}
        for pod in pods:
            found = scale_of(pod)
            if found is not None:
                scales[found[0]] = found[1]
        expected = sum(scales.values())
        if max_unavailable is not None:
            desired = max(0, expected - resolve(max_unavailable, expected))
        else:
            desired = resolve(min_available if min_available is not None else 0, expected)
    live = {pod["metadata"]["name"]: pod for pod in pods}
    disrupted = {}
    for name, since in (old.get("disruptedPods") or {}).items():
        disrupted_pod = live.get(name)
        moment = parse_time(since)
        if (disrupted_pod is None or disrupted_pod["metadata"].get("deletionTimestamp")
                or moment is None):
            continue  # deleted (or going): no longer a disruption to wait for
        if moment + DELETION_TIMEOUT > now:
            disrupted[name] = since
    healthy = sum(1 for name, pod in live.items() if not pod["metadata"].get("deletionTimestamp")
                  and name not in disrupted and is_ready(dict(pod)))
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    condition = {"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                 "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                 "message": "", "observedGeneration": pdb["metadata"].get("generation", 1)}
    previous = next((c for c in old.get("conditions") or []
                     if c.get("type") == "DisruptionAllowed"), None)
    condition["lastTransitionTime"] = (
        previous["lastTransitionTime"] if previous is not None
        and previous.get("status") == condition["status"] else _stamp(now))
    status: dict[str, Any] = {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptionsAllowed": allowed, "currentHealthy": healthy, "desiredHealthy": desired,
        "expectedPods": expected, "conditions": [condition]}
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


class DisruptionController(Controller):
    name = "disruption"

    def __init__(self, api: ApiServer) -> None:
        super().__init__(api)
        self.pods_kind = kind_of(api, "", "v1", "pods")
        self.budgets_kind = kind_of(api, "policy", "v1", "poddisruptionbudgets")
        self.queue = WorkQueue(self._sync, self.name)

    def _on_budget(self, event_type: str, stored: Stored) -> None:
        if event_type != "DELETED":
            self.queue.add((stored.namespace, stored.name))

    def _on_pod(self, event_type: str, stored: Stored) -> None:
        del event_type  # a deleted pod changes its budgets as much as a changed one
        for budget in self.api.store.list(self.budgets_kind.storage_key, stored.namespace):
            if selects(budget.obj, stored.obj):
                self.queue.add((budget.namespace, budget.name))

    def _scale_of(self, pod: Mapping[str, Any]) -> tuple[str, int] | None:
        """getExpectedScale's finders: the pod's controller with a scale (a ReplicaSet's own
        Deployment's instead of its own)."""
        owner = next((ref for ref in pod["metadata"].get("ownerReferences") or []
                      if ref.get("controller")), None)
        namespace = pod["metadata"]["namespace"]
        for _ in range(2):
            if owner is None:
                return None
            group = str(owner.get("apiVersion", "")).rpartition("/")[0]
            resource = _SCALED.get((group, str(owner.get("kind"))))
            if resource is None:
                return None
            stored = self.api.store.get(kind_of(self.api, *resource).storage_key, namespace,
                                        str(owner.get("name")))
            if stored is None or stored.obj["metadata"].get("uid") != owner.get("uid"):
                return None
            parent = next((ref for ref in stored.obj["metadata"].get("ownerReferences") or []
                           if ref.get("controller") and ref.get("kind") == "Deployment"), None)
            if owner.get("kind") == "ReplicaSet" and parent is not None:
                owner = parent
                continue
            return str(owner["uid"]), int((stored.obj.get("spec") or {}).get("replicas", 1))
        return None

    async def _sync(self, key: BudgetKey) -> None:
        stored = self.api.store.get(self.budgets_kind.storage_key, *key)
        if stored is None:
            return
        pods = [pod.obj for pod in self.api.store.list(self.pods_kind.storage_key, key[0])
                if selects(stored.obj, pod.obj)]
        status = budget_status(stored.obj, pods, self._scale_of, datetime.now(UTC))
        if status.get("disruptedPods"):  # look again when the oldest would expire
            self.queue.add_later(key, DELETION_TIMEOUT.total_seconds())
        if status == stored.obj.get("status"):
            return
        new = copy_json(stored.obj)
        new["status"] = status
        try:
            await self.api.update(self.budgets_kind, key[0], key[1], new, subresource="status")
        except StatusError as error:
            if error.code == 409:
                self.queue.add(key)
            elif error.code != 404:
                raise

    async def run(self) -> None:
        await run_together(
            watch_forever(self.api, self.budgets_kind, self._on_budget),
            watch_forever(self.api, self.pods_kind, self._on_pod),
            self.queue.run(),
        )
